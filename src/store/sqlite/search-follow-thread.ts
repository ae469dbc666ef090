/**
 * The SQLite search index's follower runs in a worker thread of its own (issue #40): a batch's
 * FTS5 and search_docs writes (~60-95 µs per event) never block the server's event loop, which
 * only posts "follow a batch" and awaits the answer. The thread (search-follow-worker.ts) has its
 * own connection to the same file; batches run one at a time, in the order asked.
 *
 * - Started with the first batch; referenced only while a batch is owed, so an idle follower
 *   never keeps the process alive.
 * - If the thread fails or dies, the batches owed fail (the follower logs and retries) and the
 *   next batch starts a new thread.
 * - close() waits for the batch in progress, closes the connection and ends the thread.
 */
import type { Worker } from 'node:worker_threads';
import type { SearchFollowBatch } from '../../app/search-port.js';
import { StoreClosedError } from '../store-errors.js';
import { startThread } from './append-thread.js';

/** What the thread is started with. */
export interface FollowerConfig {
  readonly path: string;
  readonly busyTimeoutMs: number;
}

/** To the thread: a batch of at most `maxEvents` events, or the end. */
export type ToFollower = { readonly kind: 'follow'; readonly id: number; readonly maxEvents: number } | { readonly kind: 'close' };

/** From the thread: a batch's result or its error (id 0: the connection could not be opened). */
export type FromFollower =
  | { readonly kind: 'followed'; readonly id: number; readonly result: SearchFollowBatch }
  | { readonly kind: 'failed'; readonly id: number; readonly message: string; readonly code?: string };

interface Owed {
  readonly resolve: (r: SearchFollowBatch) => void;
  readonly reject: (e: unknown) => void;
}

/** An Error carrying the SQLite code of one raised in the thread. */
function threadError(message: string, code: string | undefined): Error {
  const e = new Error(`search follower thread: ${message}`) as Error & { code?: string };
  if (code !== undefined) e.code = code;
  return e;
}

/** The follower thread of one database file. */
export class SearchFollowThread {
  #worker: Worker | undefined;
  readonly #owed = new Map<number, Owed>();
  #nextId = 1;
  #closed: Promise<void> | undefined;

  constructor(
    private readonly config: FollowerConfig,
    /** Starts the thread (tests may start another entry). */
    private readonly start: (config: FollowerConfig) => Worker = (c) => startThread('search-follow-worker', c),
  ) {}

  /** True while a thread is running. */
  get running(): boolean {
    return this.#worker !== undefined;
  }

  /** The thread's id (undefined before the first batch). */
  get threadId(): number | undefined {
    return this.#worker?.threadId;
  }

  /** One batch (followSqliteFeed) run by the thread. */
  followBatch(maxEvents: number): Promise<SearchFollowBatch> {
    if (this.#closed !== undefined) return Promise.reject(new StoreClosedError());
    const worker = this.#thread();
    const id = this.#nextId++;
    return new Promise<SearchFollowBatch>((resolve, reject) => {
      this.#owed.set(id, { resolve, reject });
      worker.ref();
      worker.postMessage({ kind: 'follow', id, maxEvents } satisfies ToFollower);
    });
  }

  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    const worker = this.start(this.config);
    this.#worker = worker;
    worker.on('message', (m: FromFollower) => {
      if (m.id === 0) {
        this.#failAll(threadError(m.kind === 'failed' ? m.message : 'unexpected answer', m.kind === 'failed' ? m.code : undefined));
        return;
      }
      const owed = this.#owed.get(m.id);
      if (owed === undefined) return;
      this.#owed.delete(m.id);
      if (m.kind === 'followed') owed.resolve(m.result);
      else owed.reject(threadError(m.message, m.code));
      if (this.#owed.size === 0 && this.#closed === undefined) worker.unref();
    });
    worker.on('error', (e) => this.#failAll(e));
    worker.on('exit', (code) => {
      if (this.#worker === worker) this.#worker = undefined;
      this.#failAll(this.#closed !== undefined ? new StoreClosedError() : threadError(`the thread ended (exit code ${code})`, undefined));
    });
    worker.unref();
    return worker;
  }

  #failAll(e: unknown): void {
    const owed = [...this.#owed.values()];
    this.#owed.clear();
    for (const o of owed) o.reject(e);
  }

  /** Ends the thread once the batches asked before are answered. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      const worker = this.#worker;
      if (worker === undefined) return;
      worker.ref();
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage({ kind: 'close' } satisfies ToFollower);
      await exited;
    })();
    return this.#closed;
  }
}
