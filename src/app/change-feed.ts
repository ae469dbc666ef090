/**
 * The change feed port: what subscriptions follow. Two implementations sit behind it:
 *
 *  - `LocalChangeFeed` (local-change-feed.ts): the app publishes each batch it committed
 *    itself, after the store acknowledged it, in seq order per session; listeners get the batch
 *    synchronously (the fast path: no store read).
 *  - `StoreChangeFeed` (store-change-feed.ts): the local feed plus the store's HeadWatch,
 *    which reports "session S has head H" for commits made by other processes or store instances.
 *    A listener told of a head it has no batch for reads the missing events from the store (the
 *    subscription's catch-up path), so the guarantees (no gap, no duplicate, seq order) are the
 *    same as for local batches: consumers read the store by position, a notification is a hint.
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
  /** A batch this process committed; called synchronously after commit, in seq order. */
  onCommit(batch: CommittedBatch): void;
  /**
   * The stored head (next seq) may have moved to `nextSeq` by a commit this process did not
   * publish (another process or store instance): read the store after your cursor. Duplicates and
   * heads already covered by batches are possible; ignore what you already have.
   */
  onHead?(nextSeq: number): void;
  /** The session was deleted. */
  onDeleted(): void;
}

/** Fan-out of committed changes to listeners, per session (the port). */
export interface ChangeFeed {
  /** Registers a listener; returns the function that removes it. */
  subscribe(sessionId: string, listener: SessionListener): () => void;
  /** Registers a listener (no remover allocated: remove it with `unlisten`). */
  listen(sessionId: string, listener: SessionListener): void;
  /** Removes a listener registered with `listen` or `subscribe` (no-op when not registered). */
  unlisten(sessionId: string, listener: SessionListener): void;
  /** Publishes a batch this process committed. A listener that throws is removed and reported. */
  publish(batch: CommittedBatch): void;
  /** Announces a deletion made by this process. */
  deleted(sessionId: string): void;
  /** Number of listeners of a session (all sessions when omitted). */
  listenerCount(sessionId?: string): number;
  /** Called after every `publish` and `deleted` (the session feed reads the store then, issue #35). */
  onCommitted: () => void;
  /** Reports a listener that threw (it is removed; the others still get the batch). */
  onListenerError: (err: unknown) => void;
  /** Called when a session loses its last listener (the session cache drops a handle it kept for them). */
  onUnwatched: (sessionId: string) => void;
  /** Stops (store watches released); listeners are left registered but hear nothing more. */
  close(): Promise<void>;
}
