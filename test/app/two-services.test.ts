/**
 * The app tier over one shared store: two SessionService instances (two "processes") over one
 * memory store, each with its own store-driven change feed. A subscriber on one sees every commit
 * of the other, in order, with no gap or duplicate, and a hot cache never answers a read with a
 * state older than what the other service committed before the read.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService, DEFAULT_LIMITS } from '../../src/app/session-service.js';
import { StoreChangeFeed } from '../../src/app/store-change-feed.js';
import { LocalChangeFeed } from '../../src/app/local-change-feed.js';
import { Subscription } from '../../src/app/subscription.js';
import { type EventItem, type Item, type SurfaceItem } from '../../src/app/subscription-items.js';
import { eventSource, surfaceSource } from '../../src/app/subscription-sources.js';
import { MemoryDatabase, MemorySessionStore } from '../../src/store/memory/memory-store.js';
import type { SessionStore } from '../../src/app/store-port.js';
import { user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
let database: MemoryDatabase;
let services: SessionService[];

function service(store: SessionStore): SessionService {
  const s = new SessionService(store, DEFAULT_LIMITS, Date.now, undefined, undefined, new StoreChangeFeed(store.openHeadWatch()));
  services.push(s);
  return s;
}

beforeEach(() => {
  database = new MemoryDatabase();
  services = [];
});
afterEach(async () => {
  for (const s of services) await s.close();
});

/** Pulls items until one reaches `cursor` (or the deadline passes). */
async function pullUntil<I extends Item>(sub: Subscription<I>, cursor: number, ms = 10_000): Promise<I[]> {
  const out: I[] = [];
  const deadline = Date.now() + ms;
  while (sub.cursor < cursor) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`timed out at cursor ${sub.cursor} waiting for ${cursor} (${out.length} items)`);
    let timer: NodeJS.Timeout | undefined;
    const it = await Promise.race([sub.next(), new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), left); })]);
    clearTimeout(timer);
    if (it === 'timeout') continue;
    if (it === undefined) throw new Error('subscription ended');
    out.push(it);
  }
  return out;
}

/** Pulls through catch-up until the caught-up item (the subscription is live afterwards). */
async function pullCaughtUp<I extends Item>(sub: Subscription<I>): Promise<I[]> {
  const out: I[] = [];
  for (;;) {
    const it = await sub.next();
    if (it === undefined) throw new Error('subscription ended');
    out.push(it);
    if (it.kind === 'caught-up') return out;
  }
}

const eventSeqs = (items: readonly EventItem[]): number[] => items.flatMap((it) => (it.kind === 'event' ? [it.event.seq] : []));

describe('two SessionService instances over one store', () => {
  for (const shared of ['one store instance', 'two store instances over one MemoryDatabase'] as const) {
    it(`a subscriber on A sees every commit of B (and of A), in order, once (${shared})`, async () => {
      const storeA = new MemorySessionStore({ database });
      const storeB = shared === 'one store instance' ? storeA : new MemorySessionStore({ database });
      const a = service(storeA);
      const b = service(storeB);
      await a.createSession(ctx, { id: 's' });
      const sub = await Subscription.open(a, ctx, 's', eventSource(a, 's'), { bufferBytes: 1 << 20, sizeOf: () => 100 });
      expect((await pullCaughtUp(sub)).map((i) => i.kind)).toEqual(['caught-up']);
      expect(sub.stats.mode).toBe('live');
      // B appends alone, then both append concurrently (B's retries re-plan on A's commits).
      for (let i = 0; i < 20; i++) await b.append(ctx, 's', [user(`b${i}`)]);
      const both = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).append(ctx, 's', [user(`x${i}`), user(`y${i}`)])));
      const head = Math.max(...both.flatMap((r) => r.seqs));
      expect(head).toBe(20 + 80 - 1);
      const items = await pullUntil(sub, head);
      expect(eventSeqs(items)).toEqual(Array.from({ length: head + 1 }, (_, i) => i));
      expect(sub.stats.remoteHeads).toBeGreaterThan(0);
      sub.close();
    });
  }

  it('without the store-driven feed a subscriber on A stays silent about B (the bug this feed fixes)', async () => {
    const store = new MemorySessionStore({ database });
    const a = new SessionService(store, DEFAULT_LIMITS, Date.now, undefined, undefined, new LocalChangeFeed());
    const b = service(new MemorySessionStore({ database }));
    services.push(a);
    await a.createSession(ctx, { id: 'quiet' });
    const sub = await Subscription.open(a, ctx, 'quiet', eventSource(a, 'quiet'), { bufferBytes: 1 << 20, sizeOf: () => 100 });
    await pullCaughtUp(sub);
    await b.append(ctx, 'quiet', [user('hello')]);
    await expect(pullUntil(sub, 0, 500)).rejects.toThrow(/timed out/);
    sub.close();
  });

  it("a surface subscriber on A rebuilds the surface B's replaces leave, equal to GetSurface on either", async () => {
    const a = service(new MemorySessionStore({ database }));
    const b = service(new MemorySessionStore({ database }));
    await a.createSession(ctx, { id: 'surf' });
    const sub = await Subscription.open(a, ctx, 'surf', surfaceSource(a, 'surf'), {
      bufferBytes: 1 << 20, sizeOf: () => 100, snapshot: (seqs, cursor) => ({ kind: 'snapshot' as const, seqs, cursor }),
    });
    let surface: number[] = [];
    const apply = (items: readonly SurfaceItem[]): void => {
      for (const it of items) {
        if (it.kind === 'snapshot') surface = [...it.seqs];
        else if (it.kind === 'append') surface.push(it.event.seq);
        else if (it.kind === 'replace') {
          const at = surface.indexOf(it.start);
          surface.splice(at, surface.indexOf(it.end) - at + 1, it.event.seq);
        }
      }
    };
    apply(await pullCaughtUp(sub));
    for (let i = 0; i < 10; i++) await (i % 3 === 0 ? a : b).append(ctx, 'surf', [user(`m${i}`)]);
    // B replaces a range (compaction-like), then A and B append more.
    await b.append(ctx, 'surf', [user('summary', { op: 'replace', start: 2, end: 5 }, { sourceEventSeqs: [2, 3, 4, 5] })]);
    for (let i = 0; i < 5; i++) await (i % 2 === 0 ? b : a).append(ctx, 'surf', [user(`n${i}`)]);
    const head = (await b.getSession(ctx, 'surf')).headSeq as number;
    apply(await pullUntil(sub, head));
    expect(surface).toEqual((await a.getSurface(ctx, 'surf')).seqs);
    expect(surface).toEqual((await b.getSurface(ctx, 'surf')).seqs);
    sub.close();
  });

  it('a hot cache never answers a read older than what the other service committed', async () => {
    const a = service(new MemorySessionStore({ database }));
    const b = service(new MemorySessionStore({ database }));
    await a.createSession(ctx, { id: 'hot' });
    await a.append(ctx, 'hot', [user('one')]);
    // A's cache is hot (engine, projection).
    expect((await a.getSurface(ctx, 'hot')).seqs).toEqual([0]);
    expect((await a.getMessages(ctx, 'hot', 'model')).messages).toHaveLength(1);
    for (let i = 0; i < 5; i++) {
      await b.append(ctx, 'hot', [user(`b${i}`)]);
      const want = i + 2;
      expect((await a.getSurface(ctx, 'hot')).seqs).toHaveLength(want);
      expect((await a.getSession(ctx, 'hot')).eventCount).toBe(want);
      expect((await a.getMessages(ctx, 'hot', 'model')).messages).toHaveLength(want);
    }
    // A deleted and re-created session with the same head is a different session: reload.
    await b.deleteSession(ctx, 'hot');
    await b.createSession(ctx, { id: 'hot' });
    for (let i = 0; i < 6; i++) await b.append(ctx, 'hot', [user(`again${i}`)]);
    expect((await a.getMessages(ctx, 'hot', 'model')).messages.map((m) => (m.message as { id: string }).id)).toEqual(
      Array.from({ length: 6 }, (_, i) => `u-again${i}`),
    );
    // And A appends on top of B's state without losing anything.
    expect((await a.append(ctx, 'hot', [user('from-a')])).seqs).toEqual([6]);
  });

  it("a session deleted through the other service leaves the cache on the deletion hint, or when its last live subscriber leaves (issue #33)", async () => {
    const a = service(new MemorySessionStore({ database }));
    const b = service(new MemorySessionStore({ database }));
    for (const id of ['gone', 'watched']) {
      await a.createSession(ctx, { id });
      // Written through B: B's cache holds the session's handle.
      await b.append(ctx, id, [user(`on-${id}`)]);
    }
    expect(b.cache.size).toBe(2);
    const stop = b.feed.subscribe(b.storageKey(ctx, 'watched'), { onCommit: () => undefined, onDeleted: () => undefined });
    await a.deleteSession(ctx, 'gone');
    await a.deleteSession(ctx, 'watched');
    // What PostgreSQL's HeadWatch.watchDeletes tells main.ts's wiring; the memory store sends none.
    b.cache.deletedElsewhere(b.storageKey(ctx, 'gone'));
    b.cache.deletedElsewhere(b.storageKey(ctx, 'watched'));
    expect(b.cache.peek(b.storageKey(ctx, 'gone'))).toBeUndefined();
    // A handle with live subscribers is kept (as eviction keeps it); they learn of the delete themselves.
    expect(b.cache.peek(b.storageKey(ctx, 'watched'))).toBeDefined();
    // ... until the last of them leaves: no second hint needed.
    const stop2 = b.feed.subscribe(b.storageKey(ctx, 'watched'), { onCommit: () => undefined, onDeleted: () => undefined });
    stop();
    expect(b.cache.peek(b.storageKey(ctx, 'watched'))).toBeDefined();
    stop2();
    expect(b.cache.size).toBe(0);
    // The dropped sessions answer NOT_FOUND on B, as before.
    await expect(b.getSession(ctx, 'gone')).rejects.toMatchObject({ reason: 'SESSION_NOT_FOUND' });
  });
});
