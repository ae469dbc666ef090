/**
 * A call to the SQLite writer thread crosses as a tuple (append-thread-wire.ts PackedCall): what
 * the thread unpacks is the call the store queued, every field, with and without an idempotency
 * key and blobs.
 */
import { describe, expect, it } from 'vitest';
import { packCall, unpackCall } from '../../src/store/sqlite/append-thread-wire.js';
import type { QueuedAppend } from '../../src/store/sqlite/group-commit.js';

type Call = Omit<QueuedAppend, 'resolve' | 'reject'>;

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

  it('a different call does not unpack equal (the fields are not mixed up)', () => {
    const other: Call = { ...base, expectedWriter: base.writer, writer: base.expectedWriter };
    expect(unpackCall(packCall(1, other))).not.toEqual({ ...base, id: 1 });
    expect(unpackCall(packCall(1, other))).toMatchObject({ expectedWriter: 'w-new', writer: 'w-old' });
  });
});
