/** The options and counters of the SQLite store (sqlite-store.ts). */
import type { Worker } from 'node:worker_threads';
import type { WriterConfig } from './append-thread-wire.js';
import type { NativeChecksums } from './sqlite-ext.js';
import type { MigrationOptions } from '../migration-options.js';

/** Options of `SqliteSessionStore`. */
export interface SqliteStoreOptions extends MigrationOptions {
  /** Database file path (created when missing). `:memory:` works for throwaway stores. */
  readonly path: string;
  /**
   * 'full' (default): synchronous=FULL, every acknowledged append survives power loss.
   * 'normal': synchronous=NORMAL, WAL commits are not fsynced; a power loss may drop the last
   * acknowledged transactions (never corrupts the database).
   */
  readonly durability?: 'full' | 'normal';
  /**
   * How durability 'full' syncs (ignored for 'normal'):
   * 'background' (default): the connection runs synchronous=NORMAL and the store fdatasyncs the
   * WAL file on the libuv thread pool after each commit; calls settle (and reads run) only once
   * the sync that covers their commit completed. The event loop keeps decoding, planning and
   * committing the next group while the disk syncs, and one sync covers every group committed
   * meanwhile. Same guarantee as 'inline': nothing acknowledged or read is lost on power loss.
   * 'inline': synchronous=FULL, SQLite fsyncs inside COMMIT, blocking the event loop.
   */
  readonly fullSync?: 'background' | 'inline';
  /** How long a write waits for another process's lock before failing, ms (default 5000). */
  readonly busyTimeoutMs?: number;
  /**
   * When queued appends are flushed: 'immediate' (default; setImmediate, batches everything that
   * arrived in the current event-loop turn including the rest of the I/O poll phase) or
   * 'microtask' (queueMicrotask, batches only what the current macrotask enqueued). With the
   * background sync a transaction takes at most GROUP_ROWS (300) rows' worth of calls (at least
   * one call); the rest go in the next turn's (group-commit.ts).
   */
  readonly groupCommit?: 'immediate' | 'microtask';
  /** Clock for idempotency records and pending-import leases (default Date.now). */
  readonly now?: () => number;
  /** How often a head watch polls `PRAGMA data_version` while sessions are watched, ms (default 150). */
  readonly headWatchPollMs?: number;
  /**
   * Row checksums of reads verified by SQLite with the checksum extension (sqlite-ext.ts):
   * 'auto' (default) when it is built, 'require' (fail to open without it), 'off' (in JavaScript).
   * The rule is the same either way; only the cost differs.
   */
  readonly nativeChecksums?: NativeChecksums;
  /**
   * Who writes appends: 'inline' (default) on the store's own connection, in the event loop;
   * 'thread': a worker thread on a connection of its own (append-thread.ts), so inserts, COMMIT
   * and fsync overlap the event loop's work (the server's choice). Needs a WAL database file:
   * `:memory:` and files without WAL write inline.
   */
  readonly appendWriter?: 'inline' | 'thread';
  /** Starts the writer thread (tests run a scripted one; default: append-thread-worker). */
  readonly startWriter?: (config: WriterConfig) => Worker;
}

/** Write counters, for tests and metrics. */
export interface SqliteStoreStats {
  /** Write transactions committed (group commits, creates, deletes, import chunks, publishes). */
  readonly commits: number;
  /** Group-commit transactions (one per flush of the append queue, or per GROUP_ROWS part of it with the background sync). */
  readonly groupCommits: number;
  /** `append` calls that appended events. */
  readonly appends: number;
  /** Largest number of `append` calls flushed in one transaction. */
  readonly maxGroupSize: number;
  /** Background WAL syncs (fdatasync calls) completed. */
  readonly syncs: number;
  /** Messages that handed appends to the writer thread (0 without it): appends per hand-over is appends / handOvers. */
  readonly handOvers: number;
  /** WAL checkpoints run by the writer thread's checkpoint thread (0 without it; wal-checkpointer.ts). */
  readonly checkpoints: number;
}
