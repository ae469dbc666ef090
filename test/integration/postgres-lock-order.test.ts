/**
 * The PostgreSQL store's lock order (issue #33: the soak met deadlocks, 40P01, between writes of
 * one tenant). Every write transaction takes its locks in one order: the session row, the
 * tenant's row, its byte-counter shards (ascending), and the tenant's feed position last, at
 * commit (schema.ts). Each case below forces the interleaving that deadlocked before: a third
 * connection holds one byte-counter shard while an append of the tenant queues on it first and
 * another write queues behind it; when the shard is released, the append gets it and then needs
 * the feed position. A write that took the feed position before the shard deadlocks here
 * (PostgreSQL aborts one after deadlock_timeout and the store runs it again, counted in
 * stats().statementRetries); in the lock order both commit in turn and nothing is retried.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NewSession } from '../../src/app/store-port.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { TENANT_SHARDS } from '../../src/store/postgres/schema.js';
import { waitFor } from '../support/poll.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';

const ev = (seq: number): SessionEvent => ({ type: 'turn/start', seq, time: 1_700_000_000_000 + seq, data: { turn: seq } });
const TENANT = 'acme';

function record(id: string, extra: Partial<NewSession> = {}): NewSession {
  return { header: { version: 1, id, createdAt: 1000 }, labels: {}, tenant: TENANT, strict: false, pairingGuard: false, writer: 'w0', ...extra };
}

describe.skipIf(!hasPostgres())('PostgreSQL lock order (issue #33)', () => {
  let db: TestDatabase;
  let admin: pg.Client;
  let store: PostgresSessionStore;
  let schemaCounter = 0;
  let schema = '';

  beforeAll(async () => {
    db = await createTestDatabase();
    admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
  });
  afterEach(async () => {
    await store.close();
  });
  afterAll(async () => {
    await admin.end();
    await db.drop();
  });

  async function openStore(): Promise<void> {
    schema = `lk${schemaCounter++}`;
    store = await PostgresSessionStore.open({ url: db.url, schema, headPollMs: 60_000 });
  }

  const shardOf = async (id: string): Promise<number> =>
    (await admin.query<{ shard: number }>(`SELECT hashtext($1) & ${TENANT_SHARDS - 1} AS shard`, [id])).rows[0]!.shard;

  /** A fresh session id (prefix + n) whose byte-counter shard is `shard`. */
  async function idOnShard(prefix: string, shard: number): Promise<string> {
    for (let n = 0; ; n++) if (await shardOf(`${prefix}${n}`) === shard) return `${prefix}${n}`;
  }

  /** Backends of the test database waiting for a lock. */
  const lockWaiters = async (): Promise<number> =>
    Number((await admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0]!.n);

  /**
   * Holds the tenant's byte-counter shard `shard` on another connection while `first` (an append
   * on that shard) and then `second` queue on it, then lets go: both must commit with no statement
   * run again.
   */
  async function contend(shard: number, first: () => Promise<unknown>, second: () => Promise<unknown>): Promise<unknown[]> {
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${schema}.tenant_bytes WHERE tenant = $1 AND shard = $2 FOR UPDATE`, [TENANT, shard]);
      const a = first();
      await waitFor(async () => await lockWaiters() === 1, 10_000, 'the first write to wait for the shard');
      const b = second();
      await waitFor(async () => await lockWaiters() === 2, 10_000, 'the second write to wait');
      await holder.query('COMMIT');
      return await Promise.all([a, b]);
    } finally {
      await holder.end();
    }
  }

  /** A session of the tenant on `shard` with one event, and an append of its next event. */
  async function appendTarget(shard: number): Promise<{ id: string; append: () => Promise<unknown> }> {
    const id = await idOnShard('a', shard);
    expect(await store.createSession(record(id), [ev(0)])).toEqual({ kind: 'created' });
    return { id, append: () => store.append(id, { expectedNextSeq: 1, expectedWriter: 'w0', writer: 'w1', events: [ev(1)], surfaceLength: 0 }) };
  }

  it("an append is not held back by the search follower's FOR KEY SHARE on its session (schema 9); a delete waits for the follower", async () => {
    await openStore();
    const { id, append } = await appendTarget(3);
    const follower = new pg.Client({ connectionString: db.url });
    await follower.connect();
    try {
      await follower.query('BEGIN');
      await follower.query(`SELECT 1 FROM ${schema}.sessions WHERE id = $1 FOR KEY SHARE`, [id]);
      let timer: NodeJS.Timeout | undefined;
      const held = new Promise((resolve) => { timer = setTimeout(() => resolve('held back by the follower'), 5000); });
      expect(await Promise.race([append(), held])).toEqual({ kind: 'appended' });
      clearTimeout(timer);
      const deleting = store.deleteSession(id);
      await waitFor(async () => await lockWaiters() === 1, 10_000, 'the delete to wait for the follower');
      await follower.query('COMMIT');
      expect(await deleting).toBe(true);
    } finally {
      await follower.end();
    }
  });

  it('a create and an append of one tenant on one shard: both commit, nothing retried', async () => {
    await openStore();
    const shard = 5;
    const { id, append } = await appendTarget(shard);
    const created = await idOnShard('c', shard);
    const before = store.stats().statementRetries;
    const out = await contend(shard, append, () => store.createSession(record(created), [ev(0), ev(1)]));
    expect(out).toEqual([{ kind: 'appended' }, { kind: 'created' }]);
    expect(store.stats().statementRetries - before).toBe(0);
    // The feed in commit order, dense from 1.
    expect((await store.readFeed({ tenant: TENANT, after: 0, limit: 10 })).map((r) => [r.position, r.kind, r.sessionId]))
      .toEqual([[1, 'created', id], [2, 'appended', id], [3, 'created', created]]);
  });

  it('a delete and an append of one tenant on one shard: both commit, nothing retried', async () => {
    await openStore();
    const shard = 9;
    const { append } = await appendTarget(shard);
    const doomed = await idOnShard('d', shard);
    expect(await store.createSession(record(doomed), [ev(0)])).toEqual({ kind: 'created' });
    const before = store.stats().statementRetries;
    const out = await contend(shard, append, () => store.deleteSession(doomed));
    expect(out).toEqual([{ kind: 'appended' }, true]);
    expect(store.stats().statementRetries - before).toBe(0);
    expect(await store.getSession(doomed)).toBeUndefined();
  });

  it('a publish and an append of one tenant on one shard: both commit, nothing retried', async () => {
    await openStore();
    const shard = 3;
    const { append } = await appendTarget(shard);
    const imported = await idOnShard('i', shard);
    expect(await store.createSession(record(imported, { pending: { owner: 'imp', leaseUntil: Date.now() + 60_000 } }), [ev(0)])).toEqual({ kind: 'created' });
    const before = store.stats().statementRetries;
    const out = await contend(shard, append, () => store.publishSession(imported, 'imp', { labels: { k: 'v' }, pairingGuard: false, bytesDelta: 9 }));
    expect(out).toEqual([{ kind: 'appended' }, undefined]);
    expect(store.stats().statementRetries - before).toBe(0);
    expect((await store.getSession(imported))?.labels).toEqual({ k: 'v' });
  });

  it('a group of appends whose later call checks the byte quota and a quota-checked append of another session: both commit, nothing retried', async () => {
    await openStore();
    const quota = { tenant: TENANT, maxBytes: 1_000_000 };
    const other = await idOnShard('q', 4);
    const grouped = await idOnShard('g', 11);
    for (const id of [other, grouped]) expect(await store.createSession(record(id), [ev(0)])).toEqual({ kind: 'created' });
    const before = store.stats().statementRetries;
    // The quota check locks every shard in order (0 first): the other session's append waits on
    // shard 0 first. The grouped session's first append goes alone (its own shard 11 only) and the
    // two queued meanwhile go in one transaction: the first takes shard 11, the second waits on 0.
    const next = (seq: number, withQuota: boolean) => store.append(grouped, {
      expectedNextSeq: seq, expectedWriter: `w${seq - 1}`, writer: `w${seq}`, events: [ev(seq)], surfaceLength: 0, ...(withQuota ? { quota } : {}),
    });
    const out = await contend(
      0,
      () => store.append(other, { expectedNextSeq: 1, expectedWriter: 'w0', writer: 'w1', events: [ev(1)], surfaceLength: 0, quota }),
      () => Promise.all([next(1, false), next(2, false), next(3, true)]),
    );
    expect(out).toEqual([{ kind: 'appended' }, [{ kind: 'appended' }, { kind: 'appended' }, { kind: 'appended' }]]);
    expect(store.stats().statementRetries - before).toBe(0);
    expect(store.stats().maxGroupSize).toBe(2);
  });

  it('two replicas mixing creates, deletes, label updates and grouped appends with and without the quota on one tenant: nothing retried', async () => {
    await openStore();
    const other = await PostgresSessionStore.open({ url: db.url, schema, headPollMs: 60_000 });
    try {
      const replicas = [store, other];
      const ids = Array.from({ length: 12 }, (_, i) => `m${i}`);
      for (const id of ids) expect(await store.createSession(record(id), [ev(0)])).toEqual({ kind: 'created' });
      const heads = new Map(ids.map((id) => [id, { next: 1, writer: 'w0' }]));
      const quota = { tenant: TENANT, maxBytes: 10_000_000 };
      let n = 0;
      // Each round: every session gets one append from a replica chosen per session (half of them
      // checking the quota), while sessions are created and deleted and labels change on both.
      for (let round = 0; round < 8; round++) {
        const work: Promise<unknown>[] = [];
        for (const [i, id] of ids.entries()) {
          const h = heads.get(id)!;
          const writer = `w${round + 1}`;
          work.push(replicas[(i + round) % 2]!.append(id, {
            expectedNextSeq: h.next, expectedWriter: h.writer, writer, events: [ev(h.next)], surfaceLength: 0, ...(i % 2 === 0 ? { quota } : {}),
          }).then((o) => {
            expect(o).toEqual({ kind: 'appended' });
            h.next++;
            h.writer = writer;
          }));
        }
        for (const r of replicas) {
          const id = `x${n++}`;
          work.push(r.createSession(record(id), [ev(0)], { maxSessions: 1000, maxBytes: 10_000_000 }).then(() => r.deleteSession(id)));
        }
        work.push(other.updateLabels(ids[round]!, { round: String(round) }, 0));
        await Promise.all(work);
      }
      expect(store.stats().statementRetries + other.stats().statementRetries).toBe(0);
      expect(store.stats().maxGroupSize + other.stats().maxGroupSize).toBeGreaterThan(2);
      const feed = await store.readFeed({ tenant: TENANT, after: 0, limit: 10_000 });
      expect(feed.map((r) => r.position)).toEqual(feed.map((_, i) => i + 1));
    } finally {
      await other.close();
    }
  });
});
