/** Store port, pending imports role: a streamed import's invisible session, owned under a lease until published. */
import type { SessionEvent } from '../../domain/event.js';
import type { ByteQuota, QuotaExceeded } from './tenant-usage.js';
import type { BlobWrites } from '../blob-port.js';

/** Options of an import chunk (appendPending). */
export interface PendingChunkOptions {
  /** The importing process; must be the pending session's owner. */
  readonly owner: string;
  /** The renewed lease (ms since epoch). */
  readonly leaseUntil: number;
  /** Tenant byte quota, checked against the tenant's stored counter inside the transaction. */
  readonly quota?: ByteQuota;
  /** Blobs the chunk's events reference (as AppendRequest.blobs). */
  readonly blobs?: BlobWrites;
}

/** Outcome of an import chunk (a lost or foreign pending session is a thrown StoreUsageError, see appendPending). */
export type PendingChunkOutcome = { readonly kind: 'appended' } | (QuotaExceeded & { readonly limitName: 'tenant_max_bytes' });

/**
 * Metadata an import sets when it publishes (the metadata trailer of an exported file, issue #35),
 * in the publish's own transaction: the session becomes visible with them.
 */
export interface PublishMetadata {
  readonly labels: Readonly<Record<string, string>>;
  readonly pairingGuard: boolean;
  /** What the labels change adds to the session's and tenant's byte counts ({@link labelsBytesDelta} from the labels it was created with). */
  readonly bytesDelta: number;
}

/** The pending imports role of the store port. */
export interface PendingImports {
  /**
   * Deletes the session only while it is still pending and owned by `owner` (a failed import
   * cleaning up after itself), with its events and the tenant's counters in the same transaction;
   * false (and nothing changed) if it is gone, published, or another importer's.
   */
  deletePending(id: string, owner: string): Promise<boolean>;
  /**
   * Makes a pending session visible (end of a successful streamed import). Throws StoreUsageError
   * when there is no such pending session or `owner` does not own it.
   */
  publishSession(id: string, owner: string, metadata?: PublishMetadata): Promise<void>;
  /**
   * Appends an import chunk to a pending session without the head check (seqs ascend from the
   * stored head); renews the lease and enforces the byte quota; atomic per call. Throws
   * StoreUsageError when the pending session is gone (e.g. its lease expired and another process
   * removed it) or is owned by another process.
   */
  appendPending(sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): Promise<PendingChunkOutcome>;
  /**
   * Specific events of a pending session owned by `owner` (missing seqs omitted), ascending: an
   * import reading back the data of its own earlier chunks (a tool/result replace's target).
   * Throws StoreUsageError when the pending session is gone or owned by another process.
   */
  getPendingEvents(sessionId: string, owner: string, seqs: readonly number[]): Promise<SessionEvent[]>;
}
