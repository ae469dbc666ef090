/**
 * The PostgreSQL store's blobs (issue #39, migrations/0008-blobs.ts, src/app/blob-port.ts,
 * docs/blobs.md "PostgreSQL").
 *
 * A write whose events reference blobs runs as one explicit transaction on one pool connection:
 * the store's own write function (append, create_session, append_pending: its checks and rows,
 * unchanged), then, only when it stored the events, the blobs and the events' references, the
 * tenant byte counter grown by the blobs the tenant did not have, and the byte quota checked again
 * with them. One COMMIT, so a blob never lands without its event nor an event without its blob.
 *
 * Concurrency across replicas, per referenced digest in digest order:
 *  - `INSERT … ON CONFLICT DO NOTHING RETURNING size`: of two writers inserting the same digest at
 *    once, the second waits for the first's commit and then stores nothing (the blob is counted
 *    once per tenant, by the writer that inserted it; if the first rolls back, the second inserts).
 *  - When the row was there already, `SELECT … FOR KEY SHARE` locks it for this transaction (the
 *    lock the event_blobs foreign key takes too). A transaction freeing the blob (the last
 *    reference's session deleted: sessions_unref_blobs) locks it FOR UPDATE, so either it waits for
 *    this writer and then sees its reference (the blob stays), or it freed the blob first and the
 *    lock finds no row: the writer inserts the blob again from the bytes it carries.
 * Deadlocks (40P01) and serialization failures roll the whole transaction back; it is run again.
 */
import type pg from 'pg';
import { crc32 } from 'node:zlib';
import { BlobDamagedError } from '../../app/blob-codec.js';
import type { BlobInfo, BlobPut, BlobSlice, BlobStorePort, BlobWrites, StoredBlob } from '../../app/blob-port.js';
import { StoreClosedError, StoreUsageError } from '../store-errors.js';
import { mapError } from './pg-errors.js';
import type { TurnReads } from './coalesced-reads.js';
import { TENANT_SHARDS } from './schema.js';
import { STATEMENT_ATTEMPTS, statementName, type Statements } from './statements.js';

/** The CRC-32 stored with a blob (as the SQLite store's; a signed 32-bit integer). */
export function pgBlobCrc(bytes: Uint8Array): number {
  return crc32(bytes) | 0;
}

const RETRIED: ReadonlySet<string> = new Set(['40P01', '40001']);

/** Times a writer re-inserts a blob that a concurrent delete freed between its insert and its lock. */
const REINSERTS = 8;

/** The events of a blob-carrying write. */
export interface BlobWriteTarget {
  readonly sessionId: string;
  /** The seq of each of the write's events (by index, as BlobWrites.eventBlobs). */
  readonly seqs: readonly number[];
  readonly blobs: BlobWrites;
  /** The tenant byte quota (0 = none). */
  readonly maxBytes: number;
}

/** What the transaction did: the write function's rows, or a byte quota the blobs exceeded (nothing stored). */
export type BlobTxnResult<R> = { readonly rows: R[]; readonly quotaActual?: undefined } | { readonly rows: R[]; readonly quotaActual: number };

function buf(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The blob side of one PostgreSQL store. */
export class PgBlobs {
  readonly #pool: pg.Pool;
  readonly #sql: Statements;

  constructor(pool: pg.Pool, sql: Statements) {
    this.#pool = pool;
    this.#sql = sql;
  }

  /**
   * Runs the write function `text` (one row whose `outcome` is `ok` when it stored the events)
   * and the blobs of `target` in one transaction (see the module comment).
   */
  async write<R extends pg.QueryResultRow & { outcome: string }>(text: string, values: unknown[], ok: string, target: BlobWriteTarget): Promise<BlobTxnResult<R>> {
    if (this.#sql.ended) throw new StoreClosedError();
    const call = this.#attempts<R>(text, values, ok, target);
    this.#sql.inFlight.add(call);
    try {
      return await call;
    } finally {
      this.#sql.inFlight.delete(call);
    }
  }

  async #attempts<R extends pg.QueryResultRow & { outcome: string }>(text: string, values: unknown[], ok: string, target: BlobWriteTarget): Promise<BlobTxnResult<R>> {
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await this.#pool.connect();
      } catch (error) {
        return mapError(error);
      }
      let destroy = false;
      try {
        return await this.#transaction<R>(client, text, values, ok, target);
      } catch (error) {
        await client.query('ROLLBACK').catch(() => { destroy = true; });
        const code = (error as { code?: unknown } | undefined)?.code;
        if (attempt < STATEMENT_ATTEMPTS && typeof code === 'string' && RETRIED.has(code)) {
          this.#sql.countRetry(code, attempt, text);
          await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
          continue;
        }
        if (error instanceof StoreUsageError) throw error;
        return mapError(error);
      } finally {
        client.release(destroy);
      }
    }
  }

  async #transaction<R extends pg.QueryResultRow & { outcome: string }>(client: pg.PoolClient, text: string, values: unknown[], ok: string, t: BlobWriteTarget): Promise<BlobTxnResult<R>> {
    const s = this.#sql.s;
    await client.query('BEGIN');
    const rows = (await client.query<R>({ name: statementName(text), text, values })).rows;
    if (rows[0]?.outcome !== ok) {
      await client.query('ROLLBACK');
      return { rows };
    }
    // The write function locked the session row: its tenant cannot change under us.
    const tenantText = `SELECT tenant FROM ${s}.sessions WHERE id = $1`;
    const tenant = (await client.query<{ tenant: string }>({ name: statementName(tenantText), text: tenantText, values: [t.sessionId] })).rows[0]!.tenant;
    const added = await this.#storeBlobs(client, tenant, t);
    if (added > 0) {
      const add = `UPDATE ${s}.tenant_bytes SET data_bytes = data_bytes + $3 WHERE tenant = $1 AND shard = (hashtext($2) & ${TENANT_SHARDS - 1})`;
      await client.query({ name: statementName(add), text: add, values: [tenant, t.sessionId, added] });
      if (t.maxBytes > 0) {
        // The write function locked every shard row of the tenant for its own quota check: exact.
        const used = `SELECT coalesce(sum(data_bytes), 0)::bigint AS used FROM ${s}.tenant_bytes WHERE tenant = $1`;
        const total = Number((await client.query<{ used: string }>({ name: statementName(used), text: used, values: [tenant] })).rows[0]!.used);
        if (total > t.maxBytes) {
          await client.query('ROLLBACK');
          return { rows, quotaActual: total };
        }
      }
    }
    await client.query('COMMIT');
    return { rows };
  }

  /** Stores the blobs the tenant lacks and every reference; returns the bytes of the blobs it inserted. */
  async #storeBlobs(client: pg.PoolClient, tenant: string, t: BlobWriteTarget): Promise<number> {
    const s = this.#sql.s;
    const puts = new Map<string, BlobPut>(t.blobs.puts.map((p) => [p.digest, p]));
    const refSeqs: number[] = [];
    const refDigests: string[] = [];
    const refCounts: number[] = [];
    const referenced = new Set<string>();
    t.blobs.eventBlobs.forEach((digests, i) => {
      if (digests === undefined) return;
      const counts = new Map<string, number>();
      for (const d of digests) counts.set(d, (counts.get(d) ?? 0) + 1);
      for (const [d, n] of counts) {
        refSeqs.push(t.seqs[i]!);
        refDigests.push(d);
        refCounts.push(n);
        referenced.add(d);
      }
    });
    const insert = `INSERT INTO ${s}.blobs (tenant, digest, size, media_type, crc, bytes) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, digest) DO NOTHING RETURNING size`;
    const lock = `SELECT 1 FROM ${s}.blobs WHERE tenant = $1 AND digest = $2 FOR KEY SHARE`;
    let added = 0;
    for (const d of [...referenced].sort()) {
      const put = puts.get(d);
      for (let i = 0; ; i++) {
        if (put !== undefined) {
          const r = await client.query({ name: statementName(insert), text: insert, values: [tenant, d, put.bytes.byteLength, put.mediaType, pgBlobCrc(put.bytes), buf(put.bytes)] });
          if (r.rowCount === 1) {
            added += put.bytes.byteLength;
            break;
          }
        }
        if ((await client.query({ name: statementName(lock), text: lock, values: [tenant, d] })).rowCount === 1) break;
        if (put === undefined) throw new StoreUsageError(`an event references blob ${d}, which the write does not carry and the tenant has not stored`);
        if (i >= REINSERTS) throw new StoreUsageError(`blob ${d} was freed ${REINSERTS} times while this write stored it`);
      }
    }
    if (refSeqs.length > 0) {
      const refs = `INSERT INTO ${s}.event_blobs (session_id, seq, digest, tenant, n)
        SELECT $1, u.seq, u.digest, $2, u.n FROM unnest($3::bigint[], $4::text[], $5::integer[]) AS u (seq, digest, n)`;
      await client.query({ name: statementName(refs), text: refs, values: [t.sessionId, tenant, refSeqs, refDigests, refCounts] });
    }
    return added;
  }

  #checked(digest: string, crc: number, bytes: Buffer): Buffer {
    if (pgBlobCrc(bytes) !== crc) throw new BlobDamagedError(digest, 'checksum');
    return bytes;
  }

  /** The blob port's reads (`reads`: the store's turn-coalesced reads, which its close() waits for). */
  port(checkOpen: () => void, reads: TurnReads): BlobStorePort {
    const s = this.#sql.s;
    return {
      readSessionBlobs: async (sessionId, digests) => {
        checkOpen();
        const out = new Map<string, StoredBlob>();
        if (digests.length === 0) return out;
        const rows = await this.#sql.query<{ digest: string; crc: number; bytes: Buffer }>(
          `SELECT b.digest, b.crc, b.bytes FROM ${s}.sessions x JOIN ${s}.blobs b ON b.tenant = x.tenant AND b.digest = ANY($2::text[]) WHERE x.id = $1`,
          [sessionId, [...digests]]);
        for (const r of rows) out.set(r.digest, { bytes: this.#checked(r.digest, r.crc, r.bytes) });
        return out;
      },
      sessionHasBlobs: async (sessionId) => {
        checkOpen();
        // Coalesced in the turn (coalesced-reads.ts): a commit notified from another replica wakes
        // every subscription of the session at once, and each one's read asks this of the blob
        // layer (100 subscribers were 100 queries queued on the pool before any delivery).
        const rows = await reads.read(`b\0${sessionId}`, () => this.#sql.query<{ has: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM ${s}.event_blobs WHERE session_id = $1) AS has`, [sessionId]));
        return rows[0]!.has;
      },
      tenantBlobs: async (tenant, digests) => {
        checkOpen();
        const out = new Map<string, BlobInfo>();
        if (digests.length === 0) return out;
        const rows = await this.#sql.query<{ digest: string; size: string; media_type: string }>(
          `SELECT digest, size, media_type FROM ${s}.blobs WHERE tenant = $1 AND digest = ANY($2::text[])`, [tenant, [...digests]]);
        for (const r of rows) out.set(r.digest, { digest: r.digest, size: Number(r.size), mediaType: r.media_type });
        return out;
      },
      readBlob: async (tenant, digest, offset, length): Promise<BlobSlice | undefined> => {
        checkOpen();
        const rows = await this.#sql.query<{ size: string; media_type: string; crc: number; bytes: Buffer }>(
          `SELECT size, media_type, crc, bytes FROM ${s}.blobs WHERE tenant = $1 AND digest = $2`, [tenant, digest]);
        const row = rows[0];
        if (row === undefined) return undefined;
        const size = Number(row.size);
        const bytes = this.#checked(digest, row.crc, row.bytes);
        const start = Math.min(Math.max(0, offset), size);
        return { info: { digest, size, mediaType: row.media_type }, bytes: bytes.subarray(start, Math.min(size, start + Math.max(0, length))) };
      },
    };
  }
}
