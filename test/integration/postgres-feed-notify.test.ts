/**
 * The session feed over PostgreSQL LISTEN/NOTIFY (issue #35 item 2), against the run's throwaway
 * cluster: a store's HeadWatch.watchFeed hears the commits of another store instance (appends,
 * creates, label changes, deletes) and is told again after its LISTEN connection reconnects; a
 * SessionService whose feed polls only every hour still delivers another replica's changes, in
 * order, through the hints.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/domain/event.js';
import type { NewSession } from '../../src/app/store-port.js';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import { StoreChangeFeed } from '../../src/app/store-change-feed.js';
import type { FeedItem } from '../../src/app/session-feed.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { waitFor } from '../support/poll.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';
import { user } from '../support/engine-harness.js';

const HOUR = 3_600_000;
const ev = (seq: number): SessionEvent => ({ type: 'turn/start', seq, time: 1_700_000_000_000 + seq, data: { turn: seq } });
const record = (id: string): NewSession => ({ header: { version: 1, id, createdAt: 1000 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' });

type Watch = { ready: Promise<void>; connects: number; dropConnectionForTest(): void; watchFeed(f: () => void): () => void };

describe.skipIf(!hasPostgres())('session feed hints over LISTEN/NOTIFY', () => {
  let db: TestDatabase;
  let schemaCounter = 0;
  const closers: (() => Promise<void>)[] = [];
  const pair = async (): Promise<[PostgresSessionStore, PostgresSessionStore]> => {
    const schema = `f${schemaCounter++}`;
    const a = await PostgresSessionStore.open({ url: db.url, schema, headPollMs: HOUR });
    const b = await PostgresSessionStore.open({ url: db.url, schema, headPollMs: HOUR });
    closers.push(() => a.close(), () => b.close());
    return [a, b];
  };

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });
  afterAll(async () => {
    await db.drop();
  });

  it("watchFeed hears another instance's append and delete, and is told again after a reconnect", async () => {
    const [a, b] = await pair();
    const watch = b.openHeadWatch() as unknown as Watch;
    closers.push(async () => (watch as unknown as { close(): Promise<void> }).close());
    await watch.ready;
    let hints = 0;
    watch.watchFeed(() => hints++);
    await a.createSession(record('s'), []);
    await a.append('s', { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'A', events: [ev(0)], surfaceLength: 0 });
    await waitFor(() => hints >= 1, 10_000, 'the hint of the append');
    const afterAppend = hints;
    await a.deleteSession('s');
    await waitFor(() => hints > afterAppend, 10_000, 'the hint of the delete');
    const beforeDrop = hints;
    watch.dropConnectionForTest();
    await waitFor(() => watch.connects >= 2 && hints > beforeDrop, 10_000, 'the hint after the reconnect');
  });

  it("a service whose feed polls every hour gets another replica's created, labels_changed, appended and deleted through NOTIFY, in order", async () => {
    const [sa, sb] = await pair();
    const mk = (store: PostgresSessionStore): SessionService => {
      const watch = store.openHeadWatch();
      const s = new SessionService(store, DEFAULT_LIMITS, Date.now, undefined, undefined, new StoreChangeFeed(watch), {
        pollMs: HOUR, safetyPollMs: HOUR, notifications: (f) => watch.watchFeed!(f),
      });
      closers.push(() => s.close());
      return s;
    };
    const a = mk(sa);
    const b = mk(sb);
    await (sb as unknown as { settled?: () => Promise<void> }).settled?.();
    const sub = await b.sessionFeed.subscribe(ANONYMOUS, { fromNow: true });
    const got: string[] = [];
    void (async () => {
      for (let it = await sub.next(); it !== undefined; it = await sub.next()) got.push(brief(it));
    })().catch(() => undefined);
    await waitFor(() => got.includes('caught-up'), 10_000, 'caught up');
    await a.createSession(ANONYMOUS, { id: 'x' });
    await waitFor(() => got.length === 2, 10_000, 'created');
    await a.updateSession(ANONYMOUS, 'x', { setLabels: { k: 'v' } });
    await waitFor(() => got.length === 3, 10_000, 'labels_changed');
    await a.append(ANONYMOUS, 'x', [user('one')]);
    await a.deleteSession(ANONYMOUS, 'x');
    await waitFor(() => got.length === 5, 10_000, 'appended and deleted');
    expect(got).toEqual(['caught-up', 'created x', 'labels_changed x', 'appended x', 'deleted x']);
    sub.close();
  });
});

function brief(it: FeedItem): string {
  return it.kind === 'caught-up' ? 'caught-up' : `${it.change} ${it.sessionId}`;
}
