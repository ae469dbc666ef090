/**
 * The store port: everything the app layer needs from durable storage. SQLite (embedded default)
 * and memory implement it today; a shared PostgreSQL store with several server replicas is next,
 * so nothing here assumes a single writer:
 *
 *  - `append` is conditional on the head the engine validated against (`expectedNextSeq`); a moved
 *    head is reported as a conflict (never an exception) and the app resolves it by syncing the new
 *    events (`readStructure`/`readEvents` from its cached head) and re-validating.
 *  - Idempotency keys are stored in the same transaction as the events they acknowledge.
 *
 * All methods are async so that network stores fit; the SQLite store answers synchronously inside.
 */
import type { SessionEvent, SessionHeader, StructuralRow } from '../domain/event.js';

/** A stored session: header plus service metadata. */
export interface SessionRecord {
  readonly header: SessionHeader;
  /** User labels (key -> value). */
  readonly labels: Readonly<Record<string, string>>;
  /** Owning tenant ('' when auth is off). */
  readonly tenant: string;
  /** Seq the next appended event must carry (last seq + 1, or 0 for an empty log). */
  readonly nextSeq: number;
  /** Number of events stored (differs from nextSeq only for imported logs with seq gaps). */
  readonly eventCount: number;
  /** Total bytes of stored event data (quota accounting). */
  readonly dataBytes: number;
  /** Strict mode (optional invariants, dsh-semantics 2.6) on for this session. */
  readonly strict: boolean;
  /** Tool-pairing guard (issue #14) on for this session; stored like `strict`. */
  readonly pairingGuard: boolean;
}

/** The structural columns of one event (defined by the domain, which rebuilds surfaces from them). */
export type { StructuralRow };

/**
 * A stored event whose data is the stored JSON text, not parsed (`JSON.parse(dataText)` is the
 * event's data; the text is what JSON.stringify writes for it).
 */
export type StoredEventText = Omit<SessionEvent, 'data'> & { readonly dataText: string };

/** A stored idempotent result: what the first request with this key appended. */
export interface IdempotentResult {
  /** Seqs appended by the original request. */
  readonly seqs: readonly number[];
  /** SHA-256 (hex) of the original request's events, so a key reused with a different body is detected. */
  readonly requestHash: string;
  /**
   * The surface length the original request answered with (the replay returns the original
   * response); absent when the append did not pass one.
   */
  readonly surfaceLength?: number;
}

/** The idempotency record written with an append. */
export interface IdempotencyRecord {
  readonly key: string;
  readonly requestHash: string;
  /** The surface length after this append (the response's surface_length), returned on replay. */
  readonly surfaceLength?: number;
}

/** Outcome of a conditional append. */
export type AppendOutcome =
  | { readonly kind: 'appended' }
  /** The head moved: another writer appended first. `actualNextSeq` is the store's head now. */
  | { readonly kind: 'conflict'; readonly actualNextSeq: number }
  /** The idempotency key was already used: the stored result, nothing appended. */
  | { readonly kind: 'duplicate'; readonly result: IdempotentResult }
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

/** A page of session records. */
export interface SessionPage {
  readonly sessions: readonly SessionRecord[];
  /** Opaque token for the next page, or '' when this is the last page. */
  readonly nextPageToken: string;
}

/** The store port. */
export interface SessionStore {
  /** Creates a session with an initial (already validated) log; atomic. False if the id exists. */
  createSession(record: NewSession, events: readonly SessionEvent[]): Promise<boolean>;
  /** The session, or undefined. */
  getSession(id: string): Promise<SessionRecord | undefined>;
  /** Sessions newest first (createdAt desc, id desc), optionally filtered by labels (all must match) and tenant. */
  listSessions(query: { tenant?: string; labels?: Readonly<Record<string, string>>; pageSize: number; pageToken?: string }): Promise<SessionPage>;
  /** Deletes a session and its events; false if it did not exist. */
  deleteSession(id: string): Promise<boolean>;
  /**
   * Appends `events` (already validated against a head of `expectedNextSeq`) atomically,
   * together with the idempotency record when a key is given. Resolves only after commit.
   *
   * `epoch` names the caller's write pipeline: a caller may hand the store a batch planned on top
   * of an earlier batch that is not committed yet. Once any append of an epoch fails (conflict,
   * duplicate, not found, error), the store fails every later append of that epoch with a
   * conflict, even if another writer left the head exactly where the later batch expects it (its
   * events were validated against the failed batch, not against what is stored).
   */
  append(
    sessionId: string,
    expectedNextSeq: number,
    events: readonly SessionEvent[],
    idempotency?: IdempotencyRecord,
    epoch?: string,
  ): Promise<AppendOutcome>;
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
  /** Specific events by seq (missing seqs are omitted), ascending. */
  getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]>;
  /**
   * Structural rows with seq >= fromSeq, ascending, without parsing `data`; at most `limit` rows
   * when given (readers that page through a long log, such as subscription catch-up).
   */
  readStructure(sessionId: string, fromSeq: number, limit?: number): Promise<StructuralRow[]>;
  /**
   * Optional (issue #14, time travel): the structural rows of the *surface* events (surfaceOp
   * present) with seq <= toSeq, ascending, without `sourceEventSeqs`, plus the last seq <= toSeq
   * of any type. All a surface replay of a prefix needs, without decoding the rest of the log;
   * stores without it are replayed from `readStructure`.
   */
  readSurfaceStructure?(sessionId: string, toSeq: number): Promise<{ rows: StructuralRow[]; headSeq: number | undefined }>;
  /** Streams all events with seq >= fromSeq in ascending batches (export, large reads). */
  scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]>;
  /** Makes a pending session visible (end of a successful streamed import). */
  publishSession(id: string): Promise<void>;
  /** Appends to a pending session without the head check (streamed import chunks); atomic per call. */
  appendPending(sessionId: string, events: readonly SessionEvent[]): Promise<void>;
  /** Closes the store (flushes pending group commits first). */
  close(): Promise<void>;
}

/** What createSession stores. */
export interface NewSession {
  readonly header: SessionHeader;
  readonly labels: Readonly<Record<string, string>>;
  readonly tenant: string;
  readonly strict: boolean;
  /** Tool-pairing guard (issue #14): the app decides it at create/import/fork. */
  readonly pairingGuard: boolean;
  /**
   * A pending session (streamed import in progress) is invisible to get/list/append until
   * `publishSession`; a store drops pending sessions left over by a crash when it opens.
   */
  readonly pending?: boolean;
}
