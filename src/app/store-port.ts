/**
 * The store port (v2): everything the app layer needs from durable storage. SQLite (embedded
 * default) and memory implement it; a shared PostgreSQL store with several server replicas
 * implements the same port, so nothing here assumes a single writer or a single process:
 *
 *  - `append` is a compare-and-set on what is stored: the head the engine validated against
 *    (`expectedNextSeq`) AND the `writer` token the plan's base state had. Every committed write
 *    leaves a fresh token on the session row, so a batch planned on top of a batch that never
 *    committed (a pipelined batch behind a failed one) cannot commit even when another writer
 *    happened to leave the head where it expects it. No memory of the caller, no reliance on call
 *    order: two store instances over one database behave exactly as one.
 *  - Quotas are checked against per-tenant counters inside the transaction of the write they
 *    guard (create, append, import chunk), so concurrency cannot exceed them.
 *  - A pending (importing) session is owned by the process that created it, for a lease it renews
 *    with every chunk; opening a store removes only pending sessions whose lease has passed.
 *  - Idempotency keys are stored in the same transaction as the events they acknowledge, with the
 *    surface length the original response carried, so a replay on any process answers exactly the
 *    original response.
 *  - `openHeadWatch` tells a process that the head of a session may have moved because of a
 *    commit made by any process (a hint: readers then read the store by seq).
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
  /**
   * Bytes this session counts toward its tenant's byte quota: the JSON text of the header and of
   * the labels plus the data text of every event ({@link storedSessionBytes} + event data).
   */
  readonly dataBytes: number;
  /** Strict mode (optional invariants, dsh-semantics 2.6) on for this session. */
  readonly strict: boolean;
  /** The pairing guard (issue #14) on for this session; stored as given at create (default false). */
  readonly pairingGuard: boolean;
  /** Version of the metadata (labels): 0 at create, one more per `updateLabels` (issue #35). */
  readonly metadataVersion: number;
  /**
   * The token left by the last committed write (create, append, import chunk, publish), read
   * atomically with `nextSeq`: the base a conditional append names in `expectedWriter`.
   */
  readonly writer: string;
}

/** The structural columns of one event (defined by the domain, which rebuilds surfaces from them). */
export type { StructuralRow };

/** What `readSurfaceStructure` returns: a prefix's surface rows and the prefix's last seq. */
export interface SurfaceStructure {
  readonly rows: StructuralRow[];
  readonly headSeq: number | undefined;
}

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

/**
 * What one event adds to a ListEvents page's size estimate, by which pages are cut below the
 * max message size: its data and type bytes (UTF-8), 11 per cited seq, 64 for the rest of its
 * envelope. The server's rows path (handlers.ts) and readEncodedEventPage (in SQLite:
 * native/sqlite-checksums.c palimpsest_event_page writes the same sum) cut at the same event.
 */
export function pageEventBytes(dataBytes: number, typeBytes: number, citedSeqs: number): number {
  return dataBytes + typeBytes + 11 * citedSeqs + 64;
}

/**
 * A page of events encoded as the `events` field of `palimpsest.v1.ListEventsResponse`: each
 * event is the field's tag, its length and a `palimpsest.v1.SessionEvent` with its data in the
 * json form, byte for byte what the generated encoder writes (proto/ is the published schema).
 */
export interface EncodedEventPage {
  readonly bytes: Uint8Array;
  /** Events in `bytes`. */
  readonly count: number;
  /** The first seq after the page (left out by the page size or the byte budget); undefined when the read reached the end. */
  readonly nextSeq: number | undefined;
  /** Seq of the page's first event in read order (undefined for an empty page): what the app's run check needs (run-check.ts). */
  readonly firstSeq: number | undefined;
  /** Seq of the page's last event in read order (undefined for an empty page). */
  readonly lastSeq: number | undefined;
}

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

/** A quota a write would exceed (nothing was written). `actual` is the count or size the write would reach. */
export interface QuotaExceeded {
  readonly kind: 'quota-exceeded';
  readonly limitName: 'tenant_max_sessions' | 'tenant_max_bytes';
  readonly limit: number;
  readonly actual: number;
}

/**
 * A tenant byte quota of a write (0 = unlimited). `tenant` is the session's tenant; the store checks
 * the counter of the tenant the session is stored under (the same one), inside the transaction.
 */
export interface ByteQuota {
  readonly tenant: string;
  readonly maxBytes: number;
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

/** Outcome of createSession. */
export type CreateOutcome = { readonly kind: 'created' } | { readonly kind: 'exists' } | QuotaExceeded;

/** Tenant quotas checked by createSession (0 = unlimited). Pending sessions count toward `maxSessions`. */
export interface CreateQuota {
  readonly maxSessions: number;
  readonly maxBytes: number;
}

/** Options of an import chunk (appendPending). */
export interface PendingChunkOptions {
  /** The importing process; must be the pending session's owner. */
  readonly owner: string;
  /** The renewed lease (ms since epoch). */
  readonly leaseUntil: number;
  /** Tenant byte quota, checked against the tenant's stored counter inside the transaction. */
  readonly quota?: ByteQuota;
}

/** Outcome of an import chunk (a lost or foreign pending session is a thrown StoreUsageError, see appendPending). */
export type PendingChunkOutcome = { readonly kind: 'appended' } | (QuotaExceeded & { readonly limitName: 'tenant_max_bytes' });

/** Where a store reports what it found at open (the server's logger). */
export interface StoreStartLog {
  error(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
}

/** A tenant's stored counters. */
export interface TenantUsage {
  /** Sessions, pending ones included. */
  readonly sessions: number;
  /** Bytes counted toward the byte quota (see SessionRecord.dataBytes). */
  readonly dataBytes: number;
}

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

/** Store-level head notifications: a hint only. */
export interface HeadWatch {
  /**
   * Calls `onHead(nextSeq)` (or `onHead('deleted')`) when the stored head of `sessionId` may have
   * moved because of a commit by another process or store instance over the same database
   * (duplicates and spurious calls allowed; subscribers read the events from the store by seq and
   * drop anything at or below their cursor). Commits made through this very store instance may or
   * may not be reported: the app publishes those itself. Returns the function that stops watching.
   */
  watch(sessionId: string, onHead: (head: number | 'deleted') => void): () => void;
  /** Stops every watch. */
  close(): Promise<void>;
}

/** What a conditional delete requires of the stored session (see SessionStore.deleteSession). */
export interface DeleteExpectation {
  readonly nextSeq: number;
  readonly createdAt: number;
}

/** What changed in a session feed record (see {@link FeedRecord}). */
export type FeedChangeKind = 'created' | 'deleted' | 'labels_changed' | 'appended';

/**
 * One change of one session, as the store recorded it in the transaction of the change itself
 * (issue #35, the session feed). Records of a tenant are read by `position`, which increases in
 * commit order within the tenant and is never reused: a reader resuming after a position gets every
 * later change exactly once, whichever process or replica committed it.
 */
export interface FeedRecord {
  /** The record's position in its tenant's feed (> 0). */
  readonly position: number;
  readonly tenant: string;
  /** The session's storage key (tenant-prefixed when authentication is on, see tenant-scope.ts). */
  readonly sessionId: string;
  readonly kind: FeedChangeKind;
  /** The session's creation time (its incarnation: a re-created id has another one). */
  readonly createdAt: number;
  /** The session's next seq after the change (the head seq is nextSeq - 1; 0 = empty log). */
  readonly nextSeq: number;
  /** Events stored after the change. */
  readonly eventCount: number;
  /** Surface length after the last append (0 until the first append through the service). */
  readonly surfaceLength: number;
  /** 'appended': the distinct types of the appended events, in first-appearance order; else empty. */
  readonly eventTypes: readonly string[];
  /** The session's labels after the change (before it for 'deleted'). */
  readonly labels: Readonly<Record<string, string>>;
  /** 'labels_changed': the labels before the change; else undefined. */
  readonly previousLabels: Readonly<Record<string, string>> | undefined;
  /** When the store recorded the change (ms since epoch, the database's clock). */
  readonly time: number;
}

/** A page of a tenant's feed. */
export interface FeedQuery {
  readonly tenant: string;
  /** Records with a position above this one (0 = from the beginning). */
  readonly after: number;
  /** At most this many records (ascending positions). */
  readonly limit: number;
}

/** The store port. */
export interface SessionStore {
  /**
   * Creates a session with an initial (already validated) log, atomically with the tenant's
   * counters; the quota (when given) is checked in the same transaction.
   */
  createSession(record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota): Promise<CreateOutcome>;
  /** The session (nextSeq and writer read atomically), or undefined. Pending sessions are invisible. */
  getSession(id: string): Promise<SessionRecord | undefined>;
  /** Sessions newest first (createdAt desc, id desc), optionally filtered by labels (all must match) and tenant. */
  listSessions(query: { tenant?: string; labels?: Readonly<Record<string, string>>; pageSize: number; pageToken?: string }): Promise<SessionPage>;
  /**
   * Deletes a session (pending or not) and its events, updating the tenant's counters; false if it
   * did not exist. With `expected`, a conditional delete: only a published session whose head
   * (`nextSeq`) and `createdAt` are still these is deleted, checked in the delete's own
   * transaction (an append or a re-create that commits first keeps the session: false, nothing
   * changed; one that comes after finds the session gone).
   */
  deleteSession(id: string, expected?: DeleteExpectation): Promise<boolean>;
  /**
   * Deletes the session only while it is still pending and owned by `owner` (a failed import
   * cleaning up after itself), with its events and the tenant's counters in the same transaction;
   * false (and nothing changed) if it is gone, published, or another importer's.
   */
  deletePending(id: string, owner: string): Promise<boolean>;
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
  /**
   * Optional (the SQLite store with its checksum extension): a page of events already in the wire
   * form the schema publishes (see EncodedEventPage), rows checked as readEventTexts checks them.
   * A deliberate shortcut for the server's ListEvents in the json data form: a store that has it
   * knows the published message layout, and proto/ changes to SessionEvent must change it too
   * (test/integration/sqlite-event-page.test.ts compares it with the generated encoder).
   * `query.limit` is the page size; the page also ends before an event that would take the sum
   * of pageEventBytes past `budgetBytes`, keeping at least one. Undefined when this page cannot
   * be encoded here: the caller reads it with readEventTexts.
   */
  readEncodedEventPage?(sessionId: string, query: ReadEventsQuery, budgetBytes: number): Promise<EncodedEventPage | undefined>;
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
  readSurfaceStructure?(sessionId: string, toSeq: number): Promise<SurfaceStructure>;
  /** Streams all events with seq >= fromSeq in ascending batches (export, large reads). */
  scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]>;
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
  /** A tenant's stored counters (metrics, tests). */
  getTenantUsage(tenant: string): Promise<TenantUsage>;
  /** Optional (metrics): the stored session count of every tenant that has a counter row. */
  tenantSessionCounts?(): Promise<ReadonlyMap<string, number>>;
  /**
   * Optional: called once by the composition root before the store serves. A store that starts
   * work of its own at open (the SQLite writer thread) waits for it here, closing itself and
   * throwing when it cannot serve, and reports what it found at open to `log`.
   */
  start?(log: StoreStartLog): Promise<void>;
  /**
   * The tenant's feed records after `query.after`, ascending by position (issue #35). Every
   * create (and import publish), delete, labels change and append is recorded in the transaction
   * of the change, so what a read returns is committed and no record below a returned position
   * can appear later.
   */
  readFeed(query: FeedQuery): Promise<FeedRecord[]>;
  /** The position of the tenant's last feed record (0 when it has none): where `from_now` starts. */
  feedEnd(tenant: string): Promise<number>;
  /**
   * UpdateSession's write (issue #35): replaces the labels of a visible session while its
   * metadata version is still `expectedVersion`, in one transaction that also moves the version
   * up by one, the session's and its tenant's byte counters by the labels' size change
   * ({@link storedSessionBytes}), and records `labels_changed` in the feed.
   */
  updateLabels(id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome>;
  /** A head watch over this store's database (see {@link HeadWatch}); close it before the store. */
  openHeadWatch(): HeadWatch;
  /** Closes the store (flushes pending group commits first). */
  close(): Promise<void>;
}

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

/** Outcome of updateLabels. */
export type UpdateLabelsOutcome =
  | { readonly kind: 'updated' }
  | { readonly kind: 'not-found' }
  /** The metadata version is not the expected one: nothing changed. */
  | { readonly kind: 'version-mismatch'; readonly actual: number };

/** What createSession stores. */
export interface NewSession {
  readonly header: SessionHeader;
  readonly labels: Readonly<Record<string, string>>;
  readonly tenant: string;
  readonly strict: boolean;
  /**
   * The pairing guard of issue #14 (the app decides: on for CreateSession unless turned off, off
   * for ImportSession unless asked, a fork inherits its source's; stores default to false).
   */
  readonly pairingGuard: boolean;
  /** The writer token the create leaves (see SessionRecord.writer). */
  readonly writer: string;
  /**
   * A pending session (streamed import in progress) is invisible to get/list/append until
   * `publishSession`; a store open removes pending sessions whose lease has passed.
   */
  readonly pending?: { readonly owner: string; readonly leaseUntil: number };
}

/**
 * Bytes a session's header and labels count toward the tenant's byte quota (their JSON text,
 * UTF-8); event data adds the byte length of each event's data text. One definition for every store.
 */
export function storedSessionBytes(header: SessionHeader, labels: Readonly<Record<string, string>>): number {
  return utf8Length(JSON.stringify(header)) + utf8Length(JSON.stringify(labels));
}

/** How many bytes a labels change adds to a session's byte count (negative when they shrink). */
export function labelsBytesDelta(before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>): number {
  return utf8Length(JSON.stringify(after)) - utf8Length(JSON.stringify(before));
}

/** UTF-8 byte length of a string without allocating (stores count data text bytes with it). */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2;
      i++;
    } else n += 2;
  }
  return n;
}
