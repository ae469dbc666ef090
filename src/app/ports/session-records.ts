/** Store port, session records role: sessions as records (create, read, list, delete, labels). */
import type { SessionEvent, SessionHeader } from '../../domain/event.js';
import type { CreateQuota, QuotaExceeded } from './tenant-usage.js';
import type { BlobWrites } from '../blob-port.js';

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

/** A page of session records. */
export interface SessionPage {
  readonly sessions: readonly SessionRecord[];
  /** Opaque token for the next page, or '' when this is the last page. */
  readonly nextPageToken: string;
}

/** What a conditional delete requires of the stored session (see SessionStore.deleteSession). */
export interface DeleteExpectation {
  readonly nextSeq: number;
  readonly createdAt: number;
}

/** Outcome of createSession. */
export type CreateOutcome = { readonly kind: 'created' } | { readonly kind: 'exists' } | QuotaExceeded;

/** Outcome of updateLabels. */
export type UpdateLabelsOutcome =
  | { readonly kind: 'updated' }
  | { readonly kind: 'not-found' }
  /** The metadata version is not the expected one: nothing changed. */
  | { readonly kind: 'version-mismatch'; readonly actual: number };

/** The session records role of the store port. */
export interface SessionRecords {
  /**
   * Creates a session with an initial (already validated) log, atomically with the tenant's
   * counters; the quota (when given) is checked in the same transaction.
   */
  createSession(record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota, blobs?: BlobWrites): Promise<CreateOutcome>;
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
   * UpdateSession's write (issue #35): replaces the labels of a visible session while its
   * metadata version is still `expectedVersion`, in one transaction that also moves the version
   * up by one, the session's and its tenant's byte counters by the labels' size change
   * ({@link storedSessionBytes}), and records `labels_changed` in the feed.
   */
  updateLabels(id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome>;
}
