/**
 * Drives a store's search-index follower (issue #40): the index is kept off the append path, in
 * batches of many events per transaction (SearchIndex.followBatch), by a background loop and by
 * searches themselves (read-your-writes).
 *
 * - Background: a batch of up to `batchEvents` events; after a batch that left work, the loop
 *   pauses `yieldRatio` times the batch's duration before the next one, so appends keep a share of
 *   the process while the index catches up (half with the default 1); once caught up it polls
 *   every `idleMs` (a read: no transaction when there is nothing to follow). While the lag (read
 *   from the store every 10 batches) is over `maxLagEvents` it does not pause.
 * - `catchUp(timeoutMs)`: runs batches until one that started after the call finds the feed fully
 *   followed, so everything acknowledged before the call is indexed; gives up at the deadline
 *   (the search then answers from the index as it is, see docs/search.md).
 * - Another replica may hold a PostgreSQL index (`busy`): `catchUp` retries every `busyMs` (a
 *   search waits for that replica's batch); the background loop waits `standbyMs`, since the
 *   holder is doing the work and a standby only has to take over when it stops (a retry every
 *   20 ms cost each standby replica about as much CPU as indexing, bench/history/issue-37-pg-batch.md).
 */
import type { SearchFollowBatch, SearchIndex, SearchLag } from './search-port.js';

export interface SearchFollowerOptions {
  /** Events per batch (one transaction). Default 2,000. */
  readonly batchEvents?: number;
  /** Pause after a batch that left work, as a multiple of its duration. Default 1. */
  readonly yieldRatio?: number;
  /** Poll interval when caught up, ms. Default 100. */
  readonly idleMs?: number;
  /** Above this lag (events) the loop does not pause. Default 50,000. */
  readonly maxLagEvents?: number;
  /** `catchUp`'s retry interval while another indexer holds the index, ms. Default 20. */
  readonly busyMs?: number;
  /** The background loop's retry interval while another indexer holds the index, ms. Default 1,000. */
  readonly standbyMs?: number;
}

/** The follower of one index. */
export class SearchFollower {
  readonly #index: SearchIndex & Required<Pick<SearchIndex, 'followBatch'>>;
  readonly #o: Required<SearchFollowerOptions>;
  readonly #onError: (e: unknown) => void;
  #running = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  /** The lag at the last reading. */
  #lagEvents = 0;

  constructor(index: SearchIndex & Required<Pick<SearchIndex, 'followBatch'>>, options: SearchFollowerOptions = {}, onError: (e: unknown) => void = () => undefined) {
    this.#index = index;
    this.#o = { batchEvents: 2000, yieldRatio: 1, idleMs: 100, maxLagEvents: 50_000, busyMs: 20, standbyMs: 1000, ...options };
    this.#onError = onError;
  }

  /** Starts the background loop. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  async #run(): Promise<void> {
    let batches = 0;
    while (this.#running) {
      let pause = 0;
      let idle = false;
      try {
        const t0 = performance.now();
        const r = await this.#index.followBatch(this.#o.batchEvents);
        if (r.busy) pause = this.#o.standbyMs;
        else if (r.caughtUp) {
          this.#lagEvents = 0;
          idle = true;
        } else {
          // The lag is read from the store every 10 batches while behind.
          if (++batches % 10 === 0 && this.#index.lag) this.#lagEvents = (await this.#index.lag()).events;
          pause = this.#lagEvents > this.#o.maxLagEvents ? 0 : (performance.now() - t0) * this.#o.yieldRatio;
        }
      } catch (e) {
        this.#onError(e);
        pause = 1000;
      }
      if (!this.#running) break;
      if (idle) pause = this.#o.idleMs;
      if (pause > 0) {
        // stop() ends the wait.
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, pause);
          this.#wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.#wake = undefined;
      } else await new Promise((r) => setImmediate(r));
    }
  }

  /**
   * Indexes everything acknowledged before the call, for at most `timeoutMs`; true when done. A
   * batch that fails (a busy file, a lost connection) is reported to `onError` and ends the wait
   * as the deadline does: the search answers from the index as it is, which stays readable.
   */
  async catchUp(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      let r: SearchFollowBatch;
      try {
        r = await this.#index.followBatch(this.#o.batchEvents);
      } catch (e) {
        this.#onError(e);
        return false;
      }
      if (r.caughtUp) return true;
      if (performance.now() >= deadline) return false;
      if (r.busy) await new Promise((resolve) => setTimeout(resolve, this.#o.busyMs));
    }
  }

  /** The lag read from the store (zero for an index without one). */
  async lag(): Promise<SearchLag> {
    const l = this.#index.lag ? await this.#index.lag() : { events: 0, seconds: 0 };
    this.#lagEvents = l.events;
    return l;
  }

  /** Stops the loop after its current batch. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#wake?.();
    await this.#loop;
  }
}
