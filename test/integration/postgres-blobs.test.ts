/**
 * Blobs on PostgreSQL across replicas (issue #39, src/store/postgres/pg-blobs.ts,
 * migrations/0006-blobs.ts): two store instances (pools of their own) on one schema insert the
 * same digest at once, and one frees the last reference while the other adds one, with the
 * interleavings forced by holding the other party's transaction open on a raw connection.
 * Invariants after each: one blob per tenant and digest, counted once in the tenant's bytes, no
 * blob without a reference, no reference without its blob, every event reads back byte for byte.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BlobbingStore } from '../../src/app/blobbing-store.js';
import { DataCorruptedError } from '../../src/app/storage-error.js';
import { verify } from '../../src/cli/verify.js';
import { searchText } from '../../src/domain/search-text.js';
import type { Json } from '../../src/domain/event.js';
import { blobDigest } from '../../src/app/blob-codec.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';
import { newSession, req } from './store-contract.js';

const png = Buffer.alloc(32 * 1024, 0x33);
png.write('\x89PNG\r\n', 0, 'latin1');
const DIGEST = blobDigest(png);

function image(seq: number): SessionEvent {
  return {
    type: 'user/message', seq, time: 1_700_000_000_000 + seq, surfaceOp: 'append',
    data: { id: `u${seq}`, role: 'user', content: [{ type: 'image', attachment: { mimeType: 'image/png', data: png.toString('base64') } }], source: { kind: 'user' } },
  };
}

let db: TestDatabase | undefined;
let schemas = 0;

describe.skipIf(!hasPostgres())('PostgreSQL blobs across replicas', () => {
  let schema: string;
  let inner: PostgresSessionStore[] = [];
  let replicas: BlobbingStore[] = [];
  let admin: pg.Client;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  afterEach(async () => {
    await Promise.all(replicas.map((r) => r.close()));
    await admin.end();
  });

  async function open(name = `pb${schemas++}`): Promise<void> {
    schema = name;
    inner = [await PostgresSessionStore.open({ url: db!.url, schema, poolSize: 4 })];
    inner.push(await PostgresSessionStore.open({ url: db!.url, schema, poolSize: 4 }));
    replicas = inner.map((s) => new BlobbingStore(s, 1024));
    admin = new pg.Client({ connectionString: db!.url });
    await admin.connect();
  }

  /** Appends one image message at the session's head. */
  async function appendImage(r: BlobbingStore, id: string) {
    const rec = await r.getSession(id);
    return r.append(id, req(rec!.nextSeq, [image(rec!.nextSeq)], { expectedWriter: rec!.writer }));
  }

  /** The invariants of the tenant's blobs. */
  async function invariants(tenant: string): Promise<{ blobs: number; rowBytes: number; counted: number }> {
    const q = async <R extends pg.QueryResultRow>(text: string): Promise<R[]> => (await admin.query<R>(text, [tenant])).rows;
    const orphans = await q<{ digest: string }>(`SELECT b.digest FROM ${schema}.blobs b WHERE b.tenant = $1 AND NOT EXISTS (SELECT 1 FROM ${schema}.event_blobs e WHERE e.tenant = b.tenant AND e.digest = b.digest)`);
    expect(orphans, 'a blob without a reference').toEqual([]);
    const dangling = await q<{ digest: string }>(`SELECT e.digest FROM ${schema}.event_blobs e WHERE e.tenant = $1 AND NOT EXISTS (SELECT 1 FROM ${schema}.blobs b WHERE b.tenant = e.tenant AND b.digest = e.digest)`);
    expect(dangling, 'a reference without its blob').toEqual([]);
    const blobs = await q<{ n: string; bytes: string }>(`SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM ${schema}.blobs WHERE tenant = $1`);
    const rows = await q<{ bytes: string }>(`SELECT coalesce(sum(data_bytes), 0) AS bytes FROM ${schema}.sessions WHERE tenant = $1`);
    const counted = (await replicas[0]!.getTenantUsage(tenant)).dataBytes;
    // The tenant counts its sessions' rows and each blob once.
    expect(counted).toBe(Number(rows[0]!.bytes) + Number(blobs[0]!.bytes));
    return { blobs: Number(blobs[0]!.n), rowBytes: Number(rows[0]!.bytes), counted };
  }

  async function readsBack(r: BlobbingStore, id: string, n: number): Promise<void> {
    const events = await r.readEvents(id, { fromSeq: 0, direction: 'forward', limit: 1000 });
    expect(events.length).toBe(n);
    for (const e of events) expect(JSON.stringify(e.data) === JSON.stringify(image(e.seq).data), `seq ${e.seq} reads back`).toBe(true);
  }

  it('two replicas storing the same new digest at once keep one blob, counted once', async () => {
    await open();
    const [a, b] = replicas as [BlobbingStore, BlobbingStore];
    for (let round = 0; round < 6; round++) {
      const ids = [`a${round}`, `b${round}`, `c${round}`, `d${round}`];
      // Creates and appends with the image, half on each replica, all at once.
      const outcomes = await Promise.all(ids.map((id, i) => (i % 2 === 0 ? a : b).createSession(newSession(id, { tenant: 't' }), [image(0), image(1)])));
      expect(outcomes).toEqual(ids.map(() => ({ kind: 'created' })));
      expect(await Promise.all(ids.map((id, i) => appendImage(i % 2 === 0 ? b : a, id)))).toEqual(ids.map(() => ({ kind: 'appended' })));
      expect((await invariants('t')).blobs).toBe(1);
      for (const id of ids) await readsBack(a, id, 3);
      // Every session gone, from both replicas at once: the blob goes with the last one.
      expect(await Promise.all(ids.map((id, i) => (i % 2 === 0 ? b : a).deleteSession(id)))).toEqual(ids.map(() => true));
      expect(await invariants('t')).toEqual({ blobs: 0, rowBytes: 0, counted: 0 });
    }
  });

  it('a delete freeing the last reference while another replica adds one: the writer waits and stores the blob again', async () => {
    await open();
    const [a, b] = replicas as [BlobbingStore, BlobbingStore];
    await a.createSession(newSession('old', { tenant: 't' }), [image(0)]);
    await a.createSession(newSession('new', { tenant: 't' }), []);
    // The delete runs first and holds its transaction open: the blob row is locked and deleted, uncommitted.
    await admin.query('BEGIN');
    expect((await admin.query(`SELECT ${schema}.delete_session('old') AS d`)).rows[0].d).toBe(true);
    expect((await admin.query(`SELECT count(*)::int AS n FROM ${schema}.blobs`)).rows[0].n).toBe(0);
    const adding = appendImage(b, 'new');
    // The writer is blocked on the deleted row until the delete commits.
    const blocked = await Promise.race([adding.then(() => 'done'), new Promise((r) => setTimeout(() => r('waiting'), 300))]);
    expect(blocked).toBe('waiting');
    await admin.query('COMMIT');
    expect(await adding).toEqual({ kind: 'appended' });
    expect(await invariants('t')).toMatchObject({ blobs: 1 });
    await readsBack(a, 'new', 1);
  });

  it('a reference added while a delete waits to free the blob: the delete sees it and keeps the blob', async () => {
    await open();
    const [a, b] = replicas as [BlobbingStore, BlobbingStore];
    await a.createSession(newSession('old', { tenant: 't' }), [image(0)]);
    await a.createSession(newSession('new', { tenant: 't' }), [{ type: 'x/plain', seq: 0, time: 1, data: {} }]);
    // A writer's transaction (as pg-blobs.ts runs it) holds its KEY SHARE lock and its reference, uncommitted.
    await admin.query('BEGIN');
    expect((await admin.query(`SELECT 1 FROM ${schema}.blobs WHERE tenant = 't' AND digest = $1 FOR KEY SHARE`, [DIGEST])).rowCount).toBe(1);
    await admin.query(`INSERT INTO ${schema}.event_blobs (session_id, seq, digest, tenant, n) VALUES ('new', 0, $1, 't', 1)`, [DIGEST]);
    const deleting = b.deleteSession('old');
    const blocked = await Promise.race([deleting.then(() => 'done'), new Promise((r) => setTimeout(() => r('waiting'), 300))]);
    expect(blocked).toBe('waiting');
    await admin.query('COMMIT');
    expect(await deleting).toBe(true);
    const kept = await admin.query(`SELECT count(*)::int AS n FROM ${schema}.blobs WHERE digest = $1`, [DIGEST]);
    expect(kept.rows[0].n).toBe(1);
    expect(Buffer.from((await a.blobs!.readBlob('t', DIGEST, 0, png.byteLength))!.bytes).equals(png)).toBe(true);
  });

  it('replicas racing deletes of the last references against appends of the same image leave no orphan and no dangling reference', async () => {
    await open();
    const [a, b] = replicas as [BlobbingStore, BlobbingStore];
    for (let round = 0; round < 8; round++) {
      await a.createSession(newSession(`x${round}`, { tenant: 't' }), [image(0)]);
      await b.createSession(newSession(`y${round}`, { tenant: 't' }), []);
      const [deleted, appended] = await Promise.all([a.deleteSession(`x${round}`), appendImage(b, `y${round}`)]);
      expect(deleted).toBe(true);
      expect(appended).toEqual({ kind: 'appended' });
      expect((await invariants('t')).blobs).toBe(1);
      await readsBack(a, `y${round}`, 1);
      expect(await b.deleteSession(`y${round}`)).toBe(true);
      expect((await invariants('t')).blobs).toBe(0);
    }
  });

  it('a damaged blob is DATA_LOSS naming the session, the seq and the digest; the read by digest refuses it too', async () => {
    await open();
    const [a] = replicas as [BlobbingStore];
    await a.createSession(newSession('d', { tenant: 't' }), [{ type: 'x/plain', seq: 0, time: 1, data: {} }, image(1)]);
    // A flipped byte, the checksum left as it was.
    await admin.query(`UPDATE ${schema}.blobs SET bytes = overlay(bytes PLACING '\\x00'::bytea FROM 100 FOR 1) WHERE digest = $1`, [DIGEST]);
    const err = await a.readEvents('d', { fromSeq: 0, direction: 'forward', limit: 10 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataCorruptedError);
    expect(err).toMatchObject({ sessionId: 'd', seq: 1, digest: DIGEST });
    await expect(a.blobs!.readBlob('t', DIGEST, 0, 10)).rejects.toThrow(/damaged/);
    // The events without references are still served.
    expect((await a.readEvents('d', { fromSeq: 0, direction: 'forward', limit: 1 })).map((e) => e.seq)).toEqual([0]);
  });

  it('verify --db postgres://… checks the blobs: clean, then a damaged blob names session, seq and digest, and a lost reference is reported', async () => {
    await open('palimpsest');
    const [a] = replicas as [BlobbingStore];
    await a.createSession(newSession('v', { tenant: 't' }), [{ type: 'x/plain', seq: 0, time: 1, data: {} }, image(1), image(2)]);
    await a.createSession(newSession('w', { tenant: 't' }), [image(0)]);
    const run = async (): Promise<{ code: number; out: { ok: boolean; problems: { sessionId?: string; seq?: number; problem: string }[] } }> => {
      let out = '';
      const code = await verify(['--db', db!.url, '--json'], { stdout: { write: (s: string) => (out += s) }, stderr: { write: () => true }, env: {} });
      return { code, out: JSON.parse(out) as { ok: boolean; problems: { sessionId?: string; seq?: number; problem: string }[] } };
    };
    expect(await run()).toMatchObject({ code: 0, out: { ok: true, problems: [] } });
    await admin.query(`UPDATE ${schema}.blobs SET bytes = overlay(bytes PLACING '\\x00'::bytea FROM 100 FOR 1) WHERE digest = $1`, [DIGEST]);
    const damaged = await run();
    expect(damaged.code).toBe(1);
    expect(damaged.out.problems.map((p) => [p.sessionId, p.seq])).toEqual([['v', 1], ['v', 2], ['w', 0]]);
    expect(damaged.out.problems[0]!.problem).toContain(DIGEST);
    await admin.query(`UPDATE ${schema}.blobs SET bytes = $1 WHERE digest = $2`, [png, DIGEST]);
    await admin.query(`DELETE FROM ${schema}.event_blobs WHERE session_id = 'v' AND seq = 2`);
    const lost = await run();
    expect(lost.out.problems).toEqual([{ sessionId: 'v', seq: 2, problem: expect.stringContaining(`references blob ${DIGEST}, which it holds no reference to`) as string }]);
  });

  it('search_text skips a blob reference, digest included, exactly as the domain does; other $blob objects stay searchable', async () => {
    await open();
    const d = `sha256:${'ab'.repeat(32)}`;
    const cases: Json[] = [
      { text: 'before', out: { $blob: d, bytes: 70000, mediaType: 'text/plain; charset=utf-8' } },
      { text: 'x', out: { $blob: d } },
      { text: 'x', out: { $blob: d, bytes: 1, mediaType: 'image/png', encoding: 'base64' } },
      { text: 'x', out: { $blob: d, other: 'kept' } },
      { text: 'x', out: { $blob: 'sha256:short', bytes: 1 } },
      { text: 'x', out: { $blob: d, bytes: 1.5 } },
      { text: 'x', out: { $blob: d, bytes: -1 } },
      { text: 'x', out: { $blob: d, mediaType: 3 } },
      { text: 'x', out: { $blob: d, encoding: 'hex' } },
      { text: 'x', out: [{ $blob: d }, 'after'] },
    ];
    for (const data of cases) {
      const r = await admin.query<{ t: string }>(`SELECT ${schema}.search_text($1::jsonb) AS t`, [JSON.stringify(data)]);
      expect(r.rows[0]!.t, JSON.stringify(data)).toBe(searchText('user/message', data));
    }
  });
});
