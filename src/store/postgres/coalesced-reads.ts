/**
 * Coalesced reads of the PostgreSQL store: identical reads issued in one event-loop turn share one
 * query, sent at the end of the turn. A commit notified to this replica wakes every subscription
 * of the session at once, and each reads the same rows after the same cursor (100 subscribers
 * would be 100 identical queries). Only reads not yet sent are joined, so every caller still sees
 * every commit acknowledged before it called (read-your-writes holds). Each caller gets its own
 * array.
 */
export class TurnReads {
  /** Identical reads issued in the current event-loop turn, not sent yet. */
  readonly #reads = new Map<string, Promise<readonly unknown[]>>();

  /** Reads waiting for the end of the turn. */
  get size(): number {
    return this.#reads.size;
  }

  /** The reads waiting for the end of the turn (close() lets them finish). */
  pending(): IterableIterator<Promise<readonly unknown[]>> {
    return this.#reads.values();
  }

  /** `read()` at the end of this turn, shared by every call of the turn with the same `key`. */
  async read<T>(key: string, read: () => Promise<readonly T[]>): Promise<T[]> {
    let shared = this.#reads.get(key) as Promise<readonly T[]> | undefined;
    if (shared === undefined) {
      shared = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        this.#reads.delete(key);
        return read();
      });
      this.#reads.set(key, shared);
    }
    return (await shared).slice();
  }
}
