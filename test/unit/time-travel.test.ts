/**
 * as_of_seq (src/app/time-travel.ts, through the app facade) over the memory store: the surface
 * and model history as of every batch of the viewer's demo session (compaction, nested prunes,
 * images) equal what the live session answered right after that batch; past the head is refused
 * and leaves the log untouched. (test/app/time-travel.test.ts compares with a naive replay.)
 */
import { describe, expect, it } from 'vitest';
import { SessionService, ANONYMOUS, type CallContext } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { eventInputToCandidate } from '../../src/server/convert.js';
import { DomainError } from '../../src/domain/errors.js';
import { DEMO, demoBatches } from '../support/demo-session.js';

const surfaceAsOf = (app: SessionService, ctx: CallContext, id: string, seq: number) => app.getSurface(ctx, id, seq);
const modelHistoryAsOf = (app: SessionService, ctx: CallContext, id: string, seq: number) => app.getMessages(ctx, id, 'model', { asOfSeq: seq });

async function demo(): Promise<{ app: SessionService; seen: Map<number, { surface: number[]; messages: unknown }> }> {
  const app = new SessionService(new MemorySessionStore());
  await app.createSession(ANONYMOUS, { id: 'd' });
  const seen = new Map<number, { surface: number[]; messages: unknown }>();
  for (const batch of demoBatches()) {
    const res = await app.append(ANONYMOUS, 'd', batch.map((e, i) => eventInputToCandidate(e, i)));
    // Events inside a batch are never observable on their own; the batch's last seq is.
    seen.set(res.seqs[res.seqs.length - 1]!, {
      surface: (await app.getSurface(ANONYMOUS, 'd')).seqs,
      messages: (await app.getMessages(ANONYMOUS, 'd', 'model')).messages,
    });
  }
  return { app, seen };
}

describe('time travel (as_of_seq)', () => {
  it('gives, as of each batch, exactly the surface and model history the session had then', async () => {
    const { app, seen } = await demo();
    expect([...seen.keys()].at(-1)).toBe(DEMO.head);
    for (const [seq, live] of seen) {
      const s = await surfaceAsOf(app, ANONYMOUS, 'd', seq);
      expect(s.seqs, `surface as of ${seq}`).toEqual(live.surface);
      expect(s.headSeq).toBe(seq);
      const m = await modelHistoryAsOf(app, ANONYMOUS, 'd', seq);
      expect(m.messages, `messages as of ${seq}`).toEqual(live.messages);
    }
    // Before the compaction the first turn is on the surface; after it, the summary replaces it.
    expect((await surfaceAsOf(app, ANONYMOUS, 'd', DEMO.compactionReplacement - 1)).seqs).toEqual([0, 1, 2, 3, 4, 5]);
    expect((await surfaceAsOf(app, ANONYMOUS, 'd', DEMO.compactionReplacement)).seqs).toEqual([8, 4, 5]);
  });

  it('refuses a seq after the head with AS_OF_SEQ_AFTER_HEAD and leaves the log untouched', async () => {
    const { app } = await demo();
    const before = await app.listEvents(ANONYMOUS, 'd', { direction: 'forward' });
    const err = await surfaceAsOf(app, ANONYMOUS, 'd', DEMO.head + 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).reason).toBe('AS_OF_SEQ_AFTER_HEAD');
    expect((err as DomainError).metadata).toEqual({ asOfSeq: String(DEMO.head + 1), headSeq: String(DEMO.head) });
    expect(await app.listEvents(ANONYMOUS, 'd', { direction: 'forward' })).toEqual(before);
    // The head itself is fine.
    expect((await surfaceAsOf(app, ANONYMOUS, 'd', DEMO.head)).seqs).toEqual([...DEMO.surface]);
  });

  it('refuses any seq on an empty log, and another tenant’s session is not found', async () => {
    const app = new SessionService(new MemorySessionStore());
    await app.createSession(ANONYMOUS, { id: 'e' });
    await expect(surfaceAsOf(app, ANONYMOUS, 'e', 0)).rejects.toMatchObject({ reason: 'AS_OF_SEQ_AFTER_HEAD' });
    await expect(surfaceAsOf(app, { tenant: 'other' }, 'e', 0)).rejects.toMatchObject({ reason: 'SESSION_NOT_FOUND' });
  });
});
