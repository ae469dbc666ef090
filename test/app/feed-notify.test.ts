/**
 * The session feed on change hints (issue #35 item 2): with the store's HeadWatch.watchFeed (memory
 * store here; PostgreSQL LISTEN/NOTIFY in postgres-feed-notify.test.ts) another service's commits
 * reach a subscriber at once, with the poll left as a slow safety net; without hints it polls.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import { StoreChangeFeed } from '../../src/app/store-change-feed.js';
import { FEED_IDLE, type FeedItem, type FeedSubscription } from '../../src/app/session-feed.js';
import { MemoryDatabase, MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
const HOUR = 3_600_000;
let database: MemoryDatabase;
let services: SessionService[];

function service(hints: boolean): SessionService {
  const store = new MemorySessionStore({ database });
  const watch = store.openHeadWatch();
  const s = new SessionService(store, DEFAULT_LIMITS, Date.now, undefined, undefined, new StoreChangeFeed(watch), {
    // Without hints the poll would be the only way: make it never fire within the test.
    pollMs: HOUR, safetyPollMs: HOUR,
    notifications: hints ? (onChange) => watch.watchFeed!(onChange) : undefined,
  });
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

const brief = (it: FeedItem): string => (it.kind === 'caught-up' ? 'caught-up' : `${it.change} ${it.sessionId}`);

/** The next item, or 'none' when nothing arrives within `ms`. */
async function nextWithin(sub: FeedSubscription, ms: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const r = await Promise.race([sub.next(), new Promise<'none'>((res) => { timer = setTimeout(() => res('none'), ms); })]);
  clearTimeout(timer);
  return r === 'none' ? 'none' : r === undefined ? 'end' : brief(r);
}

describe('session feed change hints (app)', () => {
  it("with hints, another service's create, labels change and append arrive without waiting for the (hour-long) poll", async () => {
    const a = service(false);
    const b = service(true);
    expect(b.sessionFeed.pollMs).toBe(HOUR);
    const sub = await b.sessionFeed.subscribe(ctx, { fromNow: true });
    expect(await nextWithin(sub, 5000)).toBe('caught-up');
    await a.createSession(ctx, { id: 'x' });
    expect(await nextWithin(sub, 5000)).toBe('created x');
    await a.updateSession(ctx, 'x', { setLabels: { k: 'v' } });
    expect(await nextWithin(sub, 5000)).toBe('labels_changed x');
    await a.append(ctx, 'x', [user('hi')]);
    expect(await nextWithin(sub, 5000)).toBe('appended x');
    sub.close();
  });

  it("without hints (and without its poll), another service's commit is not seen; the service's own commits are", async () => {
    const a = service(false);
    const b = service(false);
    const sub = await b.sessionFeed.subscribe(ctx, { fromNow: true });
    expect(await nextWithin(sub, 5000)).toBe('caught-up');
    await a.createSession(ctx, { id: 'x' });
    // Nothing queued once a hint would have come (the memory store's are microtasks); stepped,
    // not awaited, so no pending next() is left behind to take a later item.
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    expect(sub.step()).toBe(FEED_IDLE);
    await b.createSession(ctx, { id: 'y' });
    // The poke after b's own commit reads the store: both records, in order.
    expect(await nextWithin(sub, 5000)).toBe('created x');
    expect(await nextWithin(sub, 5000)).toBe('created y');
    sub.close();
  });
});
