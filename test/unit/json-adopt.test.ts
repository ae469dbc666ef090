/**
 * The parsed-JSON fast path (parseDataJson + adoptParsedJson): values fresh from the server's
 * JSON.parse are frozen in place, and their text is kept only when it is exactly what
 * JSON.stringify writes for the accepted value.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { adoptParsedJson, toFrozenJson, type ParsedJsonText } from '../../src/domain/json.js';
import { DomainError } from '../../src/domain/errors.js';
import type { Json } from '../../src/domain/event.js';
import { parseDataJson } from '../../src/server/convert.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import { SessionService } from '../../src/app/session-service.js';
import { ANONYMOUS } from '../../src/app/app-types.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';

/** The value accepted and the text kept, as the server's append path gets them. */
function adopt(text: string): { readonly value: Json; readonly text: string | undefined; readonly parsed: Json } {
  const info: (ParsedJsonText | undefined)[] = [];
  const parsed = parseDataJson(text, 0, 'data', info);
  expect(info).toHaveLength(1);
  return { ...adoptParsedJson(parsed, info[0]!, 'data'), parsed };
}
const accept = (text: string): Json => adopt(text).value;
const keptText = (text: string): string | undefined => adopt(text).text;

describe('adopted JSON.parse results', () => {
  it('are frozen in place and remember canonical text', () => {
    const text = '{"a":[1,{"b":"x\\n\\"y\\""}],"c":true,"d":null,"e":false,"__proto__":{"f":-12}}';
    const { value: v, text: kept, parsed } = adopt(text);
    expect(v).toBe(parsed);
    expect(Object.isFrozen(v)).toBe(true);
    expect(Object.isFrozen((v as { a: Json[] }).a[1])).toBe(true);
    expect(kept).toBe(text);
    expect(JSON.stringify(v)).toBe(text);
    // Adopted again (a retried plan): the same value and text.
    expect(adoptParsedJson(v, { text, members: 7 }, 'data')).toEqual({ value: v, text });
  });

  it('do not reuse text JSON.stringify would write differently', () => {
    for (const text of [
      '{ "a": 1 }', '{"a":1.5}', '{"a":1e3}', '{"a":"\\u0041"}', '{"a":"\\/"}', '{"a":1,"a":2}', '{"b":1,"1":2}',
      '{"a":1234567890123456789}', '[1,2 ]',
    ]) {
      expect(keptText(text), text).toBeUndefined();
    }
  });

  it('still refuse -0, infinities and excessive nesting with NOT_JSON', () => {
    for (const text of ['{"a":-0}', '[1e999]', '{"a":[-1e999]}']) expect(() => accept(text)).toThrow(DomainError);
    let deep = '1';
    for (let i = 0; i < 1500; i++) deep = `[${deep}]`;
    expect(() => adoptParsedJson(JSON.parse(deep) as Json, { text: undefined, members: 0 }, 'data')).toThrow(/nesting deeper than 1000/);
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
        let kept: string | undefined;
        try {
          ({ value: v, text: kept } = adopt(text));
        } catch (e) {
          expect(e).toBeInstanceOf(DomainError); // -0 from fc.jsonValue
          return;
        }
        if (kept !== undefined) expect(kept).toBe(JSON.stringify(v));
        if (f === 0 && !/[.eE\\]|\d{16}|"\d/.test(text)) expect(kept).toBe(text);
      }),
      { numRuns: 2000 },
    );
  });

  it('values not handed over are still copied', () => {
    const mine = { a: [1] };
    const v = toFrozenJson(mine, 'data');
    expect(v).not.toBe(mine);
    expect(Object.isFrozen(mine)).toBe(false);
  });

  it('primitives keep their canonical text too; a typed form has no entry to adopt', () => {
    expect(adopt('"é \\n ✓"')).toMatchObject({ value: 'é \n ✓', text: '"é \\n ✓"' });
    expect(adopt('123')).toMatchObject({ value: 123, text: '123' });
    expect(adopt('1e2')).toMatchObject({ value: 100, text: undefined });
    expect(() => adopt('-0')).toThrow(DomainError);
    expect(adopt('null')).toMatchObject({ value: null, text: 'null' });
  });

  it('through a plan (PlanContext.parsedData): handed data is frozen in place and its canonical text kept per event; without it the data is copied and no text kept', () => {
    const texts = ['{"n":1,"s":"é"}', '{ "n": 2 }', '[1,2]'];
    const info: (ParsedJsonText | undefined)[] = [];
    const values = texts.map((t) => parseDataJson(t, 0, 'data', info));
    const candidates = values.map((data) => ({ type: 'x/y', data }));
    const ctx = { mode: 'append' as const, now: () => 5, sessionId: 's', lookup: () => undefined };
    const plan = SessionEngine.create().plan([...candidates, { type: 'x/z', data: { typed: true } }], { ...ctx, parsedData: info });
    expect(plan.dataTexts).toEqual(['{"n":1,"s":"é"}', undefined, '[1,2]', undefined]);
    expect(plan.events.slice(0, 3).map((e) => e.data)).toEqual(values);
    for (let i = 0; i < 3; i++) {
      expect(plan.events[i]!.data).toBe(values[i]);
      expect(Object.isFrozen(values[i])).toBe(true);
    }
    const mine = { n: 1 };
    const copied = SessionEngine.create().plan([{ type: 'x/y', data: mine }], ctx);
    expect(copied.dataTexts).toBeUndefined();
    expect(copied.events[0]!.data).not.toBe(mine);
    expect(Object.isFrozen(mine)).toBe(false);
    // A refused candidate's handed data is refused as before (NOT_JSON at its path).
    const bad: (ParsedJsonText | undefined)[] = [];
    const v = parseDataJson('{"a":[-0]}', 0, 'data', bad);
    expect(() => SessionEngine.create().plan([{ type: 'x/y', data: v }], { ...ctx, parsedData: bad })).toThrow(expect.objectContaining({ reason: 'NOT_JSON', metadata: { index: '0', path: 'data.a[0]' } }));
  });

  it('the app refuses parsedData that does not match its candidates one to one, and stores nothing; the matching append stores the kept text', async () => {
    const store = new MemorySessionStore();
    const app = new SessionService(store);
    await app.createSession(ANONYMOUS, { id: 's' });
    const info: (ParsedJsonText | undefined)[] = [];
    const data = parseDataJson('{"n":1}', 0, 'data', info);
    await expect(app.append(ANONYMOUS, 's', [{ type: 'x/y', data }, { type: 'x/y', data: 2 }], { parsedData: info })).rejects.toThrow(/parsedData has 1 entries for 2 candidates/);
    expect(await store.readEventTexts('s', { fromSeq: 0, direction: 'forward', limit: 10 })).toEqual([]);
    await app.append(ANONYMOUS, 's', [{ type: 'x/y', data }], { parsedData: info });
    expect((await store.readEventTexts('s', { fromSeq: 0, direction: 'forward', limit: 10 })).map((e) => e.dataText)).toEqual(['{"n":1}']);
  });
});
