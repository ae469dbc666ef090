/**
 * Post-commit head hints: after a write commits, the store queues `(session, head)` here and one
 * `SELECT pg_notify(...)` per event-loop turn sends every queued hint (the highest head per
 * session), with at most one such statement in flight.
 *
 * Why after commit, in a statement of its own, rather than NOTIFY inside the append transaction:
 * a transaction that notifies takes a cluster-wide lock on the notification queue from its
 * pre-commit until its end, commit record flush included, so notifying appends would commit one
 * at a time across every session and every replica (no group commit). Here the hint costs one
 * small statement per turn, off the write path, and an acknowledgement never waits for it.
 *
 * Why only the session id and the head, never event data: NOTIFY payloads are limited to 8000
 * bytes and the queue is shared by the whole cluster (a backlog stalls every listener of every
 * database), so events travel through the table, read by seq (head-watch.ts).
 *
 * A hint lost here (the process dies between commit and NOTIFY, the database is unreachable) is
 * covered by the watchers' slow poll.
 */
import type pg from 'pg';

/** Payloads are at most 8000 bytes; ids are short (1-128 characters), so this never bites in practice. */
const MAX_PAYLOAD_BYTES = 7999;

/**
 * The hints' statement. A transaction that notifies gets a transaction id, so its commit writes a
 * commit record and, with synchronous_commit on, waits for its WAL flush (an fsync) before the
 * notifications go out: one more flush on every cross-replica delivery. The hints need no
 * durability (the events they point at were flushed before the acknowledgement; a hint lost in
 * a crash is covered by the watchers' poll), so this transaction alone commits asynchronously:
 * `set_config(..., true)` is SET LOCAL, undone at the end of the statement's own transaction, so
 * the pooled connection's later statements (the appends) keep the configured setting.
 */
export const NOTIFY_SQL =
  "SELECT pg_notify($1, p) FROM (SELECT set_config('synchronous_commit', 'off', true)) AS c, unnest($2::text[]) AS p";

/** Batches head hints into one pg_notify statement per turn. */
export class HeadNotifier {
  readonly #pool: pg.Pool;
  readonly #channel: string;
  #pending = new Map<string, number>();
  /** Sessions with a feed-only hint queued (created, labels changed: no head to report). */
  #feedOnly = new Set<string>();
  #scheduled = false;
  #inFlight: Promise<void> | undefined;
  #closed = false;
  /** Statements sent (tests, metrics). */
  sent = 0;

  constructor(pool: pg.Pool, channel: string) {
    this.#pool = pool;
    this.#channel = channel;
  }

  /** Queues a hint: session `sessionId` has head `head` (-1 = deleted). */
  notify(sessionId: string, head: number): void {
    if (this.#closed) return;
    const known = this.#pending.get(sessionId);
    // A deletion (-1) wins over any head; otherwise the highest head.
    if (known === undefined || head < 0 || (known >= 0 && head > known)) this.#pending.set(sessionId, head);
    this.#schedule();
  }

  /**
   * Queues a feed-only hint `f <id>` (issue #35: a session was created or its labels changed; the
   * session feed of every replica reads its table). Head watchers ignore it.
   */
  notifyFeed(sessionId: string): void {
    if (this.#closed) return;
    this.#feedOnly.add(sessionId);
    this.#schedule();
  }

  /** Sends what is queued and stops. */
  async close(): Promise<void> {
    if (this.#inFlight !== undefined) await this.#inFlight;
    if (this.#pending.size > 0 || this.#feedOnly.size > 0) await this.#send();
    this.#closed = true;
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight !== undefined) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (this.#inFlight === undefined) this.#inFlight = this.#send().finally(() => {
        this.#inFlight = undefined;
        if (this.#pending.size > 0 || this.#feedOnly.size > 0) this.#schedule();
      });
    });
  }

  async #send(): Promise<void> {
    const batch = this.#pending;
    this.#pending = new Map();
    const feedOnly = this.#feedOnly;
    this.#feedOnly = new Set();
    const payloads: string[] = [];
    for (const [id, head] of batch) {
      const payload = `${head} ${id}`;
      if (Buffer.byteLength(payload) <= MAX_PAYLOAD_BYTES) payloads.push(payload);
    }
    // A head hint of the same session wakes the feed too.
    for (const id of feedOnly) {
      const payload = `f ${id}`;
      if (!batch.has(id) && Buffer.byteLength(payload) <= MAX_PAYLOAD_BYTES) payloads.push(payload);
    }
    if (payloads.length === 0) return;
    try {
      await this.#pool.query(NOTIFY_SQL, [this.#channel, payloads]);
      this.sent++;
    } catch {
      // Unreachable database or shutdown: the hint is lost, the watchers' poll covers it.
    }
  }
}
