/**
 * Storage failures every store reports the same way, so the transport can tell a full disk from
 * any other I/O failure without knowing the engine: stores classify their engine's errors at
 * their boundary (SQLite: SQLITE_FULL / ENOSPC are `full`, SQLITE_IOERR* / EIO / read-only are
 * `unavailable`) and throw a StorageError; src/server/status-map.ts maps the kinds to
 * RESOURCE_EXHAUSTED / STORAGE_FULL and UNAVAILABLE / STORAGE_UNAVAILABLE.
 */

/** What kind of storage failure: out of space, or any other I/O failure. */
export type StorageErrorKind = 'full' | 'unavailable';

/** A storage failure; `message` is for the operator's log (never sent to clients). */
export class StorageError extends Error {
  readonly kind: StorageErrorKind;
  /** The engine's own code (SQLITE_FULL, ENOSPC, SQLITE_IOERR_WRITE, ...). */
  readonly code: string;

  constructor(kind: StorageErrorKind, code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StorageError';
    this.kind = kind;
    this.code = code;
  }
}

/**
 * Stored data failed its integrity check (a row's checksum, a session's digest, or a session
 * head below the one recorded outside the database): the store refuses to serve it rather than
 * return a silently wrong answer. The transport maps it to DATA_LOSS / DATA_CORRUPTED.
 */
export class DataCorruptedError extends Error {
  readonly sessionId: string;
  /** The first damaged seq, when one row is known bad. */
  readonly seq: number | undefined;

  /** The damaged blob's digest, when a blob failed (issue #39). */
  readonly digest: string | undefined;

  constructor(sessionId: string, seq: number | undefined, message: string, digest?: string) {
    super(message);
    this.name = 'DataCorruptedError';
    this.sessionId = sessionId;
    this.seq = seq;
    this.digest = digest;
  }
}
