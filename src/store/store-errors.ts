/**
 * Errors raised by store implementations. Store *outcomes* (conflict, duplicate, not found) are
 * values of the port, never exceptions; these errors mean the store cannot be used as asked.
 */

/** Why a database could not be opened. */
export type StoreOpenReason =
  /** The file is a Palimpsest database written by another schema version. */
  | 'SCHEMA_VERSION_MISMATCH'
  /** Migrating an older schema in place failed; it was rolled back (the database is as it was). */
  | 'MIGRATION_FAILED'
  /** The file is an SQLite database of another application, or unversioned but not empty. */
  | 'FOREIGN_DATABASE'
  /** The file exists but is not an SQLite database (or is corrupt). */
  | 'NOT_A_DATABASE'
  /** The file could not be opened or initialised (permissions, missing directory, I/O error). */
  | 'CANNOT_OPEN';

/** The database could not be opened; `message` is meant for the operator, as is. */
export class StoreOpenError extends Error {
  readonly reason: StoreOpenReason;
  readonly path: string;

  constructor(reason: StoreOpenReason, path: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreOpenError';
    this.reason = reason;
    this.path = path;
  }
}

/** The store was used after `close()`. */
export class StoreClosedError extends Error {
  constructor() {
    super('the session store is closed');
    this.name = 'StoreClosedError';
  }
}

/**
 * The caller broke a precondition of the port (a programming error in the app layer, never a
 * client error): e.g. events whose seqs do not ascend from the head, or `appendPending` on a
 * session that is not pending.
 */
export class StoreUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreUsageError';
  }
}

/**
 * Checks that `events` carry strictly ascending seqs, the first at least `minSeq`: the store's
 * last line of defence for (session, seq) uniqueness, O(events).
 */
export function checkAscendingSeqs(sessionId: string, events: readonly { readonly seq: number }[], minSeq: number): void {
  let previous = minSeq - 1;
  for (let i = 0; i < events.length; i++) {
    const seq = events[i]!.seq;
    if (!Number.isSafeInteger(seq) || seq <= previous) {
      throw new StoreUsageError(
        `session ${sessionId}: event ${i} has seq ${seq}, expected a safe integer above ${previous} (seqs must ascend from the head ${minSeq})`,
      );
    }
    previous = seq;
  }
}

/**
 * The database cannot be reached (a network store: connection refused or lost, server shutting
 * down, pool exhausted for too long). `message` says why, for the operator and the client. A write
 * that fails this way may or may not have committed: the caller retries with the same idempotency
 * key, or re-reads.
 */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

/**
 * Wraps the named methods of a store class so that every error they throw or reject with goes
 * through `classify` first (a store's boundary: its engine's disk-full and I/O errors become
 * StorageError there; see src/app/storage-error.ts). Async iterables (scans) are wrapped too.
 */
export function classifyStoreErrors(proto: object, methods: readonly string[], classify: (e: unknown) => unknown): void {
  const target = proto as Record<string, unknown>;
  for (const name of methods) {
    const original = target[name];
    if (typeof original !== 'function') throw new Error(`classifyStoreErrors: no method ${name}`);
    const fn = original as (...a: unknown[]) => unknown;
    target[name] = function (this: unknown, ...args: unknown[]): unknown {
      let r: unknown;
      try {
        r = fn.apply(this, args);
      } catch (e) {
        throw classify(e);
      }
      if (r instanceof Promise) return r.catch((e: unknown) => { throw classify(e); });
      if (r !== null && typeof r === 'object' && Symbol.asyncIterator in r) return classifyIterable(r as AsyncIterable<unknown>, classify);
      return r;
    };
  }
}

async function* classifyIterable<T>(it: AsyncIterable<T>, classify: (e: unknown) => unknown): AsyncGenerator<T> {
  try {
    yield* it;
  } catch (e) {
    throw classify(e);
  }
}
