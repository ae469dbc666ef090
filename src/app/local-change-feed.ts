/**
 * The in-process change feed: batches committed by this process handed to its listeners (see
 * change-feed.ts). Also the fan-out the store-driven feed builds on (`head`).
 */
import type { ChangeFeed, CommittedBatch, SessionListener } from './change-feed.js';

/** In-process fan-out of committed changes, per session. */
export class LocalChangeFeed implements ChangeFeed {
  readonly #listeners = new Map<string, Set<SessionListener>>();

  /** Called when a session gets its first listener / loses its last one (the store feed's watch). */
  protected onWatched(_sessionId: string, _watched: boolean): void {}

  subscribe(sessionId: string, listener: SessionListener): () => void {
    this.listen(sessionId, listener);
    return () => this.unlisten(sessionId, listener);
  }

  listen(sessionId: string, listener: SessionListener): void {
    let set = this.#listeners.get(sessionId);
    if (!set) {
      set = new Set();
      this.#listeners.set(sessionId, set);
      this.onWatched(sessionId, true);
    }
    set.add(listener);
  }

  unlisten(sessionId: string, listener: SessionListener): void {
    const s = this.#listeners.get(sessionId);
    if (!s || !s.delete(listener)) return;
    if (s.size === 0) this.#forget(sessionId, s);
  }

  onListenerError: (err: unknown) => void = () => undefined;

  onCommitted: () => void = () => undefined;

  onUnwatched: (sessionId: string) => void = () => undefined;

  publish(batch: CommittedBatch): void {
    this.onCommitted();
    const set = this.#listeners.get(batch.sessionId);
    if (!set) return;
    // The set itself, not a copy (one loop over thousands of subscribers per batch): a listener
    // removed during the loop and not yet reached is skipped, which is what it asked for.
    for (const l of set) {
      try {
        l.onCommit(batch);
      } catch (e) {
        set.delete(l);
        this.onListenerError(e);
      }
    }
    if (set.size === 0) this.#forget(batch.sessionId, set);
  }

  /** Tells a session's listeners that its stored head may have moved (commits made elsewhere). */
  head(sessionId: string, nextSeq: number): void {
    const set = this.#listeners.get(sessionId);
    if (!set) return;
    // The set itself, as in publish: a head report per commit reaches every subscriber, and a copy
    // of 10,000 listeners per commit was most of its cost.
    for (const l of set) {
      try {
        l.onHead?.(nextSeq);
      } catch (e) {
        set.delete(l);
        this.onListenerError(e);
      }
    }
    if (set.size === 0) this.#forget(sessionId, set);
  }

  deleted(sessionId: string): void {
    this.onCommitted();
    const set = this.#listeners.get(sessionId);
    if (!set) return;
    for (const l of [...set]) {
      try {
        l.onDeleted();
      } catch (e) {
        this.onListenerError(e);
      }
    }
  }

  listenerCount(sessionId?: string): number {
    if (sessionId !== undefined) return this.#listeners.get(sessionId)?.size ?? 0;
    let n = 0;
    for (const s of this.#listeners.values()) n += s.size;
    return n;
  }

  async close(): Promise<void> {}

  #forget(sessionId: string, set: Set<SessionListener>): void {
    if (this.#listeners.get(sessionId) !== set) return;
    this.#listeners.delete(sessionId);
    this.onWatched(sessionId, false);
    this.onUnwatched(sessionId);
  }
}
