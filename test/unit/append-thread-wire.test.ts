/**
 * A call to the SQLite writer thread crosses as a tuple (append-thread-wire.ts PackedCall): what
 * the thread unpacks is the call the store queued, every field, with and without an idempotency
 * key and blobs.
 */
import { describe, expect, it } from 'vitest';
import { packCall, unpackQueued, type CallAnswers, type PackedCall } from '../../src/store/sqlite/append-thread-wire.js';
import type { AppendOutcome } from '../../src/app/store-port.js';
import type { QueuedAppend } from '../../src/store/sqlite/group-commit.js';
import { addChecksums, type EventRow } from '../../src/store/sqlite/row-codec.js';
import { encodeSeqs } from '../../src/store/sqlite/codec.js';

type Call = Omit<QueuedAppend, 'resolve' | 'reject'>;

/** What the writer's shared answer methods were called with. */
const answered: [number, AppendOutcome | unknown][] = [];
const answers: CallAnswers = {
  resolve(outcome) { answered.push([this.id, outcome]); },
  reject(error) { answered.push([this.id, error]); },
};
/** The call of a tuple as the thread queues it, without its answer methods. */
function unpackCall(p: PackedCall): Call & { id: number } {
  const { resolve: _r, reject: _j, ...call } = unpackQueued(p, answers);
  return call;
}

const base: Call = {
  sessionId: 's', expectedNextSeq: 3, expectedWriter: 'w-old', writer: 'w-new',
  rows: [['s', 3, 'user', 1_760_000_000_000, '{"a":1}', null, 'append', null, 0, 0, 4, null]],
  dataBytes: 7, surfaceLength: 4, idempotency: undefined, maxBytes: 0, at: 1_760_000_000_001,
};

describe('packCall / unpackCall', () => {
  it('a plain call comes back as it was queued, numbered', () => {
    expect(unpackCall(structuredClone(packCall(9, base)))).toEqual({ ...base, id: 9 });
  });

  it('an idempotency key, a quota and blobs come back too', () => {
    const call: Call = {
      ...base, idempotency: { key: 'k-1', requestHash: 'h'.repeat(64) }, maxBytes: 1000,
      blobs: { puts: [], eventBlobs: [['sha256:ab']] },
    };
    expect(unpackCall(structuredClone(packCall(10, call)))).toEqual({ ...call, id: 10 });
  });

  it('each call is answered through the shared methods, with its own id', () => {
    answered.length = 0;
    const a = unpackQueued(structuredClone(packCall(4, base)), answers);
    const b = unpackQueued(structuredClone(packCall(5, base)), answers);
    expect(a.resolve).toBe(b.resolve);
    const error = new Error('x');
    b.reject(error);
    a.resolve({ kind: 'appended' });
    expect(answered).toEqual([[5, error], [4, { kind: 'appended' }]]);
  });

  it('a different call does not unpack equal (the fields are not mixed up)', () => {
    const other: Call = { ...base, expectedWriter: base.writer, writer: base.expectedWriter };
    expect(unpackCall(packCall(1, other))).not.toEqual({ ...base, id: 1 });
    expect(unpackCall(packCall(1, other))).toMatchObject({ expectedWriter: 'w-new', writer: 'w-old' });
  });
});

describe('a call of several rows crosses by column (packed-rows.ts)', () => {
  const rows: EventRow[] = [
    ['s', 3, 'user/message', 1_760_000_000_000, '{"text":"héllo 🦊 \\u0000"}', null, 'append', null, 0, 0, 4, null],
    ['s', 4, 'assistant/message', 1_760_000_000_001, '{}', encodeSeqs([3]), JSON.stringify({ op: 'replace', start: 0, end: 1 }), 1, 0, 0, -1, '{"input":3}'],
    ['s', 5, 'user/message', 1_760_000_000_002, '', null, null, null, 0, 0, null, null],
    ['s', 6, 'tick', 1_760_000_000_003, '"x"', null, null, 1, 0, 0, 2, null],
  ];
  const call: Call = { ...base, expectedNextSeq: 3, rows, dataBytes: 40 };
  /** What the writer thread stores: the rows with their checksums (a crossed citation list viewed as a Buffer). */
  const stored = (r: EventRow[]): EventRow[] => {
    const copy = r.map((row) => [...row] as EventRow);
    addChecksums(copy);
    return copy;
  };

  it('the thread unpacks exactly the rows queued, and stores them with the same checksums', () => {
    const packed = packCall(7, call);
    // No array per row crosses: the rows are a handful of values.
    expect(Array.isArray((packed[5] as unknown[])[0])).toBe(false);
    const back = unpackCall(structuredClone(packed));
    expect(stored(back.rows)).toEqual(stored(rows));
    expect({ ...back, rows: undefined }).toEqual({ ...call, id: 7, rows: undefined });
  });

  it('one type for all rows, and rows of another session (sent as rows), come back as queued', () => {
    const same = rows.map((r) => [...r.slice(0, 2), 'tick', ...r.slice(3)] as EventRow);
    expect(stored(unpackCall(structuredClone(packCall(1, { ...call, rows: same }))).rows)).toEqual(stored(same));
    const mixed = [rows[0]!, ['other', ...rows[1]!.slice(1)] as EventRow];
    const packed = packCall(2, { ...call, rows: mixed });
    expect(Array.isArray((packed[5] as unknown[])[0])).toBe(true);
    expect(stored(unpackCall(structuredClone(packed)).rows)).toEqual(stored(mixed));
  });

  it('a changed row does not come back equal (the columns are not mixed up)', () => {
    const swapped = rows.map((r, i) => (i === 1 ? ([...r.slice(0, 4), rows[0]![4], ...r.slice(5)] as EventRow) : r));
    expect(stored(unpackCall(structuredClone(packCall(3, { ...call, rows: swapped }))).rows)).not.toEqual(stored(rows));
  });
});
