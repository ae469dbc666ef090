/**
 * The session-level write transactions of the SQLite store (the appends go through the group
 * commit): create and delete with the tenant counters, and import chunks. Each runs
 * synchronously with no `await` inside; quotas are checked against the tenant counters in the
 * same transaction.
 */
import type Database from 'better-sqlite3';
import type { CreateOutcome, CreateQuota, DeleteExpectation, NewSession, PendingChunkOptions, PendingChunkOutcome, PublishMetadata, UpdateLabelsOutcome } from '../../app/store-port.js';
import { labelsBytesDelta, storedSessionBytes } from '../../domain/session-bytes.js';
import type { SessionEvent } from '../../domain/event.js';
import { StoreUsageError, checkAscendingSeqs } from '../store-errors.js';
import { digestStep } from './integrity.js';
import { encodeEvents, type EventRow } from './row-codec.js';
import type { Statements } from './statements.js';
import type { BlobWrites } from '../../app/blob-port.js';
import { SqliteBlobs } from './sqlite-blobs.js';

const APPENDED = Object.freeze({ kind: 'appended' } as const);
const CREATED: CreateOutcome = Object.freeze({ kind: 'created' });
const EXISTS: CreateOutcome = Object.freeze({ kind: 'exists' });

/** The transactions (call `.immediate(...)`: they write). */
export function sessionWrites(db: Database.Database, st: Statements) {
  const blobs = new SqliteBlobs(db);
  const createTxn = db.transaction((record: NewSession, rows: EventRow[], nextSeq: number, dataBytes: number, quota: CreateQuota | undefined, blobWrites?: BlobWrites): CreateOutcome => {
    const h = record.header;
    if (st.selectForDelete.get(h.id) !== undefined) return EXISTS;
    const bytes = storedSessionBytes(h, record.labels) + dataBytes;
    // Blobs count toward the tenant, once, not toward the session (issue #39).
    const blobBytes = blobs.newBytes(record.tenant, blobWrites);
    if (quota !== undefined && (quota.maxSessions > 0 || quota.maxBytes > 0)) {
      const counters = st.selectTenant.get(record.tenant) as [number, number] | undefined;
      const sessions = counters?.[0] ?? 0;
      const stored = counters?.[1] ?? 0;
      if (quota.maxSessions > 0 && sessions + 1 > quota.maxSessions) {
        return { kind: 'quota-exceeded', limitName: 'tenant_max_sessions', limit: quota.maxSessions, actual: sessions };
      }
      if (quota.maxBytes > 0 && stored + bytes + blobBytes > quota.maxBytes) {
        return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: quota.maxBytes, actual: stored + bytes + blobBytes };
      }
    }
    const inserted = st.insertSession.run(
      h.id,
      h.version,
      h.createdAt,
      h.cwd ?? null,
      h.parentSession ?? null,
      h.seedLength ?? null,
      h.origin ?? null,
      h.delegationDepth ?? null,
      h.agentPreset ?? null,
      JSON.stringify(record.labels),
      record.tenant,
      record.strict ? 1 : 0,
      nextSeq,
      rows.length,
      bytes,
      record.pairingGuard ? 1 : 0,
      record.writer,
      record.pending === undefined ? 0 : 1,
      record.pending?.owner ?? null,
      record.pending?.leaseUntil ?? null,
      digestOf(0, rows),
    );
    if (inserted.changes === 0) return EXISTS;
    st.insertEvents(rows);
    if (blobWrites !== undefined) blobs.write(record.tenant, h.id, rows.map((r) => r[1]), blobWrites);
    st.addTenant.run(record.tenant, 1, bytes + blobBytes);
    return CREATED;
  });

  const deleteTxn = db.transaction((id: string, expected?: DeleteExpectation): boolean => {
    const row = st.selectForDelete.get(id) as [string, number, number, number, number] | undefined;
    if (row === undefined) return false;
    // A conditional delete: only the published session with this head and creation time.
    if (expected !== undefined && (row[4] !== 0 || row[2] !== expected.nextSeq || row[3] !== expected.createdAt)) return false;
    st.deleteSessionStmt.run(id);
    st.addTenant.run(row[0], -1, -row[1]);
    return true;
  });

  const deletePendingTxn = db.transaction((id: string, owner: string): boolean => {
    const row = st.selectOwnedPending.get(id, owner) as [string, number] | undefined;
    if (row === undefined) return false;
    st.deleteSessionStmt.run(id);
    st.addTenant.run(row[0], -1, -row[1]);
    return true;
  });



  // A (deferred, read-only) transaction so the chunks form one snapshot even if another
  // process writes meanwhile. Keyset chunks of STRUCTURE_CHUNK rows: the intermediate strings
  // die young (cheap scavenges) instead of a million of them being promoted at once; steadier
  // and faster than one .all() (measured).

  const appendPendingTxn = db.transaction((sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): PendingChunkOutcome => {
    const pending = st.selectPendingHead.get(sessionId) as [number, string | null, string, number] | undefined;
    if (pending === undefined) {
      throw new StoreUsageError(`cannot append an import chunk to session ${sessionId}: no such pending session`);
    }
    if (pending[1] !== opts.owner) {
      throw new StoreUsageError(`cannot append an import chunk to session ${sessionId}: the pending session is owned by another importer (${pending[1]})`);
    }
    const head = pending[0];
    checkAscendingSeqs(sessionId, events, head);
    const { rows, dataBytes } = encodeEvents(sessionId, events, true, undefined, opts.blobs?.tokenFigures);
    const blobBytes = blobs.newBytes(pending[2], opts.blobs);
    const maxBytes = opts.quota?.maxBytes ?? 0;
    if (maxBytes > 0 && dataBytes + blobBytes > 0) {
      const stored = (st.selectTenantBytes.get(pending[2]) as number | undefined) ?? 0;
      const total = stored + dataBytes + blobBytes;
      if (total > maxBytes) return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: maxBytes, actual: total };
    }
    st.insertEvents(rows);
    if (opts.blobs !== undefined) blobs.write(pending[2], sessionId, rows.map((r) => r[1]), opts.blobs);
    const last = rows[rows.length - 1];
    st.updatePending.run(last === undefined ? head : last[1] + 1, rows.length, dataBytes, opts.leaseUntil, digestOf(pending[3], rows), sessionId);
    if (dataBytes + blobBytes !== 0) st.addTenant.run(pending[2], 0, dataBytes + blobBytes);
    return APPENDED;
  });
  const updateLabelsTxn = db.transaction((id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): UpdateLabelsOutcome => {
    const row = st.selectForUpdate.get(id) as [number, string, string] | undefined;
    if (row === undefined) return { kind: 'not-found' };
    if (row[0] !== expectedVersion) return { kind: 'version-mismatch', actual: row[0] };
    const delta = labelsBytesDelta(JSON.parse(row[2]) as Record<string, string>, labels);
    st.updateLabels.run(JSON.stringify(labels), delta, id);
    if (delta !== 0) st.addTenant.run(row[1], 0, delta);
    return { kind: 'updated' };
  });
  /** Publishes a pending session owned by `owner` (with an import's metadata trailer, issue #35); false when it is not. */
  const publishTxn = db.transaction((id: string, owner: string, metadata: PublishMetadata | undefined): boolean => {
    if (metadata !== undefined) {
      const tenant = st.publishMetadata.get(JSON.stringify(metadata.labels), metadata.pairingGuard ? 1 : 0, metadata.bytesDelta, id, owner) as string | undefined;
      if (tenant !== undefined && metadata.bytesDelta !== 0) st.addTenant.run(tenant, 0, metadata.bytesDelta);
    }
    return st.publishStmt.run(id, owner).changes > 0;
  });
  return { createTxn, deleteTxn, deletePendingTxn, appendPendingTxn, updateLabelsTxn, publishTxn };
}

/** `digest` advanced by `rows` (integrity.ts). */
export function digestOf(digest: number, rows: readonly EventRow[]): number {
  for (let i = 0; i < rows.length; i++) digest = digestStep(digest, rows[i]![8], rows[i]![9]);
  return digest;
}

/** The store's session-level write transactions. */
export type SessionWrites = ReturnType<typeof sessionWrites>;
