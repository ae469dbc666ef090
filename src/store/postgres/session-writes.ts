/**
 * The session-level writes of the PostgreSQL store (the appends go through the lanes of
 * group-commit.ts): create and delete with the tenant counters, import chunks, publish and label
 * updates. Each is one statement calling a SQL function of schema.ts (one implicit transaction);
 * quotas are checked against the tenant counters under the session-row lock.
 */
import type {
  CreateOutcome, CreateQuota, DeleteExpectation, NewSession, PendingChunkOptions, PendingChunkOutcome, PublishMetadata, UpdateLabelsOutcome,
} from '../../app/store-port.js';
import { labelsBytesDelta, storedSessionBytes } from '../../domain/session-bytes.js';
import type { SessionEvent } from '../../domain/event.js';
import type { BlobWrites } from '../../app/blob-port.js';
import type { PgBlobs } from './pg-blobs.js';
import { StoreUsageError, checkAscendingSeqs } from '../store-errors.js';
import type { WriteCounters } from './group-commit.js';
import type { HeadNotifier } from './notifier.js';
import { encodeEvents } from './row-codec.js';
import { TENANT_SHARDS } from './schema.js';
import type { Statements } from './statements.js';

const APPENDED = Object.freeze({ kind: 'appended' as const });

/** What the writes need of the store. */
export interface WriteContext {
  readonly sql: Statements;
  readonly counters: WriteCounters;
  readonly notifier: HeadNotifier;
  /** The blob writes (pg-blobs.ts): a write with blobs runs in their transaction. */
  readonly blobs: PgBlobs;
}

/** The write function's rows, in the blobs' transaction when the write carries blobs (a quota they exceed replaces the outcome). */
async function run<R extends { outcome: string; q_name?: string | null; q_actual: number | null }>(
  w: WriteContext, text: string, values: unknown[], ok: string, sessionId: string, events: readonly SessionEvent[], blobs: BlobWrites | undefined, maxBytes: number,
): Promise<R[]> {
  if (blobs === undefined) return w.sql.query<R>(text, values);
  const r = await w.blobs.write<R>(text, values, ok, { sessionId, seqs: events.map((e) => e.seq), blobs, maxBytes });
  if (r.quotaActual === undefined) return r.rows;
  return [{ ...r.rows[0]!, outcome: 'quota-exceeded', q_name: 'tenant_max_bytes', q_actual: r.quotaActual }];
}

export async function createSession(w: WriteContext, record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota, blobs?: BlobWrites): Promise<CreateOutcome> {
  const h = record.header;
  checkAscendingSeqs(h.id, events, 0);
  const { arrays, dataBytes } = encodeEvents(events);
  const rows = await run<{ outcome: string; q_name: string | null; q_limit: number | null; q_actual: number | null }>(
    w, `SELECT * FROM ${w.sql.s}.create_session($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
       $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)`,
    [
      h.id, h.version, h.createdAt, h.cwd ?? null, h.parentSession ?? null, h.seedLength ?? null, h.origin ?? null,
      h.delegationDepth ?? null, h.agentPreset ?? null, JSON.stringify(record.labels), record.tenant, record.strict,
      record.pairingGuard, record.pending?.owner ?? null, record.pending?.leaseUntil ?? null, record.writer, ...arrays,
      dataBytes + storedSessionBytes(h, record.labels), Math.floor(quota?.maxSessions ?? 0), Math.floor(quota?.maxBytes ?? 0),
    ],
    'created', h.id, events, blobs, Math.floor(quota?.maxBytes ?? 0),
  );
  const r = rows[0]!;
  if (r.outcome === 'created') {
    w.counters.commits++;
    // A visible session: its feed record wakes the other replicas' feeds (a pending import's comes at publish).
    if (record.pending === undefined) w.notifier.notifyFeed(h.id);
    return { kind: 'created' };
  }
  if (r.outcome === 'exists') return { kind: 'exists' };
  // The limit as given (the SQL compares integers: used > floor(limit) iff used > limit).
  const limitName = r.q_name as 'tenant_max_sessions' | 'tenant_max_bytes';
  return { kind: 'quota-exceeded', limitName, limit: (limitName === 'tenant_max_sessions' ? quota?.maxSessions : quota?.maxBytes) ?? r.q_limit!, actual: r.q_actual! };
}

export async function deleteSession(w: WriteContext, id: string, expected?: DeleteExpectation): Promise<boolean> {
  // Conditional: the session row is locked (FOR UPDATE, as every append locks it) and its head
  // and creation time compared in the same statement; an append that committed first is seen
  // (READ COMMITTED re-reads a locked row after the holder commits), so the session is kept.
  const rows = expected === undefined
    ? await w.sql.query<{ deleted: boolean }>(`SELECT ${w.sql.s}.delete_session($1) AS deleted`, [id])
    : await w.sql.query<{ deleted: boolean }>(
      `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${w.sql.s}.sessions WHERE id = $1 AND pending_owner IS NULL AND next_seq = $2 AND created_at = $3 FOR UPDATE)
         THEN ${w.sql.s}.delete_session($1) ELSE false END AS deleted`,
      [id, expected.nextSeq, expected.createdAt],
    );
  const deleted = rows[0]!.deleted;
  if (deleted) {
    w.counters.commits++;
    w.notifier.notify(id, -1);
  }
  return deleted;
}

export async function deletePending(w: WriteContext, id: string, owner: string): Promise<boolean> {
  // Re-checked under the row lock (as the sweep does): a published or foreign session is kept.
  const rows = await w.sql.query<{ deleted: boolean }>(
    `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${w.sql.s}.sessions WHERE id = $1 AND pending_owner = $2 FOR UPDATE)
            THEN ${w.sql.s}.delete_session($1) ELSE false END AS deleted`,
    [id, owner],
  );
  const deleted = rows[0]!.deleted;
  if (deleted) w.counters.commits++;
  return deleted;
}

export async function publishSession(w: WriteContext, id: string, owner: string, metadata?: PublishMetadata): Promise<void> {
  // With an import's metadata trailer (issue #35): labels, pairing guard and the byte counters in
  // the publish's own statement.
  const rows = await w.sql.query<{ published: boolean; owner: string | null }>(
    `WITH p AS (UPDATE ${w.sql.s}.sessions SET pending_owner = NULL, lease_until = NULL,
                  labels = coalesce($3::jsonb, labels), pairing_guard = coalesce($4::boolean, pairing_guard), data_bytes = data_bytes + $5
                WHERE id = $1 AND pending_owner = $2 RETURNING id, tenant),
          t AS (UPDATE ${w.sql.s}.tenant_bytes SET data_bytes = data_bytes + $5
                WHERE $5 <> 0 AND tenant = (SELECT tenant FROM p) AND shard = (hashtext($1) & ${TENANT_SHARDS - 1}))
     SELECT EXISTS (SELECT 1 FROM p) AS published, (SELECT pending_owner FROM ${w.sql.s}.sessions WHERE id = $1) AS owner`,
    [id, owner, metadata === undefined ? null : JSON.stringify(metadata.labels), metadata?.pairingGuard ?? null, metadata?.bytesDelta ?? 0],
  );
  const r = rows[0]!;
  if (!r.published) {
    throw new StoreUsageError(
      r.owner === null
        ? `cannot publish session ${id}: no such pending session`
        : `cannot publish session ${id}: the pending session is owned by another importer (${r.owner})`,
    );
  }
  w.counters.commits++;
  w.notifier.notifyFeed(id);
}

export async function appendPending(w: WriteContext, sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): Promise<PendingChunkOutcome> {
  checkAscendingSeqs(sessionId, events, 0);
  const { arrays, dataBytes } = encodeEvents(events);
  const rows = await run<{ outcome: string; owner: string | null; q_limit: number | null; q_actual: number | null }>(
    w, `SELECT * FROM ${w.sql.s}.append_pending($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [sessionId, opts.owner, opts.leaseUntil, ...arrays, dataBytes, Math.floor(opts.quota?.maxBytes ?? 0)],
    'appended', sessionId, events, opts.blobs, Math.floor(opts.quota?.maxBytes ?? 0),
  );
  const r = rows[0]!;
  if (r.outcome === 'appended') {
    w.counters.commits++;
    return APPENDED;
  }
  if (r.outcome === 'not-found') {
    throw new StoreUsageError(
      r.owner === null
        ? `cannot append an import chunk to session ${sessionId}: no such pending session (its lease may have expired)`
        : `cannot append an import chunk to session ${sessionId}: the pending session is owned by another importer (${r.owner})`,
    );
  }
  return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: opts.quota?.maxBytes ?? r.q_limit!, actual: r.q_actual! };
}

export async function updateLabels(w: WriteContext, id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome> {
  // The labels at the expected version give the byte change; the function's compare-and-set on
  // the version makes sure they are still the stored ones.
  const current = await w.sql.query<{ labels: Record<string, string>; metadata_version: number }>(
    `SELECT labels, metadata_version FROM ${w.sql.s}.sessions WHERE id = $1 AND pending_owner IS NULL`, [id]);
  const before = current[0];
  if (before === undefined) return { kind: 'not-found' };
  if (Number(before.metadata_version) !== expectedVersion) return { kind: 'version-mismatch', actual: Number(before.metadata_version) };
  const rows = await w.sql.query<{ outcome: string; actual: number | null }>(
    `SELECT outcome, actual FROM ${w.sql.s}.update_labels($1, $2::jsonb, $3, $4)`,
    [id, JSON.stringify(labels), expectedVersion, labelsBytesDelta(before.labels, labels)],
  );
  const r = rows[0]!;
  if (r.outcome === 'updated') {
    w.counters.commits++;
    w.notifier.notifyFeed(id);
    return { kind: 'updated' };
  }
  if (r.outcome === 'version-mismatch') return { kind: 'version-mismatch', actual: Number(r.actual) };
  return { kind: 'not-found' };
}
