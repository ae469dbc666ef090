/**
 * Feed retention (issue #35): the session feed (SubscribeSessions) keeps its records for
 * `--feed-retention-days` (default 7; 0 = forever). A background sweep, at the retention sweep's
 * interval (first soon after start), asks the store to prune the records older than that
 * (`SessionStore.pruneFeed`: one statement/transaction, off the write path, each tenant's last
 * record kept so `from_now` and positions continue). A subscriber resuming after a pruned
 * position gets OUT_OF_RANGE / FEED_POSITION_EXPIRED (relist with ListSessions and subscribe
 * `from_now`); see session-feed.ts and feed-subscription.ts.
 */
import type { SessionStore } from './store-port.js';

const DAY_MS = 86_400_000;

/** Options of {@link FeedRetention}. */
export interface FeedRetentionOptions {
  /** Days records are kept (0 = forever: the sweeper does nothing). */
  readonly days: number;
  /** Time between sweeps, ms (default one hour). */
  readonly intervalMs?: number;
  readonly now?: () => number;
  readonly log?: { info(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

/** The feed's background pruner. */
export class FeedRetention {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;
  #stopped = false;

  constructor(private readonly store: SessionStore, private readonly opts: FeedRetentionOptions) {}

  /** Starts sweeping (no-op with days = 0). */
  start(): void {
    if (this.opts.days <= 0) return;
    const interval = this.opts.intervalMs ?? 3_600_000;
    const tick = (): void => {
      if (this.#stopped) return;
      void this.sweep().catch((e: unknown) => this.opts.log?.error({ err: e }, 'feed retention: pruning failed; retrying at the next interval'))
        .finally(() => {
          if (!this.#stopped) this.#timer = setTimeout(tick, interval).unref();
        });
    };
    this.#timer = setTimeout(tick, Math.min(interval, 10_000)).unref();
  }

  /** One prune of the records older than the retention period; resolves with the number removed. */
  sweep(): Promise<number> {
    this.#running ??= this.#pruneOnce().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  /** Stops sweeping; resolves once a prune in progress ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    await this.#running?.catch(() => undefined);
  }

  async #pruneOnce(): Promise<number> {
    if (this.opts.days <= 0) return 0;
    const before = (this.opts.now ?? Date.now)() - this.opts.days * DAY_MS;
    const removed = await this.store.pruneFeed(before);
    if (removed > 0) this.opts.log?.info({ removed, feedRetentionDays: this.opts.days }, `feed retention: pruned ${removed} feed record(s) older than ${this.opts.days} day(s)`);
    return removed;
  }
}
