/**
 * A read that hydrates the message projection (GetSession's token counts, GetMessages, compaction
 * planning) while the same session's appends keep committing. The hydration reads the surface's
 * events from the store and installs the projection only if the surface did not move meanwhile;
 * before SessionHandle.readHeld it retried optimistically every time, so an append landing
 * during each store read used up every attempt and the read answered
 * CONFLICT_RETRIES_EXHAUSTED (server-concurrency's delete/re-create churn test failed ~1 in 3,
 * and READ_ATTEMPTS had been raised from 8 to 64 to hide it). Here every store read of the
 * hydration makes an append commit (or, once writes are held, be queued) before it returns.
 */
import { describe, expect, it } from 'vitest';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import { READ_ATTEMPTS } from '../../src/app/app-types.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import type { CandidateEvent, SessionEvent } from '../../src/domain/event.js';

const user = (text: string): CandidateEvent => ({
  type: 'user/message',
  data: { id: text, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
  surfaceOp: 'append',
});

/** A memory store whose getEvents (the hydration's read) first has `during` start an append. */
class ChurningStore extends MemorySessionStore {
  during: (() => Promise<unknown>) | undefined;
  hydrationReads = 0;
  readonly startedAppends: Promise<unknown>[] = [];

  override async getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    if (this.during !== undefined) {
      this.hydrationReads++;
      const appended = this.during();
      this.startedAppends.push(appended);
      // The memory store commits within microtasks: the append has committed by the next
      // macrotask turn unless the session holds its writes (then it waits in the handle's queue).
      await Promise.race([appended, new Promise((r) => setImmediate(r))]);
    }
    return super.getEvents(sessionId, seqs);
  }
}

async function churn(): Promise<{ app: SessionService; store: ChurningStore }> {
  const store = new ChurningStore();
  const app = new SessionService(store, undefined, () => 1000);
  await app.createSession(ANONYMOUS, { id: 's' });
  for (let i = 0; i < 3; i++) await app.append(ANONYMOUS, 's', [user(`before-${i}`)]);
  let n = 0;
  store.during = () => app.append(ANONYMOUS, 's', [user(`during-${n++}`)]);
  return { app, store };
}

describe('a hydrating read under same-session appends', () => {
  it('answers after one lost race: the second attempt holds the writes for its store read, which then commit in order', async () => {
    const { app, store } = await churn();
    const snap = await app.modelSnapshot(ANONYMOUS, 's', { surface: true });
    // Attempt 1 lost the race (its append committed during the read), attempt 2 held the writes.
    expect(store.hydrationReads).toBe(2);
    expect(snap.headSeq).toBe(3);
    expect(snap.nodeMessages).toHaveLength(4);
    store.during = undefined;
    // The append held during the second read was released and committed after it: nothing lost.
    const results = (await Promise.all(store.startedAppends)) as { seqs: number[] }[];
    expect(results.map((r) => r.seqs)).toEqual([[3], [4]]);
    expect((await app.getSession(ANONYMOUS, 's')).eventCount).toBe(5);
    // The projection kept in step with the released append (no second hydration).
    const after = await app.modelSnapshot(ANONYMOUS, 's', { surface: true });
    expect(after.nodeMessages).toHaveLength(5);
    expect(store.hydrationReads).toBe(2);
  });

  it('the optimistic attempt alone would never answer: every read loses the race when the writes are not held', async () => {
    const { app, store } = await churn();
    // The same churn with the handle's hold defeated (what the code did before readHeld):
    // every hydration read sees an append commit, and the read runs out of attempts.
    const handle = await app.cache.handle(ANONYMOUS, 's');
    handle.readHeld = <T>(fn: () => Promise<T>): Promise<T> => fn();
    await expect(app.modelSnapshot(ANONYMOUS, 's', { surface: true })).rejects.toMatchObject({ reason: 'CONFLICT_RETRIES_EXHAUSTED' });
    expect(store.hydrationReads).toBe(READ_ATTEMPTS);
    store.during = undefined;
    await Promise.all(store.startedAppends);
    expect((await app.getSession(ANONYMOUS, 's')).eventCount).toBe(3 + READ_ATTEMPTS);
  });
});
