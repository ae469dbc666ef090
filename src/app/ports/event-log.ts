/** Store port, event log role: a session's events, appended by conditional writes and read back in several shapes. */
import type { SessionEvent, StructuralRow } from '../../domain/event.js';
import type { ByteQuota, QuotaExceeded } from './tenant-usage.js';
import type { BlobWrites } from '../blob-port.js';

/** The structural columns of one event (defined by the domain, which rebuilds surfaces from them). */
export type { StructuralRow };

/** The optional envelope keys of an event, present only when set. */
export interface OptionalEnvelope {
  sourceEventSeqs?: readonly number[];
  surfaceOp?: SessionEvent['surfaceOp'];
  ignorable?: true;
}

/**
 * `out` with the optional envelope keys of `from` that are set, in the canonical order (absent
 * keys stay absent: stores hand out events exactly as they were appended).
 */
export function withOptionalEnvelope<T extends object>(
  out: T,
  from: { readonly sourceEventSeqs?: readonly number[] | undefined; readonly surfaceOp?: SessionEvent['surfaceOp'] | undefined; readonly ignorable?: boolean | undefined },
): T & OptionalEnvelope {
  const o = out as T & OptionalEnvelope;
  if (from.sourceEventSeqs !== undefined) o.sourceEventSeqs = from.sourceEventSeqs;
  if (from.surfaceOp !== undefined) o.surfaceOp = from.surfaceOp;
  if (from.ignorable === true) o.ignorable = true;
  return o;
}

/**
 * A stored event whose data is the stored JSON text, not parsed (`JSON.parse(dataText)` is the
 * event's data; the text is what JSON.stringify writes for it).
 */
export type StoredEventText = Omit<SessionEvent, 'data'> & {
  readonly dataText: string;
  /** UTF-8 bytes of dataText, when the store read them with the text (saves the caller a pass). */
  readonly dataBytes?: number;
};

/** A stored idempotent result: what the first request with this key appended and answered. */
export interface IdempotentResult {
  /** Seqs appended by the original request. */
  readonly seqs: readonly number[];
  /** SHA-256 (hex) of the original request's events, so a key reused with a different body is detected. */
  readonly requestHash: string;
  /** The surface length the original request answered with (the replay returns the original response). */
  readonly surfaceLength: number;
}

/** The idempotency record written with an append. */
export interface IdempotencyRecord {
  readonly key: string;
  readonly requestHash: string;
}

/** A conditional append. */
export interface AppendRequest {
  /** Head the plan was validated against (next seq). */
  readonly expectedNextSeq: number;
  /**
   * The `writer` token the plan's base state had: for a pipelined batch planned on top of a batch
   * not yet committed, that batch's `writer`. Must equal the stored token.
   */
  readonly expectedWriter: string;
  /** Token this batch leaves on the session row (unique per write). */
  readonly writer: string;
  /** The events, seqs ascending from `expectedNextSeq` (already validated). */
  readonly events: readonly SessionEvent[];
  /**
   * Per event (by index), when known: its data's JSON text, exactly what JSON.stringify writes for
   * it (the client's own canonical text), so the store need not serialize it again.
   */
  readonly dataTexts?: readonly (string | undefined)[];
  /** Surface length after this batch (the response's surface_length; stored with the key). */
  readonly surfaceLength: number;
  /** Idempotency record stored in the same transaction. */
  readonly idempotency?: IdempotencyRecord;
  /** Tenant byte quota, checked against the tenant's stored counter inside the transaction. */
  readonly quota?: ByteQuota;
  /** Blobs the events reference (issue #39, blob-port.ts), stored in the same transaction (only to a store with `blobs`). */
  readonly blobs?: BlobWrites;
}

/** Outcome of a conditional append. */
export type AppendOutcome =
  | { readonly kind: 'appended' }
  /** The head or the writer token differ: another writer committed first, or the base batch never committed. */
  | { readonly kind: 'conflict'; readonly actualNextSeq: number }
  /** The idempotency key was already used: the stored result, nothing appended. */
  | { readonly kind: 'duplicate'; readonly result: IdempotentResult }
  | (QuotaExceeded & { readonly limitName: 'tenant_max_bytes' })
  | { readonly kind: 'not-found' };

/** Options for one page of events. */
export interface ReadEventsQuery {
  /** Start from this seq (inclusive), in `direction` order. */
  readonly fromSeq: number;
  /** 'forward' = ascending seq, 'backward' = descending seq. */
  readonly direction: 'forward' | 'backward';
  /** Maximum number of events returned. */
  readonly limit: number;
  /** Only these types (empty or absent = all). */
  readonly types?: readonly string[];
}

/** The event log role of the store port. */
export interface EventLog {
  /** A conditional append (see {@link AppendRequest}); resolves only after commit. */
  append(sessionId: string, req: AppendRequest): Promise<AppendOutcome>;
  /** The stored result for an idempotency key, if any. */
  getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined>;
  /** Events by seq range/direction/type filter. */
  readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]>;
  /**
   * As readEvents, with each event's data as its stored JSON text instead of parsed: for reads
   * that only pass the text on (ListEvents in the json data form), which then skip JSON.parse
   * here and JSON.stringify there.
   */
  readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]>;
  /** Optional (issue #39, BlobbingStore): as readEventTexts, with blobbed values as their references (the rows as stored). */
  readStoredEventTexts?(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]>;
  /** Specific events by seq (missing seqs are omitted), ascending. */
  getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]>;
  /** Optional (issue #39, BlobbingStore): as getEvents, with blobbed values as their references (GetMessages with blob_refs). */
  getStoredEvents?(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]>;
  /** Optional (issue #39, BlobbingStore): as readEvents, with blobbed values as their references (GetMessages with blob_refs). */
  readStoredEvents?(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]>;
  /**
   * Structural rows with seq >= fromSeq, ascending, without parsing `data`; at most `limit` rows
   * when given (readers that page through a long log, such as subscription catch-up).
   */
  readStructure(sessionId: string, fromSeq: number, limit?: number): Promise<StructuralRow[]>;
  /** Streams all events with seq >= fromSeq in ascending batches (export, large reads). */
  scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]>;
  /** Optional (issue #39, BlobbingStore): as scanEvents, with blobbed values as their references (the rows as stored; what search indexes). */
  scanStoredEvents?(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]>;
}
