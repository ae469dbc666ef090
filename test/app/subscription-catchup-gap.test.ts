/**
 * Catch-up -> live with a remote commit whose head report is still on its way (PG replicas): the
 * last catch-up read took its snapshot before replica B committed 6-7, this replica then committed
 * 8 (after a conflict and reload), and the read came back empty. Batch 8 does not follow on from
 * what the subscription has, so it must force one more store read instead of being delivered as
 * is (which would skip 6-7 for good).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService } from '../../src/app/session-service.js';
import { Subscription } from '../../src/app/subscription.js';
import { type EventItem } from '../../src/app/subscription-items.js';
import { eventSource } from '../../src/app/subscription-sources.js';
import type { ItemSource } from '../../src/app/subscription-sources.js';
import { MemoryDatabase, MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
const services: SessionService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) await s.close();
});

/**
 * The event source over `app`, whose next catch-up read (once armed) reads the store at once (its
 * snapshot) but answers only when released, like a PG read racing a commit on another replica.
 */
function delayedSource(app: SessionService, key: string) {
  const inner = eventSource(app, key);
  let gate: { started: () => void; release: Promise<void> } | undefined;
  const source: ItemSource<EventItem> = {
    ...inner,
    catchUp(after) {
      const reader = inner.catchUp(after);
      return {
        async next() {
          const page = reader.next();
          const g = gate;
          gate = undefined;
          if (g) {
            g.started();
            await g.release;
          }
          return page;
        },
      };
    },
  };
  /** Arms the next read; resolves once it took its snapshot, with the function that releases it. */
  const arm = (): Promise<() => void> => new Promise((started) => {
    let release!: () => void;
    const p = new Promise<void>((r) => { release = r; });
    gate = { started: () => started(release), release: p };
  });
  return { source, arm };
}

async function pullUntilSeq(sub: Subscription<EventItem>, seq: number): Promise<EventItem[]> {
  const out: EventItem[] = [];
  while (sub.cursor < seq) {
    const it = await sub.next();
    if (it === undefined) throw new Error('subscription ended');
    out.push(it);
  }
  return out;
}

describe('subscription catch-up -> live', () => {
  it('re-reads the store when a local batch committed during the last catch-up read does not follow on', async () => {
    const database = new MemoryDatabase();
    const a = new SessionService(new MemorySessionStore({ database }));
    const b = new SessionService(new MemorySessionStore({ database }));
    services.push(a, b);
    await a.createSession(ctx, { id: 's' });
    for (let i = 0; i < 6; i++) await a.append(ctx, 's', [user(`a${i}`)]);
    const { source, arm } = delayedSource(a, a.storageKey(ctx, 's'));
    const sub = await Subscription.open(a, ctx, 's', source, { bufferBytes: 1 << 20, sizeOf: () => 100, after: 5 });
    try {
      const armed = arm();
      const first = sub.next();
      const release = await armed; // the read from 6 took its (empty) snapshot
      // Replica B commits 6-7; its head report never reaches this replica's feed (still in flight).
      expect((await b.append(ctx, 's', [user('b6'), user('b7')])).seqs).toEqual([6, 7]);
      // This replica's writer conflicts, reloads and commits 8; the batch is published locally.
      expect((await a.append(ctx, 's', [user('a8')])).seqs).toEqual([8]);
      release();
      const items = [await first, ...(await pullUntilSeq(sub, 8))].filter((it) => it !== undefined);
      expect(items.map((it) => [it.kind, it.cursor])).toEqual([['event', 6], ['event', 7], ['event', 8]]);
      // Then the next read finds nothing new: caught up at 8, and live.
      expect(await sub.next()).toEqual({ kind: 'caught-up', cursor: 8 });
      expect(sub.stats.mode).toBe('live');
    } finally {
      sub.close();
    }
  });

  it('queues a local batch that follows on during catch-up (the success case next to it)', async () => {
    const database = new MemoryDatabase();
    const a = new SessionService(new MemorySessionStore({ database }));
    services.push(a);
    await a.createSession(ctx, { id: 's' });
    for (let i = 0; i < 6; i++) await a.append(ctx, 's', [user(`a${i}`)]);
    const { source, arm } = delayedSource(a, a.storageKey(ctx, 's'));
    const sub = await Subscription.open(a, ctx, 's', source, { bufferBytes: 1 << 20, sizeOf: () => 100, after: 5 });
    try {
      const armed = arm();
      const first = sub.next();
      const release = await armed;
      expect((await a.append(ctx, 's', [user('a6')])).seqs).toEqual([6]);
      release();
      // The read came back empty and nothing was dropped: live at once, then 6 from the buffer.
      expect(await first).toEqual({ kind: 'caught-up', cursor: 5 });
      expect(sub.stats.mode).toBe('live');
      expect((await sub.next())?.cursor).toBe(6);
    } finally {
      sub.close();
    }
  });
});
