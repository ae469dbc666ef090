/**
 * Issue #33 item 8: partitions between a replica and PostgreSQL. Replica A reaches the database
 * through a TCP proxy (test/support/tcp-proxy.ts), replica B directly; both append to one session
 * with idempotency keys under load while A's link is half-opened (requests arrive, answers are
 * dropped: the outcome of a write is unknown), blackholed (a partition: nothing arrives), slowed,
 * and healed in turn. Then:
 *  - every call A could not complete failed with StoreUnavailableError (UNAVAILABLE /
 *    STORE_UNAVAILABLE on the wire) within a bound of the query and connect timeouts, never hung;
 *  - B never failed; A appends again once the link is back, without a restart;
 *  - nothing acknowledged is lost and nothing is stored twice: the log is contiguous, every
 *    acknowledged append is in it at its acknowledged seqs, and retrying every failed append with
 *    its key on the healed replica either answers the original result (it had committed) or
 *    appends it once.
 * And for the LISTEN connection alone: a replica whose LISTEN link is blackholed (its queries still
 * work) still hears other replicas' commits, from the slow poll of the store, within the poll period.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import { StoreChangeFeed } from '../../src/app/store-change-feed.js';
import { DomainError } from '../../src/domain/errors.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { StoreUnavailableError } from '../../src/store/store-errors.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { user } from '../support/engine-harness.js';
import { Subscription } from '../../src/app/subscription.js';
import { eventSource } from '../../src/app/subscription-sources.js';
import { NO_CURSOR } from '../../src/app/subscription-items.js';

const ctx = { tenant: '' };
/** The query and connect timeouts of the proxied replica, ms: how fast a partition is noticed. */
const TIMEOUT_MS = 1_000;
/** The proxied replica's slow poll of watched heads, ms. */
const POLL_MS = 500;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!hasPostgres())('a replica partitioned from PostgreSQL', () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let a: SessionService;
  let b: SessionService;
  let storeA: PostgresSessionStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    const url = new URL(db.url);
    proxy = await TcpProxy.start(`${url.hostname}:${url.port || '5432'}`);
    const proxied = new URL(db.url);
    [proxied.hostname, proxied.port] = proxy.address.split(':') as [string, string];
    storeA = await PostgresSessionStore.open({ url: proxied.toString(), poolSize: 4, queryTimeoutMs: TIMEOUT_MS, connectTimeoutMs: TIMEOUT_MS, headPollMs: POLL_MS });
    const storeB = await PostgresSessionStore.open({ url: db.url, poolSize: 4 });
    a = new SessionService(storeA, DEFAULT_LIMITS, Date.now, undefined, undefined, new StoreChangeFeed(storeA.openHeadWatch()));
    b = new SessionService(storeB, DEFAULT_LIMITS, Date.now, undefined, undefined, new StoreChangeFeed(storeB.openHeadWatch()));
  });
  afterAll(async () => {
    proxy.mode = 'pass';
    proxy.listenMode = 'pass';
    await a?.close().catch(() => undefined);
    await b?.close();
    await proxy?.close();
    await db?.drop();
  });

  it('appends fail fast with STORE_UNAVAILABLE, nothing acknowledged is lost or stored twice, and the replica serves again when the link returns', async () => {
    await b.createSession(ctx, { id: 'p' });
    const acknowledged = new Map<string, number[]>();
    const failedOnA: { key: string; ms: number; error: unknown }[] = [];
    const failedOnB: unknown[] = [];
    let okOnAAfterHeal = 0;
    let healed = false;
    let stop = false;
    let n = 0;
    const writer = async (svc: SessionService, side: 'a' | 'b'): Promise<void> => {
      while (!stop) {
        const key = `${side}-${n++}`;
        const started = Date.now();
        try {
          const res = await svc.append(ctx, 'p', [user(key)], { idempotencyKey: key });
          acknowledged.set(key, [...res.seqs]);
          if (side === 'a' && healed) okOnAAfterHeal++;
        } catch (e) {
          // A conflict that kept moving is a normal outcome under two replicas; anything else on B is not.
          if (e instanceof DomainError && e.reason === 'CONFLICT_RETRIES_EXHAUSTED') continue;
          if (side === 'a') failedOnA.push({ key, ms: Date.now() - started, error: e });
          else failedOnB.push(e);
          await sleep(20);
        }
      }
    };
    const writers = [...Array.from({ length: 3 }, () => writer(a, 'a')), ...Array.from({ length: 3 }, () => writer(b, 'b'))];
    const phase = async (mode: 'half-open' | 'blackhole' | 'slow', ms: number): Promise<void> => {
      if (mode === 'slow') proxy.delayMs = 100;
      else proxy.mode = mode;
      await sleep(ms);
      proxy.mode = 'pass';
      proxy.delayMs = 0;
      if (mode !== 'slow') proxy.drop();
      await sleep(500);
    };
    await sleep(300);
    await phase('half-open', 1_500);
    await phase('blackhole', 1_500);
    await phase('slow', 1_000);
    healed = true;
    await sleep(1_000);
    stop = true;
    await Promise.all(writers);

    expect(failedOnB).toEqual([]);
    expect(failedOnA.length).toBeGreaterThan(0);
    for (const f of failedOnA) expect(f.error, String(f.error)).toBeInstanceOf(StoreUnavailableError);
    const slowest = Math.max(...failedOnA.map((f) => f.ms));
    // Bound: a call waits for at most a few of its timeouts (a connection, a query), never for the partition to end.
    expect(slowest).toBeLessThan(6 * TIMEOUT_MS);
    // The cut replica serves again (no restart): an append through it now succeeds.
    const again = await a.append(ctx, 'p', [user('a-after')], { idempotencyKey: 'a-after' });
    acknowledged.set('a-after', [...again.seqs]);

    // Every failed append retried with its key on the healed replica: answered once, never twice.
    for (const f of failedOnA) {
      const res = await a.append(ctx, 'p', [user(f.key)], { idempotencyKey: f.key });
      expect(acknowledged.has(f.key)).toBe(false);
      acknowledged.set(f.key, [...res.seqs]);
    }
    const log: { seq: number; key: string }[] = [];
    for await (const batch of b.scan(ctx, 'p')) for (const e of batch) log.push({ seq: e.seq, key: (e.data as { id: string }).id.slice(2) });
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i));
    expect(new Set(log.map((e) => e.key)).size).toBe(log.length);
    expect(log.length).toBe(acknowledged.size);
    for (const [key, seqs] of acknowledged) expect(log[seqs[0]!]?.key, key).toBe(key);
    console.log(`partition: ${acknowledged.size} appends, ${failedOnA.length} failed on the cut replica (slowest ${slowest} ms), ${okOnAAfterHeal} after the heal`);
  }, 60_000);

  it('a subscriber on the cut replica gets every event once, in order: it resumes by itself, or ends with a cursor to resume from', async () => {
    await b.createSession(ctx, { id: 's' });
    const got: number[] = [];
    let ended: unknown;
    const consume = async (after: number): Promise<void> => {
      const sub = await Subscription.open(a, ctx, 's', eventSource(a, a.storageKey(ctx, 's')), { bufferBytes: 1 << 20, sizeOf: () => 100, after });
      try {
        for (;;) {
          const item = await sub.next();
          if (item === undefined) return;
          if (item.kind === 'event') got.push(item.event.seq);
        }
      } catch (e) {
        ended = e;
      } finally {
        sub.close();
      }
    };
    let consuming = consume(NO_CURSOR);
    const appendOnB = async (from: number): Promise<void> => {
      for (let i = from; i < from + 5; i++) await b.append(ctx, 's', [user(`s${i}`)]);
    };
    const until = async (what: () => boolean, ms: number): Promise<void> => {
      for (const t = Date.now(); !what() && Date.now() - t < ms;) await sleep(20);
    };
    await appendOnB(0);
    await until(() => got.length >= 5, 5_000);
    expect(got).toEqual([0, 1, 2, 3, 4]);
    proxy.mode = 'blackhole';
    await appendOnB(5);
    await sleep(1_500);
    proxy.mode = 'pass';
    proxy.drop();
    const healed = Date.now();
    await appendOnB(10);
    await until(() => got.length >= 15 || ended !== undefined, 10_000);
    if (ended !== undefined) {
      // Ended by the partition: the error is the store's, and the cursor resumes it without a gap.
      expect(ended).toBeInstanceOf(StoreUnavailableError);
      await consuming;
      ended = undefined;
      consuming = consume(got.length === 0 ? NO_CURSOR : got[got.length - 1]!);
      await until(() => got.length >= 15, 10_000);
    }
    expect(got).toEqual(Array.from({ length: 15 }, (_, i) => i));
    console.log(`subscriber on the cut replica: all 15 events ${Date.now() - healed} ms after the heal`);
  }, 40_000);

  it('a replica whose LISTEN link is blackholed still hears other replicas\' commits from the store within the poll period', async () => {
    await b.createSession(ctx, { id: 'l' });
    const heard: number[] = [];
    const watch = storeA.openHeadWatch();
    const stop = watch.watch('l', (h) => {
      if (typeof h === 'number') heard.push(h);
    });
    try {
      await b.append(ctx, 'l', [user('first')]);
      for (let t = Date.now(); !heard.includes(1) && Date.now() - t < 5_000;) await sleep(20);
      expect(heard).toContain(1);
      proxy.listenMode = 'blackhole';
      const committed = Date.now();
      await b.append(ctx, 'l', [user('second')]);
      while (!heard.includes(2) && Date.now() - committed < 10 * POLL_MS) await sleep(10);
      const after = Date.now() - committed;
      expect(heard).toContain(2);
      // Heard through the slow poll (the notification never arrives): within one poll period plus a read.
      expect(after).toBeLessThan(POLL_MS + 1_000);
      console.log(`LISTEN blackholed: commit heard after ${after} ms (poll period ${POLL_MS} ms)`);
    } finally {
      stop();
      proxy.listenMode = 'pass';
      await watch.close();
    }
  }, 30_000);
});
