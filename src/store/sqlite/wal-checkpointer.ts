/**
 * WAL checkpoints off the writer thread (issue #37). By default SQLite checkpoints inside the
 * COMMIT that takes the WAL past 1,000 frames: the writer thread then copies ~4 MB of pages into
 * the database file and waits for two syncs (the WAL before, the database after: synchronous
 * NORMAL and FULL alike) while no group is written. The writer thread's profile put that at ~10%
 * of its CPU on 100-event batches, and the waits come on top (bench/history/issue-37-write.md).
 *
 * Here the writer's connection checkpoints only past BOUND_FRAMES (SQLite's own autocheckpoint,
 * PASSIVE, kept as the bound: a WAL never grows without limit, whatever this thread does), and a
 * thread of its own (wal-checkpoint-worker.ts, a second connection to the file) runs a PASSIVE
 * checkpoint each time the writer has written about CHECKPOINT_BYTES of WAL since the last one
 * asked (estimated from the rows and group commits written). A
 * PASSIVE checkpoint takes no lock a writer or reader waits for; it copies the frames every reader
 * is done with, syncs the WAL first and the database after (the checkpointer's connection is
 * synchronous NORMAL), and only then marks them copied, so a checkpoint that fails or is cut short
 * loses nothing: the frames stay in the WAL. Once the WAL is wholly copied, the writer's next
 * transaction starts it again from its beginning (SQLite's WAL reset), as after its own
 * checkpoints. Nothing of durability moves: commits are made durable by the WAL's sync (WalSync or
 * synchronous FULL) exactly as before.
 *
 * The thread starts with the first checkpoint asked (a store that writes little never starts it).
 * If it fails (cannot open the file, a checkpoint error, the thread dies), the writer's connection
 * goes back to SQLite's default autocheckpoint and the thread is not used again.
 */
import type Database from 'better-sqlite3';
import type { Worker } from 'node:worker_threads';
import { startThread } from './append-thread.js';

/** SQLite's default autocheckpoint threshold, frames (the writer's connection goes back to it on failure). */
export const SQLITE_AUTOCHECKPOINT = 1000;

/**
 * The writer's own autocheckpoint while the thread checkpoints (frames, 4 KiB pages: ~16 MB): only
 * a WAL the thread did not keep up with reaches it.
 */
export const BOUND_FRAMES = 4 * SQLITE_AUTOCHECKPOINT;

/**
 * Bytes written (an estimate: events' data, ROW_BYTES per row, COMMIT_BYTES per group commit)
 * between two checkpoints asked: about the WAL SQLite's default lets grow between two of its own
 * (1,000 frames) for the ~250-byte events of the benches (measured: 1,005 frames per checkpoint,
 * bench/history/issue-37-write.md).
 */
export const CHECKPOINT_BYTES = 2 * 1024 * 1024;

/** What a row costs in the WAL beyond its data (its index entries and page overhead), an estimate. */
export const ROW_BYTES = 200;

/**
 * What a group commit costs in the WAL whatever its rows: every page it changed is a frame (the
 * events' and their index's last leaves, the session's row, the feed's, the tenant's), ~6 pages.
 * Without it, small commits (one event each) would be undercounted ~50 times and leave every
 * checkpoint to the bound.
 */
export const COMMIT_BYTES = 6 * 4096;

/** What the thread is started with. */
export interface CheckpointerConfig {
  readonly path: string;
  readonly busyTimeoutMs: number;
}

/** To the thread. */
export type ToCheckpointer = { readonly kind: 'checkpoint' } | { readonly kind: 'close' };

/** From the thread: a checkpoint's result (frames in the WAL, frames copied), or why it failed. */
export type FromCheckpointer =
  | { readonly kind: 'checkpointed'; readonly busy: number; readonly log: number; readonly checkpointed: number }
  | { readonly kind: 'failed'; readonly message: string };

/** Counters of the checkpoints (the store's stats). */
export interface CheckpointCounters {
  /** Checkpoints the thread ran. */
  checkpoints: number;
  /** Frames the WAL held at those checkpoints, summed. */
  checkpointFrames: number;
}

/** The checkpoint thread of one writer connection (lives in the writer thread). */
export class WalCheckpointer {
  #worker: Worker | undefined;
  #running = false;
  #written = 0;
  /** Set once the thread failed, or at close: SQLite's own autocheckpoint again. */
  #off = false;
  #closed: Promise<void> | undefined;

  constructor(
    private readonly db: Database.Database,
    private readonly config: CheckpointerConfig,
    private readonly counters: CheckpointCounters,
    /** Starts the thread (tests may start another entry). */
    private readonly start: (config: CheckpointerConfig) => Worker = (c) => startThread('wal-checkpoint-worker', c),
  ) {
    db.pragma(`wal_autocheckpoint = ${BOUND_FRAMES}`);
  }

  /** True once the thread failed and the writer checkpoints itself again. */
  get fellBack(): boolean {
    return this.#off && this.#closed === undefined;
  }

  /** Counts a call of `rows` rows and `dataBytes` bytes of data; asks for a checkpoint past CHECKPOINT_BYTES. */
  wrote(rows: number, dataBytes: number): void {
    this.#add(dataBytes + rows * ROW_BYTES);
  }

  /** Counts `groups` group commits (their pages beyond the rows'); asks for a checkpoint past CHECKPOINT_BYTES. */
  committed(groups: number): void {
    this.#add(groups * COMMIT_BYTES);
  }

  #add(bytes: number): void {
    if (this.#off) return;
    this.#written += bytes;
    if (this.#running || this.#written < CHECKPOINT_BYTES) return;
    this.#written = 0;
    let worker: Worker;
    try {
      worker = this.#thread();
    } catch {
      this.#fallBack();
      return;
    }
    this.#running = true;
    worker.postMessage({ kind: 'checkpoint' } satisfies ToCheckpointer);
  }

  /** Ends the thread (after the checkpoint in progress). */
  close(): Promise<void> {
    if (this.#closed !== undefined) return this.#closed;
    this.#off = true;
    const worker = this.#worker;
    this.#worker = undefined;
    if (worker === undefined) return (this.#closed = Promise.resolve());
    return (this.#closed = new Promise<void>((resolve) => {
      worker.once('exit', () => resolve());
      worker.postMessage({ kind: 'close' } satisfies ToCheckpointer);
    }));
  }

  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    const worker = this.start(this.config);
    this.#worker = worker;
    worker.on('message', (m: FromCheckpointer) => {
      this.#running = false;
      if (m.kind === 'failed') {
        this.#fallBack();
        return;
      }
      this.counters.checkpoints++;
      this.counters.checkpointFrames += m.log;
    });
    worker.on('error', () => this.#fallBack());
    worker.on('exit', () => {
      if (this.#worker === worker) this.#fallBack();
    });
    return worker;
  }

  /** The thread is not used again; the writer's connection checkpoints as SQLite does by default. */
  #fallBack(): void {
    if (this.#off) return;
    this.#off = true;
    this.#running = false;
    const worker = this.#worker;
    this.#worker = undefined;
    if (worker !== undefined) void worker.terminate();
    try {
      this.db.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT}`);
    } catch {
      // The connection is closed (the writer is closing): nothing to restore.
    }
  }
}
