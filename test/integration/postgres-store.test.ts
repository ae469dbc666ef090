/**
 * PostgreSQL store specifics, against the run's real throwaway cluster (test/support/postgres.ts):
 * schema version bump-and-reject, several store instances over one database (conditional appends,
 * idempotency keys and quotas across instances), the head watch across instances including its
 * reconnect, and an unreachable database.
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SessionEvent } from '../../src/domain/event.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { openStore as openConfiguredStore } from '../../src/main.js';
import { parseServeArgs } from '../../src/cli/serve.js';
import { type NewSession } from '../../src/app/store-port.js';
import { storedSessionBytes } from '../../src/domain/session-bytes.js';
import { SCHEMA_VERSION } from '../../src/store/postgres/schema.js';
import { NOTIFY_SQL } from '../../src/store/postgres/notifier.js';
import { StoreOpenError, StoreUnavailableError, StoreUsageError } from '../../src/store/store-errors.js';
import { waitFor } from '../support/poll.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';

const ev = (seq: number, data: unknown = { turn: seq }): SessionEvent => ({ type: 'turn/start', seq, time: 1_700_000_000_000 + seq, data: data as SessionEvent['data'] });
const events = (from: number, n: number): SessionEvent[] => Array.from({ length: n }, (_, i) => ev(from + i));

function record(id: string, extra: Partial<NewSession> = {}): NewSession {
  return { header: { version: 1, id, createdAt: 1000 }, labels: {}, tenant: 't', strict: false, pairingGuard: false, writer: 'w0', ...extra };
}

describe.skipIf(!hasPostgres())('PostgresSessionStore', () => {
  let db: TestDatabase;
  const open: PostgresSessionStore[] = [];
  const openStore = async (schema?: string): Promise<PostgresSessionStore> => {
    const store = await PostgresSessionStore.open({ url: db.url, headPollMs: 200, ...(schema ? { schema } : {}) });
    open.push(store);
    return store;
  };
  let schemaCounter = 0;
  /** N instances over one fresh schema of the file's database. */
  const instances = async (n: number): Promise<PostgresSessionStore[]> => {
    const schema = `t${schemaCounter++}`;
    const out: PostgresSessionStore[] = [];
    for (let i = 0; i < n; i++) out.push(await openStore(schema));
    return out;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    await db.drop();
  });

  it('creates the schema on first open and opens it again', async () => {
    const [a] = await instances(1);
    expect(await a!.createSession(record('s1'), events(0, 3))).toEqual({ kind: 'created' });
    const b = await openStore(`t${schemaCounter - 1}`);
    expect((await b.getSession('s1'))?.nextSeq).toBe(3);
  });

  it('refuses a database written by another schema version, naming both versions, and leaves it as it was', async () => {
    const [a] = await instances(1);
    const schema = `t${schemaCounter - 1}`;
    await a!.createSession(record('s1'), events(0, 1));
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(`UPDATE ${schema}.schema_version SET version = ${SCHEMA_VERSION + 1}`);
    const error = await PostgresSessionStore.open({ url: db.url, schema }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreOpenError);
    expect((error as StoreOpenError).reason).toBe('SCHEMA_VERSION_MISMATCH');
    expect((error as Error).message).toContain(`schema version ${SCHEMA_VERSION + 1}, this build needs ${SCHEMA_VERSION}`);
    const left = await admin.query(`SELECT count(*)::int AS n FROM ${schema}.events`);
    expect(left.rows[0].n).toBe(1);
    await admin.end();
  });

  it('opens a schema the operator pre-created for a role that may not create schemas', async () => {
    const role = `pal_role_${process.pid}`;
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    await admin.query(`CREATE SCHEMA granted AUTHORIZATION ${role}`);
    await admin.end();
    const url = db.url.replace('postgresql://postgres@', `postgresql://${role}@`);
    // The role has no CREATE on the database: it could not create a schema of its own.
    const refused = await PostgresSessionStore.open({ url, schema: 'own' }).catch((e: unknown) => e);
    expect((refused as Error).message).toMatch(/permission denied/);
    const store = await PostgresSessionStore.open({ url, schema: 'granted' });
    open.push(store);
    expect(await store.createSession(record('s1'), events(0, 2))).toEqual({ kind: 'created' });
    expect((await store.getSession('s1'))?.nextSeq).toBe(2);
  });

  it('serve --db URL and PALIMPSEST_DB select the PostgreSQL store (postgresql:// and postgres://); a path stays SQLite', async () => {
    const fromEnv = await openConfiguredStore(parseServeArgs([], { PALIMPSEST_DB: db.url }));
    expect(fromEnv).toBeInstanceOf(PostgresSessionStore);
    await fromEnv.close();
    const fromFlag = await openConfiguredStore(parseServeArgs(['--db', db.url.replace('postgresql://', 'postgres://')], {}));
    expect(fromFlag).toBeInstanceOf(PostgresSessionStore);
    await fromFlag.close();
    const path = join(tmpdir(), `pal-select-${process.pid}.db`);
    const sqlite = await openConfiguredStore(parseServeArgs(['--db', path], {}));
    expect(sqlite).toBeInstanceOf(SqliteSessionStore);
    await sqlite.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
  });

  it('takes the missing parts of the URL from the standard PG* environment variables', async () => {
    const u = new URL(db.url);
    const saved = { ...process.env };
    Object.assign(process.env, { PGHOST: u.hostname, PGPORT: u.port, PGUSER: u.username, PGDATABASE: u.pathname.slice(1) });
    try {
      const store = await PostgresSessionStore.open({ url: 'postgresql://', schema: `t${schemaCounter++}` });
      open.push(store);
      expect(await store.createSession(record('env'), [])).toEqual({ kind: 'created' });
    } finally {
      for (const k of ['PGHOST', 'PGPORT', 'PGUSER', 'PGDATABASE']) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    }
  });

  it('refuses a schema of another application', async () => {
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query('CREATE SCHEMA foreign_app; CREATE TABLE foreign_app.things (x int)');
    await admin.end();
    const error = await PostgresSessionStore.open({ url: db.url, schema: 'foreign_app' }).catch((e: unknown) => e);
    expect((error as StoreOpenError).reason).toBe('FOREIGN_DATABASE');
  });

  it('concurrent conditional appends on one head over several instances: exactly one wins each round, seqs contiguous', async () => {
    const stores = await instances(3);
    await stores[0]!.createSession(record('s1'), []);
    let head = 0;
    let writer = 'w0';
    for (let round = 0; round < 10; round++) {
      const outcomes = await Promise.all(
        stores.map((s, i) => s.append('s1', { expectedNextSeq: head, expectedWriter: writer, writer: `r${round}i${i}`, events: events(head, 2), surfaceLength: 0 })),
      );
      const won = outcomes.filter((o) => o.kind === 'appended');
      expect(won).toHaveLength(1);
      for (const o of outcomes) if (o.kind !== 'appended') expect(o).toEqual({ kind: 'conflict', actualNextSeq: head + 2 });
      writer = `r${round}i${outcomes.findIndex((o) => o.kind === 'appended')}`;
      head += 2;
    }
    const session = await stores[2]!.getSession('s1');
    expect(session).toMatchObject({ nextSeq: 20, eventCount: 20, writer });
    expect((await stores[1]!.readEvents('s1', { fromSeq: 0, direction: 'forward', limit: 100 })).map((e) => e.seq)).toEqual(events(0, 20).map((e) => e.seq));
  });

  it('a head that matches but a writer token that does not is a conflict, and nothing is written', async () => {
    const [a, b] = await instances(2);
    await a!.createSession(record('s1'), []);
    expect(await a!.append('s1', { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'A', events: events(0, 1), surfaceLength: 0 })).toEqual({ kind: 'appended' });
    // b planned on top of a batch it believes has writer 'B1' (never committed): refused.
    expect(await b!.append('s1', { expectedNextSeq: 1, expectedWriter: 'B1', writer: 'B2', events: events(1, 1), surfaceLength: 0 })).toEqual({ kind: 'conflict', actualNextSeq: 1 });
    expect(await b!.getSession('s1')).toMatchObject({ nextSeq: 1, writer: 'A', eventCount: 1 });
  });

  it("one instance sends a session's queued appends together, in order, each checked: a broken link fails the rest of the chain only", async () => {
    const [a, b] = await instances(2);
    await a!.createSession(record('g'), []);
    // Ten pipelined batches, each planned on the previous one's token; the sixth names a token
    // nobody wrote, so it and everything planned on it conflict.
    const chain = Array.from({ length: 10 }, (_, i) => a!.append('g', {
      expectedNextSeq: i, expectedWriter: i === 0 ? 'w0' : i === 5 ? 'bogus' : `g${i - 1}`, writer: `g${i}`, events: events(i, 1), surfaceLength: i,
      ...(i === 2 ? { idempotency: { key: 'k2', requestHash: 'h2' } } : {}),
    }));
    const outcomes = await Promise.all(chain);
    expect(outcomes.slice(0, 5)).toEqual(Array.from({ length: 5 }, () => ({ kind: 'appended' })));
    expect(outcomes.slice(5)).toEqual(Array.from({ length: 5 }, () => ({ kind: 'conflict', actualNextSeq: 5 })));
    expect(a!.stats().maxGroupSize).toBeGreaterThan(1);
    expect(await b!.getSession('g')).toMatchObject({ nextSeq: 5, eventCount: 5, writer: 'g4' });
    expect(await b!.getIdempotent('g', 'k2')).toEqual({ seqs: [2], requestHash: 'h2', surfaceLength: 2 });
  });

  it('an idempotency key retried on another instance returns the stored result, with its surface length', async () => {
    const [a, b] = await instances(2);
    await a!.createSession(record('s1'), []);
    const req = { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'A', events: events(0, 2), surfaceLength: 7, idempotency: { key: 'k', requestHash: 'h' } };
    expect(await a!.append('s1', req)).toEqual({ kind: 'appended' });
    expect(await b!.append('s1', { ...req, writer: 'B' })).toEqual({ kind: 'duplicate', result: { seqs: [0, 1], requestHash: 'h', surfaceLength: 7 } });
    expect(await b!.getSession('s1')).toMatchObject({ nextSeq: 2, writer: 'A' });
  });

  it('20 concurrent creates over three instances against a session quota of 5 create exactly 5', async () => {
    const stores = await instances(3);
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, (_, i) => stores[i % 3]!.createSession(record(`q${i}`), events(0, 1), { maxSessions: 5, maxBytes: 0 })),
    );
    expect(outcomes.filter((o) => o.kind === 'created')).toHaveLength(5);
    for (const o of outcomes) if (o.kind !== 'created') expect(o).toEqual({ kind: 'quota-exceeded', limitName: 'tenant_max_sessions', limit: 5, actual: 5 });
    expect((await stores[0]!.getTenantUsage('t')).sessions).toBe(5);
    expect((await stores[0]!.listSessions({ tenant: 't', pageSize: 100 })).sessions).toHaveLength(5);
  });

  it('concurrent appends over instances against a byte quota never exceed it; a refused append writes nothing', async () => {
    const stores = await instances(3);
    const each = Buffer.byteLength(JSON.stringify({ turn: 0 }));
    for (let i = 0; i < 6; i++) await stores[0]!.createSession(record(`b${i}`), []);
    const base = (await stores[0]!.getTenantUsage('t')).dataBytes;
    const max = base + 10 * each;
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        stores[i % 3]!.append(`b${i}`, { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'x', events: Array.from({ length: 3 }, (_, k) => ev(k, { turn: 0 })), surfaceLength: 0, quota: { tenant: 't', maxBytes: max } }),
      ),
    );
    expect(outcomes.filter((o) => o.kind === 'appended')).toHaveLength(3);
    for (const o of outcomes) if (o.kind !== 'appended') expect(o).toMatchObject({ kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: max });
    const usage = await stores[1]!.getTenantUsage('t');
    expect(usage.dataBytes).toBe(base + 9 * each);
    let stored = 0;
    for (let i = 0; i < 6; i++) stored += (await stores[2]!.getSession(`b${i}`))!.eventCount;
    expect(stored).toBe(9);
  });

  it("a create with a large initial log on a fresh tenant racing an append cannot exceed the byte quota (the tenant's shard rows exist from its first create)", async () => {
    const schema = `t${schemaCounter++}`;
    const a = await openStore(schema);
    const b = await openStore(schema);
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      const shardOf = async (id: string): Promise<number> => (await admin.query<{ s: number }>('SELECT hashtext($1) & 15 AS s', [id])).rows[0]!.s;
      // The tenant's first session (the tenant row is created with it), and a fork id in another shard.
      await a.createSession(record('base', { tenant: 'fresh' }), []);
      const baseShard = await shardOf('base');
      let forkId = 'fork0';
      for (let i = 1; (await shardOf(forkId)) === baseShard; i++) forkId = `fork${i}`;
      const each = Buffer.byteLength(JSON.stringify({ turn: 0 }));
      const log = Array.from({ length: 20 }, (_, k) => ev(k, { turn: 0 }));
      const logBytes = 20 * each;
      const forkRecord = record(forkId, { tenant: 'fresh' });
      const used = (await a.getTenantUsage('fresh')).dataBytes;
      // Either write alone fits; both together do not.
      const max = used + storedSessionBytes(forkRecord.header, forkRecord.labels) + logBytes + logBytes / 2;
      // Hold the base session's shard row, so both writers queue on it: the create first (it
      // locks the tenant's shard rows in order), then the append, whose check snapshot is taken
      // while the create has not committed yet.
      const waiting = async (): Promise<number> =>
        (await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, [db.name])).rows[0]!.n;
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${schema}.tenant_bytes WHERE tenant = 'fresh' AND shard = $1 FOR UPDATE`, [baseShard]);
      const create = a.createSession(forkRecord, log, { maxSessions: 0, maxBytes: max });
      await waitFor(async () => (await waiting()) === 1, 10_000, 'the create waiting on the shard row');
      const append = b.append('base', { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'x', events: log, surfaceLength: 0, quota: { tenant: 'fresh', maxBytes: max } });
      await waitFor(async () => (await waiting()) === 2, 10_000, 'the append waiting on the shard row');
      await holder.query('COMMIT');
      await holder.end();
      expect(await create).toEqual({ kind: 'created' });
      expect(await append).toMatchObject({ kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: max });
      const usage = await b.getTenantUsage('fresh');
      expect(usage.dataBytes).toBeLessThanOrEqual(max);
      // The refused append wrote nothing; the create is whole.
      expect(await b.getSession('base')).toMatchObject({ nextSeq: 0, eventCount: 0 });
      expect(await b.getSession(forkId)).toMatchObject({ nextSeq: 20, eventCount: 20 });
      expect(usage.dataBytes).toBe(used + (await b.getSession(forkId))!.dataBytes);
    } finally {
      await admin.end();
    }
  });

  it('deleting a session gives back its share of the tenant counters', async () => {
    const [a] = await instances(1);
    await a!.createSession(record('d1'), events(0, 3));
    const before = await a!.getTenantUsage('t');
    expect(before.sessions).toBe(1);
    expect(before.dataBytes).toBeGreaterThan(0);
    expect(await a!.deleteSession('d1')).toBe(true);
    expect(await a!.getTenantUsage('t')).toEqual({ sessions: 0, dataBytes: 0 });
  });

  it('pending imports: only the owner appends and publishes; an expired lease is swept by another instance, a live one is not', async () => {
    let now = 10_000;
    const schema = `t${schemaCounter++}`;
    const a = await PostgresSessionStore.open({ url: db.url, schema, now: () => now });
    const b = await PostgresSessionStore.open({ url: db.url, schema, now: () => now });
    open.push(a, b);
    await a.createSession(record('live', { pending: { owner: 'A', leaseUntil: 20_000 } }), []);
    await a.createSession(record('dead', { pending: { owner: 'A', leaseUntil: 11_000 } }), []);
    expect(await b.getSession('live')).toBeUndefined();
    await expect(b.appendPending('live', events(0, 2), { owner: 'B', leaseUntil: 30_000 })).rejects.toThrow(/owned by another importer \(A\)/);
    expect(await a.appendPending('live', events(0, 2), { owner: 'A', leaseUntil: 30_000 })).toEqual({ kind: 'appended' });
    now = 25_000;
    expect(await b.sweepExpiredImports()).toBe(1);
    await expect(a.appendPending('dead', events(0, 1), { owner: 'A', leaseUntil: 40_000 })).rejects.toThrow(StoreUsageError);
    await expect(b.publishSession('live', 'B')).rejects.toThrow(/owned by another importer \(A\)/);
    await expect(b.publishSession('dead', 'A')).rejects.toThrow(/no such pending session/);
    await a.publishSession('live', 'A');
    expect(await b.getSession('live')).toMatchObject({ nextSeq: 2 });
    expect((await b.getTenantUsage('t')).sessions).toBe(1);
  });

  it('a head watch on one instance hears commits of another, and deletions', async () => {
    const [a, b] = await instances(2);
    await a!.createSession(record('s1'), []);
    const watch = b!.openHeadWatch();
    const heard: (number | 'deleted')[] = [];
    watch.watch('s1', (h) => heard.push(h));
    await (watch as unknown as { ready: Promise<void> }).ready;
    await a!.append('s1', { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'A', events: events(0, 3), surfaceLength: 0 });
    await waitFor(() => heard.includes(3));
    await a!.deleteSession('s1');
    await waitFor(() => heard.includes('deleted'));
  });

  it('the slow poll reports a session deleted and re-created without any hint (a replica died before its NOTIFY) as deleted', async () => {
    const [a, b] = await instances(2);
    const schema = `t${schemaCounter - 1}`;
    await a!.createSession(record('r1'), events(0, 2));
    const watch = b!.openHeadWatch();
    const heard: (number | 'deleted')[] = [];
    watch.watch('r1', (h) => heard.push(h));
    await (watch as unknown as { ready: Promise<void> }).ready;
    await waitFor(() => heard.includes(2), 5000, 'the first head');
    // Deleted behind the store's back (no NOTIFY), then re-created with the same head.
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(`SELECT ${schema}.delete_session('r1')`);
    await admin.end();
    await a!.createSession(record('r1', { header: { version: 1, id: 'r1', createdAt: 2000 } }), events(0, 2));
    await waitFor(() => heard.includes('deleted'), 10_000, 'the re-creation reported as deleted');
  });

  it('a session deleted without a hint and re-created (beyond the watched head) before any poll is reported as deleted, not as a head', async () => {
    const schema = `t${schemaCounter++}`;
    const a = await openStore(schema);
    // No slow poll during the test: only the watch's own reads and its reconnect report.
    const b = await PostgresSessionStore.open({ url: db.url, schema, headPollMs: 600_000 });
    open.push(b);
    await a.createSession(record('m4'), events(0, 2));
    const watch = b.openHeadWatch() as unknown as {
      ready: Promise<void>; connects: number; settled?: () => Promise<void>; dropConnectionForTest(): void;
      watch: (id: string, f: (h: number | 'deleted') => void) => () => void;
    };
    await watch.ready;
    const heard: (number | 'deleted')[] = [];
    watch.watch('m4', (h) => heard.push(h));
    await watch.settled?.();
    // A hint (no read) makes the watch know head 3.
    await a.append('m4', { expectedNextSeq: 2, expectedWriter: 'w0', writer: 'A', events: events(2, 1), surfaceLength: 0 });
    await waitFor(() => heard.includes(3), 10_000, 'the hint of head 3');
    // Deleted behind the stores' backs (its NOTIFY lost), re-created and longer than before.
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(`SELECT ${schema}.delete_session('m4')`);
    await admin.end();
    await a.createSession(record('m4', { header: { version: 1, id: 'm4', createdAt: 2000 } }), events(0, 5));
    // The reconnect reads and reports every watched head.
    watch.dropConnectionForTest();
    await waitFor(() => watch.connects >= 2 && heard.length > 1, 10_000, 'the report after the reconnect');
    expect(heard).toEqual([3, 'deleted']);
  });

  it('a session deleted (without a hint) before its watch read it is reported as deleted', async () => {
    const [a, b] = await instances(2);
    const schema = `t${schemaCounter - 1}`;
    await a!.createSession(record('gone'), events(0, 1));
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(`SELECT ${schema}.delete_session('gone')`);
    await admin.end();
    const watch = b!.openHeadWatch();
    const heard: (number | 'deleted')[] = [];
    watch.watch('gone', (h) => heard.push(h));
    await waitFor(() => heard.includes('deleted'), 10_000, 'the deletion');
    expect(heard.every((h) => h === 'deleted')).toBe(true);
  });

  it('the head watch reconnects on its own and reports heads moved while it was away', async () => {
    const [a, b] = await instances(2);
    await a!.createSession(record('s1'), []);
    const watch = b!.openHeadWatch() as unknown as { ready: Promise<void>; connects: number; dropConnectionForTest(): void; watch: (id: string, f: (h: number | 'deleted') => void) => () => void };
    await watch.ready;
    const heard: (number | 'deleted')[] = [];
    watch.watch('s1', (h) => heard.push(h));
    watch.dropConnectionForTest();
    await a!.append('s1', { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'A', events: events(0, 4), surfaceLength: 0 });
    await waitFor(() => watch.connects >= 2 && heard.includes(4));
  });

  it("the head hints' statement notifies every payload and leaves the connection's synchronous_commit as it was (SET LOCAL)", async () => {
    const listener = new pg.Client({ connectionString: db.url });
    const sender = new pg.Client({ connectionString: db.url });
    await Promise.all([listener.connect(), sender.connect()]);
    try {
      const heard: string[] = [];
      listener.on('notification', (m) => heard.push(m.payload ?? ''));
      await listener.query('LISTEN hint_test');
      await sender.query(NOTIFY_SQL, ['hint_test', ['3 s1', '7 s2']]);
      await waitFor(() => heard.length === 2);
      expect(heard).toEqual(['3 s1', '7 s2']);
      expect((await sender.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit).toBe('on');
    } finally {
      await Promise.all([listener.end(), sender.end()]);
    }
  });

  it('identical blob checks of one turn share one query (every subscription of a session asks it after a remote commit)', async () => {
    const [a] = await instances(1);
    await a!.createSession(record('s1'), events(0, 2));
    const spy = vi.spyOn(pg.Client.prototype, 'query');
    try {
      const answers = await Promise.all(Array.from({ length: 50 }, () => a!.blobs.sessionHasBlobs('s1')));
      expect(answers.every((x) => !x)).toBe(true);
      expect(spy.mock.calls.filter((c) => JSON.stringify(c[0]).includes('event_blobs'))).toHaveLength(1);
    } finally {
      spy.mockRestore();
    }
  });

  it('an unreachable database is StoreUnavailableError at run time and CANNOT_OPEN at open, naming the cause', async () => {
    const error = await PostgresSessionStore.open({ url: 'postgresql://postgres@127.0.0.1:1/nowhere', connectTimeoutMs: 2000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreOpenError);
    expect((error as Error).message).toMatch(/unreachable \(.*ECONNREFUSED/);
    const [a] = await instances(1);
    await a!.createSession(record('s1'), []);
    // Kill every connection of the pool from the server side, then make new ones impossible.
    const admin = new pg.Client({ connectionString: db.url.replace(/\/[^/]+$/, '/postgres') });
    await admin.connect();
    await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS false`);
    await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [db.name]);
    try {
      const failure = await a!.getSession('s1').catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect((failure as Error).message).toMatch(/PostgreSQL database is unreachable/);
    } finally {
      await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS true`);
      await admin.end();
    }
    // Recovers on its own once the database is back.
    await waitFor(async () => (await a!.getSession('s1').catch(() => undefined)) !== undefined);
  });
});
