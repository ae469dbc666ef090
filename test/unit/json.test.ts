import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { assertLosslessJson, deepFreeze, isLosslessJson, jsonEqual, jsonSyntaxProblem, toFrozenJson } from '../../src/domain/json.js';

describe('lossless JSON', () => {
  it('given plain JSON values, when copied, then they are equal, deep-frozen and not shared', () => {
    const input = { a: [1, 'x', null, true, { b: 2.5 }], c: {} };
    const out = toFrozenJson(input) as typeof input;
    expect(out).toEqual(input);
    expect(out).not.toBe(input);
    expect(out.a).not.toBe(input.a);
    expect(Object.isFrozen(out)).toBe(true);
    expect(Object.isFrozen(out.a)).toBe(true);
    expect(Object.isFrozen(out.a[4])).toBe(true);
    input.a.push(9);
    expect(out.a).toHaveLength(5);
  });

  it('given a null-prototype object, when checked, then it is accepted', () => {
    const o = Object.create(null) as Record<string, unknown>;
    o['k'] = 1;
    expect(isLosslessJson(o)).toBe(true);
  });

  it('given a __proto__ own key, when copied, then it stays an own data key', () => {
    const o = JSON.parse('{"__proto__": {"x": 1}}') as unknown;
    const out = toFrozenJson(o) as Record<string, unknown>;
    expect(Object.keys(out)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
  });

  const sparse = [1, , 3];
  const cyclic: Record<string, unknown> = {};
  cyclic['self'] = cyclic;
  const withSymbol = { [Symbol('s')]: 1 };
  const nonEnumerable = Object.defineProperty({}, 'hidden', { value: 1, enumerable: false });
  class Thing {
    x = 1;
  }
  const rejected: [string, unknown][] = [
    ['BigInt', 1n],
    ['function', () => 1],
    ['symbol', Symbol('x')],
    ['undefined', undefined],
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['-Infinity', -Infinity],
    ['-0', -0],
    ['cycle', cyclic],
    ['sparse array', sparse],
    ['Map', new Map()],
    ['Set', new Set()],
    ['Date', new Date(0)],
    ['class instance', new Thing()],
    ['symbol key', withSymbol],
    ['non-enumerable key', nonEnumerable],
    ['nested undefined', { a: [{ b: undefined }] }],
  ];
  it.each(rejected)('given %s, when checked, then NOT_JSON', (_name, value) => {
    expect(isLosslessJson(value)).toBe(false);
    let err: unknown;
    try {
      assertLosslessJson(value, 'data');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).reason).toBe('NOT_JSON');
  });

  it('given a shared (non-cyclic) subobject, when copied, then it is accepted', () => {
    const shared = { x: 1 };
    expect(isLosslessJson({ a: shared, b: shared })).toBe(true);
  });

  it('given a nested bad value, when checked, then the error names its path', () => {
    expect(() => toFrozenJson({ a: [0, { b: NaN }] }, 'data')).toThrow(/data\.a\[1\]\.b/);
  });

  it('deepFreeze freezes nested values in place', () => {
    const v = deepFreeze({ a: { b: [1] } });
    expect(Object.isFrozen(v.a.b)).toBe(true);
  });
});

describe('jsonEqual', () => {
  it('ignores key order', () => {
    expect(jsonEqual({ a: 1, b: [1, { c: 2, d: 3 }] }, { b: [1, { d: 3, c: 2 }], a: 1 })).toBe(true);
  });
  it('treats key presence as significant', () => {
    expect(jsonEqual({ a: 1 }, { a: 1, isError: false })).toBe(false);
    expect(jsonEqual({ a: null }, {})).toBe(false);
  });
  it('compares arrays element by element and distinguishes arrays from objects', () => {
    expect(jsonEqual([1, 2], [2, 1])).toBe(false);
    expect(jsonEqual([], {})).toBe(false);
    expect(jsonEqual({ 0: 1 }, [1])).toBe(false);
  });
  it('compares scalars by value', () => {
    expect(jsonEqual('a', 'a')).toBe(true);
    expect(jsonEqual(1, '1')).toBe(false);
    expect(jsonEqual(null, {})).toBe(false);
  });
});

describe('jsonSyntaxProblem', () => {
  const problem = (text: string): string => {
    try {
      JSON.parse(text);
    } catch (e) {
      return jsonSyntaxProblem(e);
    }
    throw new Error('parsed');
  };
  it('says what is wrong without quoting the text (V8 quotes it; it would reach logs)', () => {
    expect(problem('secret-hunter2 xx')).toBe("Unexpected token 's' is not valid JSON");
    expect(problem(`{"a":"${'secret '.repeat(20)}`)).not.toContain('secret');
    expect(problem('[1,]')).toBe("Unexpected token ']' is not valid JSON");
    // V8 cuts a long excerpt at the front, the back or both: none of it stays.
    expect(problem('["passwordpasswordpassword", x, "secretsecretsecretsecret"]')).toBe("Unexpected token 'x' is not valid JSON");
    expect(problem(`["${'secret'.repeat(10)}", tru ]`)).not.toMatch(/secret|cret/);
    expect(problem(`["${'a'.repeat(100)}", '`)).toBe("Unexpected token ''' is not valid JSON");
  });
  it('keeps messages that carry a position and no text', () => {
    expect(problem('{"a":1')).toBe(`Expected ',' or '}' after property value in JSON at position 6`);
    expect(problem('{}x')).toBe('Unexpected non-whitespace character after JSON at position 2');
  });
});
