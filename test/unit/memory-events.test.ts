/**
 * The memory store's stored events (event-log.ts): kept in columns, read back exactly (the
 * client's canonical text when the plan kept one, else JSON.stringify's), frozen, never reachable
 * by the caller's later mutation; batches of one and of many, replace ops, citations, ignorable,
 * gaps in seqs (imports), lookups by seq.
 */
import { describe, expect, it } from 'vitest';
import type { Json, SessionEvent } from '../../src/domain/event.js';
import { adoptParsedJson } from '../../src/domain/json.js';
import { EventLog } from '../../src/store/memory/event-log.js';
import { storedEvent } from '../../src/store/memory/memory-events.js';

const TEXT = '{"n":1,"text":"héllo ✓"}';

/** Data as the server hands it to the domain: parsed, adopted with its canonical text, frozen in place (the text kept, when canonical). */
function adoptedData(text: string, members: number, canonical = true): { readonly value: Json; readonly text: string | undefined } {
  return adoptParsedJson(JSON.parse(text) as Json, { text: canonical ? text : undefined, members }, 'data');
}
const event = (data: Json, extra: Partial<SessionEvent> = {}): SessionEvent => ({ type: 'bench/tick', seq: 0, time: 1, data, ...extra });

function logOf(...batches: [SessionEvent[], (string | undefined)[]?][]): EventLog {
  const log = new EventLog();
  for (const [events, texts] of batches) log.push(EventLog.encode(events, texts));
  return log;
}

describe('memory store stored events', () => {
  it('keeps the canonical text the plan kept (not the parsed tree) and counts its UTF-8 bytes', () => {
    const data = adoptedData(TEXT, 2);
    expect(data.text).toBe(TEXT);
    const batch = EventLog.encode([event(data.value), event(data.value, { seq: 1 })], [data.text, data.text]);
    expect(batch.dataBytes).toBe(2 * Buffer.byteLength(TEXT, 'utf8'));
    const log = new EventLog();
    log.push(batch);
    const stored = log.at(0);
    expect(stored).toStrictEqual({ type: 'bench/tick', seq: 0, time: 1, dataText: TEXT, dataBytes: Buffer.byteLength(TEXT, 'utf8') });
    expect(Object.isFrozen(stored)).toBe(true);
    expect(log.at(1)).toMatchObject({ seq: 1, dataText: TEXT });
    // The known text is what is stored (the plan vouches for it), not a fresh JSON.stringify.
    const marked = logOf([[event({ n: 1 })], ['{"n":1,"marked":0}']]);
    expect(marked.at(0).dataText).toBe('{"n":1,"marked":0}');
  });

  it('a session of one small event holds a few KiB, not a slab of a MiB (5,000 sessions)', () => {
    const before = process.memoryUsage().external;
    const logs = Array.from({ length: 5_000 }, (_, i) => logOf([[event({ i })]]));
    const grown = process.memoryUsage().external - before;
    expect(logs[4_999]!.at(0).dataText).toBe('{"i":4999}');
    // 5,000 x 4 KiB is 20 MB; 1 MiB slabs would be 5 GB.
    expect(grown).toBeLessThan(100 * 1024 * 1024);
  });

  it('texts across slab boundaries and larger than a slab read back exactly (ASCII and not)', () => {
    const texts = ['"' + 'a'.repeat(600_000) + '"', '"' + 'é'.repeat(300_000) + '"', '"' + 'b'.repeat(1_500_000) + '"', '1', '"✓"', '"' + 'c'.repeat(3_000) + '"'];
    const log = new EventLog();
    for (let i = 0; i < texts.length; i++) log.push(EventLog.encode([event(JSON.parse(texts[i]!) as Json, { seq: i })], [texts[i]]));
    for (let i = 0; i < texts.length; i++) {
      expect(log.at(i).dataText).toBe(texts[i]);
      expect(log.at(i).dataBytes).toBe(Buffer.byteLength(texts[i]!));
    }
    // Many small events in a fresh log: its first slab is 4 KiB and each next one doubles
    // (4, 8, 16, ... KiB), so these texts cross several slab boundaries.
    const small = new EventLog();
    for (let i = 0; i < 5_000; i++) small.push(EventLog.encode([event({ i, pad: 'é'.repeat(i % 7) }, { seq: i })]));
    for (let i = 0; i < 5_000; i++) expect(small.at(i).dataText).toBe(JSON.stringify({ i, pad: 'é'.repeat(i % 7) }));
  });

  it('batches written at once read back exactly: ASCII and not in one batch, across slab boundaries, a batch larger than a slab', () => {
    const pick = (i: number): string => ['"a"', '"é"', '"\u{1f600}"', `"${'x'.repeat(i % 900)}"`, `"${'ü'.repeat(i % 300)}"`, '1'][i % 6]!;
    const log = new EventLog();
    const all: string[] = [];
    let seq = 0;
    // Batch sizes 1..40, then one batch of 1,500 ~1 KB texts (> 1 MiB, the largest slab).
    for (const size of [...Array.from({ length: 40 }, (_, k) => k + 1), 1_500]) {
      const texts = Array.from({ length: size }, (_, i) => (size === 1_500 ? `"${'z'.repeat(1_000 + (i % 3))}é"` : pick(seq + i)));
      log.push(EventLog.encode(texts.map((t, i) => event(JSON.parse(t) as Json, { seq: seq + i })), texts));
      all.push(...texts);
      seq += size;
    }
    expect(log.length).toBe(all.length);
    for (let i = 0; i < all.length; i++) {
      expect(log.at(i).dataText).toBe(all[i]);
      expect(log.at(i).dataBytes).toBe(Buffer.byteLength(all[i]!));
    }
  });

  it('a later mutation of the data the caller still holds does not reach the stored event', () => {
    const data = { n: 1, nested: { text: 'a' } };
    const sources = [0];
    const log = logOf([[event(data, { sourceEventSeqs: sources })]]);
    data.nested.text = 'changed';
    sources.push(5);
    expect(log.at(0).dataText).toBe('{"n":1,"nested":{"text":"a"}}');
    expect(log.at(0).sourceEventSeqs).toEqual([0]);
    expect(storedEvent(log.at(0)).data).toStrictEqual({ n: 1, nested: { text: 'a' } });
  });

  it('adopted data without a canonical text is stored as JSON.stringify writes it, not as sent', () => {
    const data = adoptedData('{ "n" : 1 }', 1, false);
    expect(data.text).toBeUndefined();
    const log = logOf([[event(data.value)], [data.text]]);
    expect(log.at(0).dataText).toBe('{"n":1}');
    expect(log.at(0).dataBytes).toBe(7);
  });

  it('reads back every event of batches of one and of many exactly, deep-frozen, envelope in canonical order, absent keys absent', () => {
    const events = [
      event({ a: [1, { b: 'ü' }] }, { seq: 0, time: -3, sourceEventSeqs: [], surfaceOp: 'append' }),
      event('é ✓ \u{1f600}', { seq: 1, type: '日本語' }),
      event(null, { seq: 2, sourceEventSeqs: [1, 0], surfaceOp: { op: 'replace', start: 0, end: 1 }, ignorable: true }),
      event([], { seq: 7, time: Number.MAX_SAFE_INTEGER }),
      event({ x: 'y' }, { seq: 9, type: '' }),
    ];
    const log = logOf([events.slice(0, 1)], [events.slice(1, 4)], [events.slice(4)]);
    expect(log.length).toBe(5);
    for (let i = 0; i < events.length; i++) {
      const back = storedEvent(log.at(i));
      expect(back).toStrictEqual(events[i]);
      expect(Object.isFrozen(back)).toBe(true);
      expect(log.seqAt(i)).toBe(events[i]!.seq);
      expect(log.typeAt(i)).toBe(events[i]!.type);
      expect(log.surfaceOpAt(i)).toEqual(events[i]!.surfaceOp);
      const { data: _, time: __, ...structural } = events[i]!;
      expect(log.structuralAt(i)).toStrictEqual(structural);
    }
    expect(Object.keys(storedEvent(log.at(2)))).toEqual(['type', 'seq', 'time', 'data', 'sourceEventSeqs', 'surfaceOp', 'ignorable']);
    expect(Object.isFrozen((storedEvent(log.at(0)).data as { a: object[] }).a[1])).toBe(true);
    // Seqs with gaps (an import): lower bounds by seq.
    expect([0, 1, 2, 3, 7, 8, 9, 10].map((s) => log.lowerBound(s))).toEqual([0, 1, 2, 3, 3, 4, 4, 5]);
  });

  it('grows past its first capacity without losing a column', () => {
    const log = new EventLog();
    for (let b = 0; b < 50; b++) log.push(EventLog.encode(Array.from({ length: 7 }, (_, i) => event({ b, i }, { seq: b * 7 + i, time: b, type: `t${i % 3}`, ...(i === 3 ? { surfaceOp: 'append' as const } : {}) }))));
    expect(log.length).toBe(350);
    expect(storedEvent(log.at(349))).toStrictEqual(event({ b: 49, i: 6 }, { seq: 349, time: 49, type: 't0' }));
    expect(storedEvent(log.at(3))).toStrictEqual(event({ b: 0, i: 3 }, { seq: 3, time: 0, type: 't0', surfaceOp: 'append' }));
    expect(log.lowerBound(200)).toBe(200);
  });
});
