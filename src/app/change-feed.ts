/**
 * The in-process feed of committed changes that subscriptions follow. The app publishes each
 * committed batch after its transaction commits, in seq order per session. A multi-replica
 * deployment needs a store-level feed (e.g. PostgreSQL LISTEN/NOTIFY) behind the same interface;
 * subscribers already tolerate that: they catch up from the store and drop anything at or below
 * the last seq they sent.
 */
import type { SessionEvent } from '../domain/event.js';
import type { SurfaceDelta } from '../domain/session-engine.js';

/** One committed batch of one session. */
export interface CommittedBatch {
  readonly sessionId: string;
  readonly events: readonly SessionEvent[];
  readonly deltas: readonly SurfaceDelta[];
}

/** Listener of one session's changes. */
export interface SessionListener {
  /** Called synchronously after commit, in seq order. */
  onCommit(batch: CommittedBatch): void;
  /** The session was deleted. */
  onDeleted(): void;
}

/** Fan-out of committed changes to listeners, per session. */
export class ChangeFeed {
  readonly #listeners = new Map<string, Set<SessionListener>>();

  /** Registers a listener; returns the function that removes it. */
  subscribe(sessionId: string, listener: SessionListener): () => void {
    let set = this.#listeners.get(sessionId);
    if (!set) {
      set = new Set();
      this.#listeners.set(sessionId, set);
    }
    set.add(listener);
    return () => {
      const s = this.#listeners.get(sessionId);
      if (!s) return;
      s.delete(listener);
      if (s.size === 0) this.#listeners.delete(sessionId);
    };
  }

  /** Reports a listener that threw (it is removed; the others still get the batch). */
  onListenerError: (err: unknown) => void = () => undefined;

  /** Publishes a committed batch. A listener that throws is removed and told via onDeleted. */
  publish(batch: CommittedBatch): void {
    const set = this.#listeners.get(batch.sessionId);
    if (!set) return;
    for (const l of [...set]) {
      try {
        l.onCommit(batch);
      } catch (e) {
        set.delete(l);
        this.onListenerError(e);
      }
    }
    if (set.size === 0) this.#listeners.delete(batch.sessionId);
  }

  /** Announces a deletion. */
  deleted(sessionId: string): void {
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

  /** Number of listeners of a session (all sessions when omitted). */
  listenerCount(sessionId?: string): number {
    if (sessionId !== undefined) return this.#listeners.get(sessionId)?.size ?? 0;
    let n = 0;
    for (const s of this.#listeners.values()) n += s.size;
    return n;
  }
}
