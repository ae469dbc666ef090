/**
 * The store-driven change feed: the in-process feed (batches this process committed, the fast
 * path) plus the store's {@link HeadWatch} for commits made anywhere else. A session is watched
 * in the store only while it has listeners here. Heads from the watch reach listeners as
 * `onHead`; they read the missing events from the store (see change-feed.ts).
 */
import type { HeadWatch } from './store-port.js';
import { LocalChangeFeed } from './local-change-feed.js';

/** {@link LocalChangeFeed} + store head notifications. */
export class StoreChangeFeed extends LocalChangeFeed {
  readonly #stops = new Map<string, () => void>();
  #closed = false;

  constructor(private readonly watch: HeadWatch) {
    super();
  }

  protected override onWatched(sessionId: string, watched: boolean): void {
    if (!watched) {
      this.#stops.get(sessionId)?.();
      this.#stops.delete(sessionId);
      return;
    }
    if (this.#closed) return;
    this.#stops.set(sessionId, this.watch.watch(sessionId, (head) => {
      if (head === 'deleted') this.deleted(sessionId);
      else this.head(sessionId, head);
    }));
  }

  override async close(): Promise<void> {
    this.#closed = true;
    for (const stop of this.#stops.values()) stop();
    this.#stops.clear();
    await this.watch.close();
  }
}
