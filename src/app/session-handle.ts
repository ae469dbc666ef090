/**
 * The in-memory state of one hot session: its engine (surface, counters), an optional message
 * projection, and its write pipeline.
 *
 * Writes to one session go through `SessionHandle.enqueue`: requests that arrive while a flush is
 * in flight wait and are planned together in the next flush, each against the state left by the
 * previous one, then handed to the store in one go (the store's group commit puts them in one
 * transaction). Reads are served between flushes (`read`), so they never observe a planned but
 * uncommitted event.
 */
import type { SessionRecord } from './store-port.js';
import type { SessionEngine } from '../domain/session-engine.js';
import type { MessageProjection } from '../domain/derive.js';

/** A queued write: runs its planning synchronously, then returns the store promise. */
export type WriteJob = () => Promise<void> | undefined;

/** Hot state of one session. */
export class SessionHandle {
  /** False once dropped from the cache or found inconsistent with the store: reload. */
  valid = true;
  /** Model-history projection, hydrated on first read. */
  projection: MessageProjection | undefined;
  /** Last access (LRU). */
  lastUsed = 0;
  #flushing = false;
  #writes: WriteJob[] = [];
  #reads: Array<() => void> = [];

  constructor(
    readonly id: string,
    public record: SessionRecord,
    readonly engine: SessionEngine,
  ) {}

  /** True while a flush is in flight or queued. */
  get busy(): boolean {
    return this.#flushing || this.#writes.length > 0;
  }

  /** Queues a write job; jobs run in order in the next flush. */
  enqueue(job: WriteJob): void {
    this.#writes.push(job);
    if (!this.#flushing) this.#flush();
  }

  /** Runs `fn` against committed state: now if idle, else right after the current flush. */
  read<T>(fn: () => T): Promise<T> {
    if (!this.#flushing) {
      try {
        return Promise.resolve(fn());
      } catch (e) {
        return Promise.reject(e);
      }
    }
    return new Promise<T>((resolve, reject) => {
      this.#reads.push(() => {
        try {
          resolve(fn());
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  #flush(): void {
    this.#flushing = true;
    const jobs = this.#writes;
    this.#writes = [];
    const pending: Promise<void>[] = [];
    for (const job of jobs) {
      const p = job();
      if (p) pending.push(p);
    }
    const done = (): void => {
      this.#flushing = false;
      const reads = this.#reads;
      this.#reads = [];
      for (const r of reads) r();
      if (this.#writes.length > 0) this.#flush();
    };
    if (pending.length === 0) done();
    else void Promise.allSettled(pending).then(done);
  }
}
