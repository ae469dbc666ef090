/**
 * Group commit across sessions in the PostgreSQL store (issue #37, group-commit.ts): appends of
 * many sessions queued while the store's append transactions are all in flight go together in
 * one transaction (append_many), each with exactly the checks of a lone append, and each gets its
 * own outcome. An append carrying blobs (issue #39) goes alone, in the blobs' transaction
 * (pg-blobs.ts); the appends queued before and after it still group.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blobDigest } from '../../src/app/blob-codec.js';
import type { AppendRequest, NewSession } from '../../src/app/store-port.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { MAX_TRANSACTIONS } from '../../src/store/postgres/group-commit.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { waitFor } from '../support/poll.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';

const ev = (seq: number): SessionEvent => ({ type: 'turn/start', seq, time: 1_700_000_000_000 + seq, data: { turn: seq } });
/** An event whose columns are all set, sent next to events whose optional columns are NULL. */
const full = (seq: number): SessionEvent => ({
  type: 'é✓\t"{}', seq, time: 2 ** 53 + 1_700_000_000_000, data: { s: 'quote " backslash \\ {,}' }, sourceEventSeqs: [0, seq - 1], surfaceOp: 'append', ignorable: true,
});
const record = (id: string): NewSession => ({ header: { version: 1, id, createdAt: 1000 }, labels: {}, tenant: 'g', strict: false, pairingGuard: false, writer: 'w0' });
const next = (seq: number, extra: Partial<AppendRequest> = {}): AppendRequest =>
  ({ expectedNextSeq: seq, expectedWriter: `w${seq === 1 ? 0 : seq - 1}`, writer: `w${seq}`, events: [ev(seq)], surfaceLength: seq, ...extra });

describe.skipIf(!hasPostgres())('PostgreSQL group commit across sessions', () => {
  let db: TestDatabase;
  let admin: pg.Client;
  let store: PostgresSessionStore;

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

  it('appends of several sessions queued meanwhile share one transaction, each with its own outcome, and nothing is retried', async () => {
    store = await PostgresSessionStore.open({ url: db.url, schema: 'gc', headPollMs: 60_000 });
    const blocked = Array.from({ length: MAX_TRANSACTIONS }, (_, i) => `b${i}`);
    for (const id of [...blocked, 'ok', 'late', 'dup', 'tight']) expect(await store.createSession(record(id), [ev(0)])).toEqual({ kind: 'created' });
    expect(await store.append('dup', next(1, { idempotency: { key: 'k', requestHash: 'h' } }))).toEqual({ kind: 'appended' });
    const usage = await store.getTenantUsage('g');

    // Another connection holds the rows of MAX_TRANSACTIONS sessions: one append to each fills
    // every transaction slot of the store, and the appends after them queue.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    let results: unknown[];
    const commitsBefore = store.stats().commits;
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM gc.sessions WHERE id = ANY($1) FOR UPDATE`, [blocked]);
      const first = blocked.map((id) => store.append(id, next(1)));
      await waitFor(async () => Number((await admin.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0]!.n) === MAX_TRANSACTIONS,
      10_000, 'every append transaction slot to wait');
      const queued = [
        store.append('ok', next(1)),
        store.append('late', next(5)), // a stale head: conflict
        store.append('ok', next(2, { events: [full(2)] })), // planned on the previous call of the same session
        store.append('dup', next(2, { idempotency: { key: 'k', requestHash: 'h' } })), // a used key: the stored result
        store.append('gone', next(1)), // no such session
        store.append('tight', next(1, { quota: { tenant: 'g', maxBytes: usage.dataBytes } })), // over the byte quota
      ];
      await holder.query('COMMIT');
      results = await Promise.all([...first, ...queued]);
    } finally {
      await holder.end();
    }
    expect(results.slice(0, MAX_TRANSACTIONS)).toEqual(blocked.map(() => ({ kind: 'appended' })));
    expect(results.slice(MAX_TRANSACTIONS)).toEqual([
      { kind: 'appended' },
      { kind: 'conflict', actualNextSeq: 1 },
      { kind: 'appended' },
      { kind: 'duplicate', result: { seqs: [1], requestHash: 'h', surfaceLength: 1 } },
      { kind: 'not-found' },
      { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: usage.dataBytes, actual: expect.any(Number) as number },
    ]);
    // The six queued calls went in one transaction.
    expect(store.stats().maxGroupSize).toBe(6);
    expect(store.stats().commits - commitsBefore).toBe(MAX_TRANSACTIONS + 2);
    expect(store.stats().statementRetries).toBe(0);
    expect(await store.readEvents('ok', { fromSeq: 0, direction: 'forward', limit: 10 })).toEqual([ev(0), ev(1), full(2)]);
    expect((await store.getSession('late'))?.nextSeq).toBe(1);
    expect((await store.getSession('tight'))?.nextSeq).toBe(1);
    // The feed has each committed append once, in commit order.
    const appended = (await store.readFeed({ tenant: 'g', after: 0, limit: 100 })).filter((r) => r.kind === 'appended').map((r) => `${r.sessionId}@${r.nextSeq}`);
    expect(appended.slice(1).sort()).toEqual([...blocked.map((id) => `${id}@2`), 'ok@2', 'ok@3'].sort());
  });

  it('an append carrying blobs goes alone; the plain appends queued around it still share a transaction', async () => {
    store = await PostgresSessionStore.open({ url: db.url, schema: 'gcb', headPollMs: 60_000 });
    const blocked = Array.from({ length: MAX_TRANSACTIONS }, (_, i) => `b${i}`);
    for (const id of [...blocked, 'p1', 'x', 'p2', 'y']) expect(await store.createSession(record(id), [ev(0)])).toEqual({ kind: 'created' });
    const bytes = Buffer.alloc(4096, 9);
    const digest = blobDigest(bytes);
    const withBlob = (seq: number): Partial<AppendRequest> => ({
      events: [{ type: 'turn/start', seq, time: 1_700_000_000_000 + seq, data: { img: { $blob: digest, bytes: bytes.length, mediaType: 'image/png', encoding: 'base64' } } }],
      blobs: { puts: [{ digest, bytes, mediaType: 'image/png' }], eventBlobs: [[digest]] },
    });
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    let results: unknown[];
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM gcb.sessions WHERE id = ANY($1) FOR UPDATE`, [blocked]);
      const first = blocked.map((id) => store.append(id, next(1)));
      await waitFor(async () => Number((await admin.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0]!.n) === MAX_TRANSACTIONS,
      10_000, 'every append transaction slot to wait');
      const queued = [
        store.append('p1', next(1)),
        store.append('x', next(1, withBlob(1))), // first in its lane, with blobs: alone
        store.append('x', next(2)),
        store.append('p2', next(1)),
        store.append('y', next(1)),
        store.append('y', next(2, withBlob(2))), // behind a plain call of its lane: that one goes with the group
      ];
      await holder.query('COMMIT');
      results = await Promise.all([...first, ...queued]);
    } finally {
      await holder.end();
    }
    expect(results).toEqual([...blocked, 1, 2, 3, 4, 5, 6].map(() => ({ kind: 'appended' })));
    // p1, p2 and y's first call together; the blob-carrying calls each alone
    expect(store.stats().maxGroupSize).toBe(3);
    expect(store.stats().statementRetries).toBe(0);
    const refs = await admin.query<{ session_id: string; seq: string }>('SELECT session_id, seq FROM gcb.event_blobs ORDER BY session_id');
    expect(refs.rows.map((r) => `${r.session_id}@${r.seq}`)).toEqual(['x@1', 'y@2']);
    expect((await admin.query('SELECT 1 FROM gcb.blobs')).rowCount).toBe(1);
    for (const id of ['x', 'y']) expect((await store.readEvents(id, { fromSeq: 0, direction: 'forward', limit: 10 })).map((e) => e.seq)).toEqual([0, 1, 2]);
  });
});
