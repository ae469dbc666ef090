import { describe, expect, it } from 'vitest';
import type { Json, SessionEvent } from '../../src/domain/event.js';
import { adoptParsedJson, jsonTextOf, toFrozenJson } from '../../src/domain/json.js';
import { canonicalEvent, dataBytes, eventBytes } from '../../src/store/memory/memory-events.js';

const TEXT = '{"n":1,"text":"héllo ✓"}';

/** Data as the server hands it to the domain: parsed, adopted with its canonical text, frozen in place. */
function adoptedData(text: string, members: number, canonical = true): Json {
  return toFrozenJson(adoptParsedJson(JSON.parse(text) as Json, canonical ? text : undefined, members), 'data');
}
const event = (data: Json): SessionEvent => ({ type: 'bench/tick', seq: 0, time: 1, data });

describe('memory store canonical copies', () => {
  it('shares data that toFrozenJson froze in place with its canonical text, and counts its bytes from that text', () => {
    const data = adoptedData(TEXT, 2);
    expect(jsonTextOf(data)).toBe(TEXT);
    const stored = canonicalEvent(event(data));
    expect(stored.data).toBe(data);
    expect(Object.isFrozen(stored)).toBe(true);
    expect(Object.isFrozen(stored.data)).toBe(true);
    expect(dataBytes(stored.data)).toBe(Buffer.byteLength(TEXT, 'utf8'));
    expect(eventBytes([stored, stored])).toBe(2 * Buffer.byteLength(TEXT, 'utf8'));
  });

  it('copies (and deep-freezes) data the caller still holds: a later mutation does not reach the stored event', () => {
    const data = { n: 1, nested: { text: 'a' } };
    const stored = canonicalEvent(event(data));
    expect(stored.data).not.toBe(data);
    data.nested.text = 'changed';
    expect(stored.data).toStrictEqual({ n: 1, nested: { text: 'a' } });
    expect(Object.isFrozen((stored.data as { nested: object }).nested)).toBe(true);
    expect(dataBytes(stored.data)).toBe(Buffer.byteLength(JSON.stringify({ n: 1, nested: { text: 'a' } }), 'utf8'));
  });

  it('copies adopted data without a canonical text (its bytes are those of JSON.stringify, not of the sent text)', () => {
    const sent = '{ "n" : 1 }';
    const data = adoptedData(sent, 1, false);
    expect(jsonTextOf(data)).toBeUndefined();
    const stored = canonicalEvent(event(data));
    expect(stored.data).not.toBe(data);
    expect(stored.data).toStrictEqual({ n: 1 });
    expect(dataBytes(stored.data)).toBe(Buffer.byteLength('{"n":1}', 'utf8'));
  });
});
