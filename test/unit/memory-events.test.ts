import { describe, expect, it } from 'vitest';
import type { Json, SessionEvent } from '../../src/domain/event.js';
import { adoptParsedJson } from '../../src/domain/json.js';
import { canonicalEvent, eventBytes, storedEvent } from '../../src/store/memory/memory-events.js';

const TEXT = '{"n":1,"text":"héllo ✓"}';

/** Data as the server hands it to the domain: parsed, adopted with its canonical text, frozen in place (the text kept, when canonical). */
function adoptedData(text: string, members: number, canonical = true): { readonly value: Json; readonly text: string | undefined } {
  return adoptParsedJson(JSON.parse(text) as Json, { text: canonical ? text : undefined, members }, 'data');
}
const event = (data: Json, extra: Partial<SessionEvent> = {}): SessionEvent => ({ type: 'bench/tick', seq: 0, time: 1, data, ...extra });

describe('memory store stored events', () => {
  it('keeps the canonical text the plan kept (not the parsed tree) and counts its UTF-8 bytes', () => {
    const data = adoptedData(TEXT, 2);
    expect(data.text).toBe(TEXT);
    const stored = canonicalEvent(event(data.value), data.text);
    expect(stored).toStrictEqual({ type: 'bench/tick', seq: 0, time: 1, dataText: TEXT, dataBytes: Buffer.byteLength(TEXT, 'utf8') });
    expect(Object.isFrozen(stored)).toBe(true);
    expect(eventBytes([stored, stored])).toBe(2 * Buffer.byteLength(TEXT, 'utf8'));
  });

  it('a later mutation of the data the caller still holds does not reach the stored event', () => {
    const data = { n: 1, nested: { text: 'a' } };
    const stored = canonicalEvent(event(data));
    data.nested.text = 'changed';
    expect(stored.dataText).toBe('{"n":1,"nested":{"text":"a"}}');
    expect(storedEvent(stored).data).toStrictEqual({ n: 1, nested: { text: 'a' } });
  });

  it('adopted data without a canonical text is stored as JSON.stringify writes it, not as sent', () => {
    const data = adoptedData('{ "n" : 1 }', 1, false);
    expect(data.text).toBeUndefined();
    const stored = canonicalEvent(event(data.value), data.text);
    expect(stored.dataText).toBe('{"n":1}');
    expect(stored.dataBytes).toBe(7);
  });

  it('reads back the event exactly, deep-frozen, with the envelope in canonical order and absent keys absent', () => {
    const e = event({ a: [1, { b: 'ü' }] }, { seq: 4, time: -3, sourceEventSeqs: [1, 2], surfaceOp: { op: 'replace', start: 1, end: 2 }, ignorable: true });
    const back = storedEvent(canonicalEvent(e));
    expect(back).toStrictEqual(e);
    expect(Object.keys(back)).toEqual(['type', 'seq', 'time', 'data', 'sourceEventSeqs', 'surfaceOp', 'ignorable']);
    expect(Object.isFrozen(back)).toBe(true);
    expect(Object.isFrozen((back.data as { a: object[] }).a[1])).toBe(true);
    expect(storedEvent(canonicalEvent(event(null)))).toStrictEqual(event(null));
  });
});
