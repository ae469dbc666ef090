/**
 * The session feed's push path (issue #35): a live subscription hands each record to its idle
 * consumer synchronously from the tenant's reader (one shared item per record), queues while the
 * consumer is blocked (not woken before `resume()`), and falls back to the store past its buffer,
 * so a slow consumer still gets every change exactly once, in order, with bounded memory. A
 * batching consumer is never pushed to: it is woken once per store read, at the reader's flush.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import type { FeedRecord } from '../../src/app/ports/feed-log.js';
import { FEED_IDLE, type FeedConsumer, type FeedItem, type FeedSubscription, type SessionChange } from '../../src/app/session-feed.js';
import { MemoryDatabase, MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
let app: SessionService;

function service(bufferRecords = 10_000): SessionService {
  return new SessionService(new MemorySessionStore({ database: new MemoryDatabase() }), DEFAULT_LIMITS, Date.now, undefined, undefined, undefined, { bufferRecords });
}

/** A push consumer like the server's stream: drains with step() when woken, records deliveries. */
class Consumer implements FeedConsumer {
  readonly got: FeedItem[] = [];
  readonly pushed: SessionChange[] = [];
  wakes = 0;
  accept = true;
  /** Items stepped per wake (a batching consumer writes each wake's items in one message). */
  readonly perWake: number[] = [];
  constructor(readonly sub: FeedSubscription, readonly batch = false) {
    sub.setDirect(this);
  }
  deliver(it: SessionChange): boolean {
    this.pushed.push(it);
    this.got.push(it);
    return this.accept;
  }
  wake(): void {
    this.wakes++;
    const before = this.got.length;
    void this.pump().then(() => this.perWake.push(this.got.length - before));
  }
  /** Steps until idle (awaiting catch-up reads). */
  async pump(): Promise<void> {
    for (;;) {
      const r = this.sub.step();
      if (r === FEED_IDLE || r === undefined) return;
      if (r instanceof Promise) {
        await r;
        continue;
      }
      this.got.push(r);
    }
  }
}

const brief = (it: FeedItem): string => (it.kind === 'caught-up' ? 'caught-up' : `${it.change} ${it.sessionId}${it.change === 'appended' ? ` head=${it.headSeq}` : ''}`);

/** Resolves once `cond` holds (polled on the event loop; fails after 5 s). */
async function until(cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setImmediate(r));
  }
}

beforeEach(() => {
  app = service();
});
afterEach(async () => {
  await app.close();
});

describe('SubscribeSessions push path (app)', () => {
  it('an idle consumer gets each live record from the reader; every subscriber gets the same item object', async () => {
    const a = new Consumer(await app.sessionFeed.subscribe(ctx, {}));
    const b = new Consumer(await app.sessionFeed.subscribe(ctx, {}));
    await a.pump();
    await b.pump();
    expect(a.got.map(brief)).toEqual(['caught-up']);
    await until(() => a.sub.step() === FEED_IDLE && b.sub.step() === FEED_IDLE);
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', [user('one')]);
    await until(() => a.pushed.length === 2 && b.pushed.length === 2);
    expect(a.pushed.map(brief)).toEqual(['created s', 'appended s head=0']);
    expect(a.pushed[1]).toBe(b.pushed[1]);
    expect(a.wakes).toBe(0);
    expect(a.sub.cursor).toBe(a.pushed[1]!.position);
  });

  it('a blocked consumer is not pushed to nor woken until resume(), then steps the queued items in order', async () => {
    const a = new Consumer(await app.sessionFeed.subscribe(ctx, {}));
    await a.pump();
    a.accept = false;
    await app.createSession(ctx, { id: 's' });
    await until(() => a.pushed.length === 1);
    for (let i = 0; i < 3; i++) await app.append(ctx, 's', [user(`m${i}`)]);
    await until(() => a.sub.cursor === a.pushed[0]!.position);
    // Give the reader a chance to (wrongly) push or wake.
    await app.store.readFeed({ tenant: '', after: 0, limit: 10 });
    await new Promise((r) => setImmediate(r));
    expect(a.pushed).toHaveLength(1);
    expect(a.wakes).toBe(0);
    a.accept = true;
    a.sub.resume();
    await until(() => a.got.length === 5);
    expect(a.got.map(brief)).toEqual(['caught-up', 'created s', 'appended s head=0', 'appended s head=1', 'appended s head=2']);
    expect(a.sub.cursor).toBe(await app.store.feedEnd(''));
  });

  it('past its buffer a blocked consumer falls back to the store and gets every change once, in order', async () => {
    await app.close();
    app = service(2);
    const a = new Consumer(await app.sessionFeed.subscribe(ctx, {}));
    await a.pump();
    a.accept = false;
    await app.createSession(ctx, { id: 's' });
    for (let i = 0; i < 10; i++) await app.append(ctx, 's', [user(`m${i}`)]);
    await until(() => a.sub.fallbacks > 0);
    a.accept = true;
    a.sub.resume();
    await until(() => a.got.filter((i) => i.kind === 'caught-up').length === 2);
    const changes = a.got.filter((i) => i.kind === 'change').map(brief);
    expect(changes).toEqual(['created s', ...Array.from({ length: 10 }, (_, h) => `appended s head=${h}`)]);
  });

  it('a batching consumer is not pushed to: the records of one read are queued and it is woken once, at the flush', async () => {
    const a = new Consumer(await app.sessionFeed.subscribe(ctx, {}), true);
    await a.pump();
    await until(() => a.sub.step() === FEED_IDLE);
    const end = a.sub.cursor;
    const record = (position: number, id: string): FeedRecord => ({
      position, tenant: '', sessionId: id, kind: 'created', createdAt: 1, nextSeq: 0, eventCount: 0, surfaceLength: 0,
      eventTypes: [], labels: { k: id }, previousLabels: undefined, time: 1,
    });
    // What the tenant's reader does with one read of three records: offer each, then flush.
    a.sub.offer(record(end + 1, 'x'));
    a.sub.offer(record(end + 2, 'y'));
    a.sub.offer(record(end + 3, 'z'));
    expect(a.pushed).toHaveLength(0);
    expect(a.wakes).toBe(0);
    expect(a.sub.cursor).toBe(end);
    a.sub.flush();
    await until(() => a.perWake.length === 1);
    expect(a.wakes).toBe(1);
    expect(a.perWake).toEqual([3]);
    expect(a.got.slice(1).map(brief)).toEqual(['created x', 'created y', 'created z']);
    expect(a.sub.cursor).toBe(end + 3);
    // A flush with nothing offered wakes nobody.
    a.sub.flush();
    expect(a.wakes).toBe(1);
  });

  it('batching consumers of two tenants, one with a selector, each get their own changes once, in order, never pushed', async () => {
    const t1 = { ...ctx, tenant: 't1' };
    const t2 = { ...ctx, tenant: 't2' };
    const all = new Consumer(await app.sessionFeed.subscribe(t1, {}), true);
    const sel = new Consumer(await app.sessionFeed.subscribe(t1, { selector: { team: 'a' } }), true);
    const other = new Consumer(await app.sessionFeed.subscribe(t2, {}), true);
    for (const c of [all, sel, other]) await c.pump();
    await Promise.all([
      app.createSession(t1, { id: 'a1', labels: { team: 'a' } }),
      app.createSession(t1, { id: 'b1', labels: { team: 'b' } }),
      app.createSession(t2, { id: 'c1', labels: { team: 'a' } }),
    ]);
    await Promise.all([app.append(t1, 'a1', [user('one')]), app.append(t1, 'b1', [user('two')]), app.append(t2, 'c1', [user('three')])]);
    await until(() => all.got.length === 5 && sel.got.length === 3 && other.got.length === 3);
    const names = (c: Consumer): string[] => c.got.filter((i) => i.kind === 'change').map(brief).sort();
    expect(names(all)).toEqual(['appended a1 head=0', 'appended b1 head=0', 'created a1', 'created b1']);
    expect(names(sel)).toEqual(['appended a1 head=0', 'created a1']);
    expect(names(other)).toEqual(['appended c1 head=0', 'created c1']);
    for (const c of [all, sel, other]) {
      expect(c.pushed).toHaveLength(0);
      const positions = c.got.filter((i) => i.kind === 'change').map((i) => i.position);
      expect([...positions].sort((x, y) => x - y)).toEqual(positions);
    }
  });
});
