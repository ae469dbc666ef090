/**
 * The messages between the SQLite store and its writer thread (append-thread.ts and
 * append-thread-worker.ts). Everything here crosses a structured clone: plain data only.
 */
import type { AppendOutcome } from '../../app/store-port.js';
import type { CommitGate, QueuedAppend, WriteCounters } from './group-commit.js';
import { packRows, unpackRows, type PackedRows } from './packed-rows.js';

/** What the writer thread needs to open its connection. */
export interface WriterConfig {
  /** The database file (symlinks resolved: its WAL is next to it). */
  readonly path: string;
  readonly durability: 'full' | 'normal';
  /** As the store's option (durability 'full' only). */
  readonly fullSync: 'background' | 'inline';
  readonly busyTimeoutMs: number;
  readonly groupCommit: 'immediate' | 'microtask' | undefined;
  /** The {@link SharedCommitGate}'s memory (background sync only). */
  readonly gate: SharedArrayBuffer | undefined;
  /**
   * The store's connection loaded the checksum extension: the thread loads it too and its INSERTs
   * compute the rows' checksums (sql-checksums.ts); if it cannot, it computes them in JavaScript.
   */
  readonly sqlChecksums?: boolean;
}

/**
 * The CommitGate in memory shared by the store and its writer thread: groups begun (before their
 * COMMIT), groups durable, and the highest feed position known durable, as 64-bit counters. Only
 * the writer thread moves them (so a plain load-and-store max is enough); the store reads them
 * after each read (see AppendThread.visible and durableFeedPosition).
 */
export class SharedCommitGate implements CommitGate {
  readonly #cells: BigInt64Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(24)) {
    this.#cells = new BigInt64Array(buffer);
  }

  begin(): number {
    return Number(Atomics.add(this.#cells, 0, 1n) + 1n);
  }

  durable(group: number, feedPosition = 0): void {
    // The feed position first: each cell alone only ever states what is durable.
    const f = BigInt(feedPosition);
    if (Atomics.load(this.#cells, 2) < f) Atomics.store(this.#cells, 2, f);
    const g = BigInt(group);
    if (Atomics.load(this.#cells, 1) < g) Atomics.store(this.#cells, 1, g);
  }

  /** The last group begun when some begun group is not durable yet, else 0. */
  owed(): number {
    const begun = Atomics.load(this.#cells, 0);
    return begun > Atomics.load(this.#cells, 1) ? Number(begun) : 0;
  }

  /** Every group up to this one is durable (or failed). */
  durableUpTo(): number {
    return Number(Atomics.load(this.#cells, 1));
  }

  /** Every feed record at or below this position is durable (the feed's end at the last durable group's COMMIT). */
  durableFeedPosition(): number {
    return Number(Atomics.load(this.#cells, 2));
  }
}

/** A queued append without its promise callbacks, numbered for the answer. */
export type WireCall = Omit<QueuedAppend, 'resolve' | 'reject'> & { readonly id: number };

/**
 * A WireCall as it crosses to the thread: a tuple, not an object. A structured clone writes every
 * object's keys again, and this hand-over was the largest cost of the event loop on a durable
 * AppendStream (26% of its busy time, bench/history/issue-37-grpc-js.md, addendum): an array of
 * the same fields clones in about 0.7 us against 1.8 us for the object (30 one-event calls).
 */
export type PackedCall = readonly [
  id: number, sessionId: string, expectedNextSeq: number, expectedWriter: string, writer: string,
  rows: PackedRows | QueuedAppend['rows'], dataBytes: number, surfaceLength: number,
  idempotencyKey: string | undefined, requestHash: string | undefined, maxBytes: number, at: number,
  blobs: QueuedAppend['blobs'],
];

/** The tuple of a queued append (its callbacks stay with the store). */
export function packCall(id: number, c: Omit<QueuedAppend, 'resolve' | 'reject'>): PackedCall {
  // By column (packed-rows.ts) from two rows on: a one-row call clones as fast as a row.
  const rows = c.rows.length > 1 ? (packRows(c.sessionId, c.rows) ?? c.rows) : c.rows;
  return [id, c.sessionId, c.expectedNextSeq, c.expectedWriter, c.writer, rows, c.dataBytes, c.surfaceLength, c.idempotency?.key, c.idempotency?.requestHash, c.maxBytes, c.at, c.blobs];
}

/** A call's answer callbacks as methods: `this` is the call (the writer thread shares one pair for all calls). */
export interface CallAnswers {
  resolve(this: WireCall, outcome: AppendOutcome): void;
  reject(this: WireCall, error: unknown): void;
}

/**
 * The queued append of a tuple (numbered), answered through `answers` (shared functions called
 * as the call's methods): one object per call and no closures of its own, where the call, its
 * copy and two closures per call were four (the writer thread's garbage per one-event append).
 */
export function unpackQueued(p: PackedCall, answers: CallAnswers): QueuedAppend & { readonly id: number } {
  const [id, sessionId, expectedNextSeq, expectedWriter, writer, packed, dataBytes, surfaceLength, key, requestHash, maxBytes, at, blobs] = p;
  const rows = typeof packed[0] === 'number' ? unpackRows(sessionId, packed as PackedRows) : (packed as QueuedAppend['rows']);
  return {
    id, sessionId, expectedNextSeq, expectedWriter, writer, rows, dataBytes, surfaceLength,
    idempotency: key === undefined ? undefined : { key, requestHash: requestHash! },
    maxBytes, at, blobs,
    resolve: answers.resolve, reject: answers.reject,
  };
}

/** An error as it crosses the thread boundary (SQLite's code is what the store classifies). */
export interface WireError {
  readonly name: string;
  readonly message: string;
  readonly code: string | undefined;
}

/** The store to the writer. */
export type ToWriter =
  | { readonly kind: 'append'; readonly calls: readonly PackedCall[] }
  | { readonly kind: 'close' };

/**
 * One call's answer: its id alone when it was appended (the common case: a number clones as
 * itself, where a tuple with an outcome object cost the writer's `postMessage` and the store's
 * receipt a few objects per call), else its id, then its outcome or its error.
 */
export type WireResult = number | readonly [id: number, outcome: AppendOutcome | null, error: WireError | null];

/** The writer to the store. */
export type FromWriter =
  | {
      readonly kind: 'done';
      readonly results: readonly WireResult[];
      /** Heads the committed groups moved (id, created_at, next seq), for the head record. */
      readonly heads: readonly (readonly [string, number, number])[];
      /** The writer's counters so far. */
      readonly counters: WriteCounters;
      /** The writer's background WAL syncs so far. */
      readonly syncs: number;
      /** WAL checkpoints its checkpoint thread ran so far (wal-checkpointer.ts). */
      readonly checkpoints: number;
    }
  /** The thread's connection is open and its statements prepared. */
  | { readonly kind: 'opened' }
  | { readonly kind: 'open-failed'; readonly error: WireError }
  /** A WAL sync failed: the thread writes nothing more (fail-stop, see wal-sync.ts). */
  | { readonly kind: 'fatal'; readonly error: WireError }
  | { readonly kind: 'closed' };

export function toWireError(e: unknown): WireError {
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    return { name: e.name, message: e.message, code: typeof code === 'string' ? code : undefined };
  }
  return { name: 'Error', message: String(e), code: undefined };
}

/** The error again, with its name and code (the store's boundary classifies it by code). */
export function fromWireError(w: WireError): Error {
  const e = new Error(w.message) as Error & { code?: string };
  e.name = w.name;
  if (w.code !== undefined) e.code = w.code;
  return e;
}
