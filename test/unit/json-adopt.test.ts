/**
 * The parsed-JSON fast path (adoptParsedJson + toFrozenJson + jsonTextOf): values fresh from the
 * server's JSON.parse are frozen in place, and their text is reused only when it is exactly what
 * JSON.stringify writes for the accepted value.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { adoptParsedJson, jsonTextOf, toFrozenJson } from '../../src/domain/json.js';
import { DomainError } from '../../src/domain/errors.js';
import type { Json } from '../../src/domain/event.js';
import { parseDataJson } from '../../src/server/convert.js';

function accept(text: string): Json {
  return toFrozenJson(parseDataJson(text, 0, 'data', true), 'data');
}

describe('adopted JSON.parse results', () => {
  it('are frozen in place and remember canonical text', () => {
    const text = '{"a":[1,{"b":"x\\n\\"y\\""}],"c":true,"d":null,"e":false,"__proto__":{"f":-12}}';
    const parsed = parseDataJson(text, 0, 'data', true);
    const v = toFrozenJson(parsed, 'data');
    expect(v).toBe(parsed);
    expect(Object.isFrozen(v)).toBe(true);
    expect(Object.isFrozen((v as { a: Json[] }).a[1])).toBe(true);
    expect(jsonTextOf(v)).toBe(text);
    expect(JSON.stringify(v)).toBe(text);
  });

  it('do not reuse text JSON.stringify would write differently', () => {
    for (const text of [
      '{ "a": 1 }', '{"a":1.5}', '{"a":1e3}', '{"a":"\\u0041"}', '{"a":"\\/"}', '{"a":1,"a":2}', '{"b":1,"1":2}',
      '{"a":1234567890123456789}', '[1,2 ]',
    ]) {
      const v = accept(text);
      expect(jsonTextOf(v), text).toBeUndefined();
    }
  });

  it('still refuse -0, infinities and excessive nesting with NOT_JSON', () => {
    for (const text of ['{"a":-0}', '[1e999]', '{"a":[-1e999]}']) expect(() => accept(text)).toThrow(DomainError);
    let deep = '1';
    for (let i = 0; i < 1500; i++) deep = `[${deep}]`;
    expect(() => toFrozenJson(adoptParsedJson(JSON.parse(deep) as Json), 'data')).toThrow(/nesting deeper than 1000/);
    try {
      accept('{"x":[0,{"y":-0}]}');
    } catch (e) {
      expect((e as DomainError).metadata).toMatchObject({ path: 'data.x[1].y' });
    }
  });

  it('remembered text is always JSON.stringify of the accepted value (property)', () => {
    const formats: Array<(v: unknown) => string> = [
      (v) => JSON.stringify(v),
      (v) => JSON.stringify(v, null, 1),
      (v) => JSON.stringify(v).replace(/\//g, '\\/'),
    ];
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.integer({ min: 0, max: formats.length - 1 }), (value, f) => {
        const text = formats[f]!(value);
        let v: Json;
        try {
          v = accept(text);
        } catch (e) {
          expect(e).toBeInstanceOf(DomainError); // -0 from fc.jsonValue
          return;
        }
        const kept = jsonTextOf(v);
        if (kept !== undefined) expect(kept).toBe(JSON.stringify(v));
        if (f === 0 && typeof v === 'object' && v !== null && !/[.eE\\]|\d{16}|"\d/.test(text)) expect(kept).toBe(text);
      }),
      { numRuns: 2000 },
    );
  });

  it('values not handed over are still copied', () => {
    const mine = { a: [1] };
    const v = toFrozenJson(mine, 'data');
    expect(v).not.toBe(mine);
    expect(Object.isFrozen(mine)).toBe(false);
    expect(jsonTextOf(v)).toBeUndefined();
  });
});
