/**
 * The push side of a Subscription (what the gRPC stream uses): `step()` hands out items without
 * waiting, answers IDLE when live with nothing to hand out and then calls the consumer's `wake()`
 * when there is; a committed batch reaches a parked consumer synchronously through `deliver`; a
 * refused delivery buffers the rest until `resume()`; close and deletion end it; the feed
 * registration is released either way.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService } from '../../src/app/session-service.js';
import { IDLE, Subscription, type SubscriptionConsumer } from '../../src/app/subscription.js';
import { type EventItem } from '../../src/app/subscription-items.js';
import { eventSource } from '../../src/app/subscription-sources.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
const services: SessionService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) await s.close();
});

class Consumer implements SubscriptionConsumer<EventItem> {
  readonly delivered: number[] = [];
  wakes = 0;
  accept = true;
  deliver(it: EventItem): boolean {
    this.delivered.push(it.cursor);
    return this.accept;
  }
  wake(): void {
    this.wakes++;
  }
}

/** Steps until IDLE / end, awaiting catch-up reads; the cursors handed out ('caught-up' as 'c'). */
async function drain(sub: Subscription<EventItem>): Promise<(number | string)[]> {
  const out: (number | string)[] = [];
  for (;;) {
    const r = sub.step();
    if (r === IDLE || r === undefined) return out;
    if (r instanceof Promise) {
      await r;
      continue;
    }
    out.push(r.kind === 'caught-up' ? 'c' : r.cursor);
  }
}

async function setup(): Promise<{ app: SessionService; sub: Subscription<EventItem>; consumer: Consumer }> {
  const app = new SessionService(new MemorySessionStore());
  services.push(app);
  await app.createSession(ctx, { id: 's' });
  await app.append(ctx, 's', [user('a0'), user('a1')]);
  const sub = await Subscription.open(app, ctx, 's', eventSource(app, app.storageKey(ctx, 's')), { bufferBytes: 1 << 20, sizeOf: () => 100 });
  const consumer = new Consumer();
  sub.setDirect(consumer);
  return { app, sub, consumer };
}

describe('Subscription push consumer (step / deliver / wake)', () => {
  it('a throw while queueing a live batch fails the subscription: it ends with the error, not open and deaf', async () => {
    let explode = false;
    const app = new SessionService(new MemorySessionStore());
    services.push(app);
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', [user('a0')]);
    const sizeOf = (): number => {
      if (explode) throw new Error('encoder bug');
      return 100;
    };
    const sub = await Subscription.open(app, ctx, 's', eventSource(app, app.storageKey(ctx, 's')), { bufferBytes: 1 << 20, sizeOf });
    const consumer = new Consumer();
    sub.setDirect(consumer);
    expect(await drain(sub)).toEqual([0, 'c']);
    consumer.accept = false;
    explode = true;
    // a1 goes out directly and is refused more; a2 is then queued, and sizing it throws.
    await app.append(ctx, 's', [user('a1'), user('a2')]);
    expect(consumer.delivered).toEqual([1]);
    expect(sub.open).toBe(false);
    expect(app.feed.listenerCount('s')).toBe(0);
    expect(() => sub.step()).toThrow('encoder bug');
  });

  it('catch-ups whose reads return the same event objects share the items (the transport encodes each once for every stream)', async () => {
    // The PostgreSQL store's coalesced reads hand every subscription of a session the same objects.
    const stored = [user('a0'), user('a1')].map((e, seq) => Object.freeze({ ...e, seq, time: 1 }));
    const app = { store: { readEvents: async (_id: string, q: { fromSeq: number }) => stored.filter((e) => e.seq >= q.fromSeq) } } as unknown as SessionService;
    const mine = await eventSource(app, 's').catchUp(-1).next();
    const theirs = await eventSource(app, 's').catchUp(-1).next();
    expect(mine!.map((i) => i.cursor)).toEqual([0, 1]);
    expect(theirs![0]).toBe(mine![0]);
    expect(theirs![1]).toBe(mine![1]);
  });

  it('catches up, answers IDLE, then gets live batches through deliver with no wake and nothing buffered', async () => {
    const { app, sub, consumer } = await setup();
    expect(await drain(sub)).toEqual([0, 1, 'c']);
    expect(sub.step()).toBe(IDLE);
    await app.append(ctx, 's', [user('a2'), user('a3')]);
    expect(consumer.delivered).toEqual([2, 3]);
    expect(consumer.wakes).toBe(0);
    expect(sub.stats.bufferedBytes).toBe(0);
    expect(sub.cursor).toBe(3);
    expect(sub.step()).toBe(IDLE);
    sub.close();
    expect(app.feed.listenerCount('s')).toBe(0);
  });

  it('a refused delivery buffers the rest without waking; resume() wakes, and step() hands out the rest in order', async () => {
    const { app, sub, consumer } = await setup();
    await drain(sub);
    consumer.accept = false;
    await app.append(ctx, 's', [user('a2'), user('a3'), user('a4')]);
    await app.append(ctx, 's', [user('a5')]);
    expect(consumer.delivered).toEqual([2]);
    expect(consumer.wakes).toBe(0);
    expect(sub.stats.bufferedBytes).toBe(300);
    sub.resume();
    expect(consumer.wakes).toBe(1);
    expect(await drain(sub)).toEqual([3, 4, 5]);
    expect(sub.stats.bufferedBytes).toBe(0);
    sub.close();
  });

  it('a batch committed before the consumer parked is queued behind caught-up, not delivered directly', async () => {
    const { app, sub, consumer } = await setup();
    const seen: (number | string)[] = [];
    // Step through catch-up but stop once caught-up is ready, before taking it (not parked).
    for (;;) {
      const r = sub.step();
      if (r instanceof Promise) {
        await r;
        if (sub.stats.mode === 'live') break;
        continue;
      }
      if (r === IDLE || r === undefined) throw new Error('parked or ended before caught-up');
      seen.push(r.cursor);
    }
    expect(seen).toEqual([0, 1]);
    await app.append(ctx, 's', [user('a2')]);
    expect(consumer.delivered).toEqual([]);
    expect(await drain(sub)).toEqual(['c', 2]);
    expect(sub.step()).toBe(IDLE);
    sub.close();
  });

  it('close() wakes a parked consumer and step() then answers undefined; deletion makes step() throw SESSION_NOT_FOUND', async () => {
    const first = await setup();
    await drain(first.sub);
    first.sub.close();
    expect(first.consumer.wakes).toBe(1);
    expect(first.sub.step()).toBeUndefined();
    expect(first.app.feed.listenerCount()).toBe(0);

    const second = await setup();
    await drain(second.sub);
    await second.app.deleteSession(ctx, 's');
    expect(second.consumer.wakes).toBe(1);
    expect(() => second.sub.step()).toThrow(expect.objectContaining({ reason: 'SESSION_NOT_FOUND' }));
    expect(second.app.feed.listenerCount()).toBe(0);
  });
});
