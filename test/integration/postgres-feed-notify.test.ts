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

type Watch = {
  ready: Promise<void>; connects: number; dropConnectionForTest(): void; watchFeed(f: (tenant?: string) => void): () => void;
  watchDeletes(f: (sessionId: string) => void): () => void;
};

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

  it("watchFeed hears another instance's append and delete, and is told again after a reconnect; watchDeletes hears the delete only", async () => {
    const [a, b] = await pair();
    const watch = b.openHeadWatch() as unknown as Watch;
    closers.push(async () => (watch as unknown as { close(): Promise<void> }).close());
    await watch.ready;
    let hints = 0;
    watch.watchFeed(() => hints++);
    // Not watched with watch(): the hot-session cache hears every deletion (issue #33).
    const deleted: string[] = [];
    watch.watchDeletes((id) => deleted.push(id));
    await a.createSession(record('s'), []);
    await a.append('s', { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'A', events: [ev(0)], surfaceLength: 0 });
    await waitFor(() => hints >= 1, 10_000, 'the hint of the append');
    const afterAppend = hints;
    await a.deleteSession('s');
    await waitFor(() => hints > afterAppend, 10_000, 'the hint of the delete');
    await waitFor(() => deleted.length > 0, 10_000, 'the deletion hint');
    // The create's and the append's hints are not deletions.
    expect(deleted).toEqual(['s']);
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

  it("a NOTIFY wakes only the reader of the tenant its session belongs to; a reconnect wakes every tenant's", async () => {
    const [sa, sb] = await pair();
    // Count sb's feed reads per tenant (the readers' store queries).
    const reads = new Map<string, number>();
    const readFeed = sb.readFeed.bind(sb);
    sb.readFeed = async (q) => {
      reads.set(q.tenant, (reads.get(q.tenant) ?? 0) + 1);
      return readFeed(q);
    };
    const watch = sb.openHeadWatch() as unknown as Watch;
    const a = new SessionService(sa, DEFAULT_LIMITS, Date.now, undefined, undefined, undefined, { pollMs: HOUR });
    const b = new SessionService(sb, DEFAULT_LIMITS, Date.now, undefined, undefined, new StoreChangeFeed(watch as never), {
      pollMs: HOUR, safetyPollMs: HOUR, notifications: (f) => watch.watchFeed(f),
    });
    closers.push(() => a.close(), () => b.close());
    await watch.ready;
    const follow = async (tenant: string): Promise<{ got: string[]; close(): void }> => {
      const sub = await b.sessionFeed.subscribe({ tenant }, { fromNow: true });
      const got: string[] = [];
      void (async () => {
        for (let it = await sub.next(); it !== undefined; it = await sub.next()) got.push(brief(it));
      })().catch(() => undefined);
      await waitFor(() => got.includes('caught-up'), 10_000, `${tenant} caught up`);
      return { got, close: () => sub.close() };
    };
    const ta = await follow('ta');
    const tb = await follow('tb');
    const before = { ta: reads.get('ta') ?? 0, tb: reads.get('tb') ?? 0 };
    await a.createSession({ tenant: 'ta' }, { id: 'x' });
    await a.append({ tenant: 'ta' }, 'x', [user('one')]);
    await waitFor(() => ta.got.length === 3, 10_000, "ta's created and appended");
    expect(ta.got).toEqual(['caught-up', 'created x', 'appended x']);
    expect(reads.get('ta')).toBeGreaterThan(before.ta);
    expect(reads.get('tb') ?? 0).toBe(before.tb);
    expect(tb.got).toEqual(['caught-up']);
    // tb's own change reaches tb.
    await a.createSession({ tenant: 'tb' }, { id: 'y' });
    await waitFor(() => tb.got.length === 2, 10_000, "tb's created");
    expect(tb.got).toEqual(['caught-up', 'created y']);
    // After a reconnect (hints may have been lost) every tenant's reader reads.
    const beforeDrop = { ta: reads.get('ta')!, tb: reads.get('tb')! };
    watch.dropConnectionForTest();
    await waitFor(() => reads.get('ta')! > beforeDrop.ta && reads.get('tb')! > beforeDrop.tb, 10_000, 'both readers after the reconnect');
    ta.close();
    tb.close();
  });
});

function brief(it: FeedItem): string {
  return it.kind === 'caught-up' ? 'caught-up' : `${it.change} ${it.sessionId}`;
}
