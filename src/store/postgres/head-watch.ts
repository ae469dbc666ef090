/**
 * Head notifications across processes for the PostgreSQL store (the port's HeadWatch).
 *
 * One dedicated connection (outside the pool) LISTENs on the schema's channel; every replica's
 * store NOTIFYs `<head> <session id>` after a commit (see notifier.ts). A notification is only a
 * wake-up hint: subscribers read the events from the table by seq and drop anything at or below
 * their cursor, so a lost, late or duplicated hint cannot cause a gap, a duplicate or a reorder.
 * Feed watchers (`watchFeed`, the session feed of issue #35) are told of every notification, of
 * any session (creates and label changes send a feed-only `f <id>` hint, notifier.ts), with the
 * tenant its storage key names (only that tenant's feed reads), and after every (re)connect with
 * no tenant (every tenant's feed reads); they read the feed table by position.
 * Hints are lost while the connection is down and when a replica dies between its commit and its
 * NOTIFY; two things cover that:
 *  - the connection reconnects on its own (backoff up to 5 s) and, after every (re)connect,
 *    re-reads the heads of every watched session and reports them all;
 *  - a slow poll (default every 2 s, only while something is watched) reads the watched heads
 *    and reports those that moved.
 * A lost deletion hint must not let a re-created session of the same id pass for the one that was
 * watched: when a session starts being watched, one read records its creation time (the
 * incarnation being watched). From then on any read that finds another creation time, or no
 * session, reports 'deleted'; the creation time is never taken from a later read.
 */
import pg from 'pg';
import type { HeadWatch } from '../../app/store-port.js';

/** What the watch needs from its store. */
export interface HeadSource {
  /** Current heads (and creation times) of visible sessions among `ids` (absent = deleted or unknown). */
  readHeads(ids: readonly string[]): Promise<Map<string, { readonly head: number; readonly createdAt: number }>>;
}

/** Options of {@link PgHeadWatch}. */
export interface PgHeadWatchOptions {
  /** Connection settings of the LISTEN connection (the store's, without pool options). */
  readonly connection: pg.ClientConfig;
  readonly channel: string;
  /** Slow-poll period, ms (default 2000). */
  readonly pollMs?: number;
  /** Called with connection errors (for logs); the watch keeps reconnecting. */
  readonly onError?: (error: unknown) => void;
}

type Listener = (head: number | 'deleted') => void;

const MAX_BACKOFF_MS = 5000;

/** The PostgreSQL HeadWatch (see the module comment). */
export class PgHeadWatch implements HeadWatch {
  readonly #options: PgHeadWatchOptions;
  readonly #source: HeadSource;
  readonly #listeners = new Map<string, Set<Listener>>();
  /** Feed watchers (watchFeed): told of every notification and of every (re)connect. */
  readonly #feedWatchers = new Set<(tenant?: string) => void>();
  /** Deletion watchers (watchDeletes): told of every deletion hint, watched session or not. */
  readonly #deleteWatchers = new Set<(sessionId: string) => void>();
  /** Last head reported per watched session (the poll reports only changes). */
  readonly #known = new Map<string, { head: number }>();
  /**
   * Per watched session, the creation time read when watching started (undefined until that read
   * returns): a read finding another one means the session was deleted and re-created (reported
   * as deleted, even if no deletion hint arrived). One object per watching period, so a read
   * started for an earlier period cannot fill in a later one.
   */
  readonly #incarnations = new Map<string, { createdAt?: number }>();
  /** Creation-time reads in flight (see {@link settled}). */
  readonly #baselineReads = new Set<Promise<void>>();
  #client: pg.Client | undefined;
  #closed = false;
  #backoffMs = 50;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #polling = false;
  /** A full report was asked for while a poll ran: run it when that poll ends. */
  #reportAllAfterPoll = false;
  /** Resolves once the first LISTEN is in place (or failed; reconnects go on). */
  readonly ready: Promise<void>;
  /** Connections established so far (tests). */
  connects = 0;

  constructor(source: HeadSource, options: PgHeadWatchOptions) {
    this.#source = source;
    this.#options = options;
    this.ready = this.#connect();
  }

  watch(sessionId: string, onHead: Listener): () => void {
    if (this.#closed) throw new Error('the head watch is closed');
    let set = this.#listeners.get(sessionId);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(sessionId, set);
      this.#readIncarnation(sessionId);
    }
    set.add(onHead);
    this.#schedulePoll();
    return () => {
      const s = this.#listeners.get(sessionId);
      if (s === undefined || !s.delete(onHead) || s.size > 0) return;
      this.#listeners.delete(sessionId);
      this.#known.delete(sessionId);
      this.#incarnations.delete(sessionId);
    };
  }

  watchFeed(onChange: (tenant?: string) => void): () => void {
    if (this.#closed) throw new Error('the head watch is closed');
    const entry = (tenant?: string): void => onChange(tenant);
    this.#feedWatchers.add(entry);
    return () => {
      this.#feedWatchers.delete(entry);
    };
  }

  watchDeletes(onDeleted: (sessionId: string) => void): () => void {
    if (this.#closed) throw new Error('the head watch is closed');
    const entry = (sessionId: string): void => onDeleted(sessionId);
    this.#deleteWatchers.add(entry);
    return () => {
      this.#deleteWatchers.delete(entry);
    };
  }

  /** Resolves once the creation-time reads of the watches started so far have returned (tests). */
  async settled(): Promise<void> {
    while (this.#baselineReads.size > 0) await Promise.allSettled([...this.#baselineReads]);
  }

  /**
   * Records the creation time of the session `sessionId` as it is now (the incarnation watched);
   * a session already gone is reported as deleted. A failed read is reported to onError and leaves
   * the incarnation unknown (no creation-time check for this watching period).
   */
  #readIncarnation(sessionId: string): void {
    const incarnation: { createdAt?: number } = {};
    this.#incarnations.set(sessionId, incarnation);
    const read = this.#source.readHeads([sessionId]).then(
      (heads) => {
        if (this.#closed || this.#incarnations.get(sessionId) !== incarnation) return;
        const now = heads.get(sessionId);
        const set = this.#listeners.get(sessionId);
        if (now === undefined) {
          this.#known.delete(sessionId);
          if (set !== undefined) this.#fire(set, 'deleted');
        } else {
          incarnation.createdAt = now.createdAt;
        }
      },
      (error: unknown) => this.#options.onError?.(error),
    );
    this.#baselineReads.add(read);
    void read.finally(() => this.#baselineReads.delete(read));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#reconnectTimer);
    clearTimeout(this.#pollTimer);
    this.#listeners.clear();
    this.#feedWatchers.clear();
    this.#deleteWatchers.clear();
    this.#incarnations.clear();
    const client = this.#client;
    this.#client = undefined;
    if (client !== undefined) await client.end().catch(() => undefined);
  }

  /** Drops the LISTEN connection as a network failure would (tests of the reconnect path). */
  dropConnectionForTest(): void {
    const client = this.#client;
    if (client !== undefined) (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    const client = new pg.Client(this.#options.connection);
    let failed = false;
    const fail = (error: unknown): void => {
      if (failed) return;
      failed = true;
      if (this.#client === client) this.#client = undefined;
      if (error !== undefined) this.#options.onError?.(error);
      client.end().catch(() => undefined);
      this.#scheduleReconnect();
    };
    client.on('error', fail);
    client.on('end', () => fail(undefined));
    client.on('notification', (msg) => this.#onNotification(msg.payload));
    try {
      await client.connect();
      await client.query(`LISTEN ${this.#options.channel}`);
    } catch (error) {
      fail(error);
      return;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
    this.#backoffMs = 50;
    this.connects++;
    // Anything committed while we were not listening was not notified to us: report every
    // watched head now (listeners drop what they already have), and tell the feed to read.
    this.#fireFeed();
    await this.#readAndReport(true);
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#reconnectTimer !== undefined) return;
    const delay = this.#backoffMs;
    this.#backoffMs = Math.min(MAX_BACKOFF_MS, this.#backoffMs * 2);
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      void this.#connect();
    }, delay);
    this.#reconnectTimer.unref();
  }

  #onNotification(payload: string | undefined): void {
    if (payload === undefined) return;
    const space = payload.indexOf(' ');
    if (space <= 0) {
      this.#fireFeed();
      return;
    }
    const sessionId = payload.slice(space + 1);
    // The storage key `<tenant>/<id>` (tenant-scope.ts; a plain id is tenant ''): only that tenant's feed.
    const slash = sessionId.indexOf('/');
    this.#fireFeed(slash < 0 ? '' : sessionId.slice(0, slash));
    // `f <id>` (notifier.ts notifyFeed): a feed-only hint (created, labels changed), no head.
    const head = Number(payload.slice(0, space));
    if (head < 0) this.#fireDeleted(sessionId);
    const set = this.#listeners.get(sessionId);
    if (set === undefined) return;
    if (!Number.isSafeInteger(head)) return;
    if (head < 0) {
      this.#known.delete(sessionId);
      this.#fire(set, 'deleted');
      return;
    }
    const known = this.#known.get(sessionId);
    if (known === undefined) this.#known.set(sessionId, { head });
    else if (head > known.head) known.head = head;
    this.#fire(set, head);
  }

  /** Tells the deletion watchers (a watcher that throws is reported and the others still hear). */
  #fireDeleted(sessionId: string): void {
    for (const w of this.#deleteWatchers) {
      try {
        w(sessionId);
      } catch (error) {
        this.#options.onError?.(error);
      }
    }
  }

  /** Tells the feed watchers: of `tenant`'s change, or (undefined) that any tenant's may have changed. */
  #fireFeed(tenant?: string): void {
    for (const w of this.#feedWatchers) {
      try {
        w(tenant);
      } catch (error) {
        this.#options.onError?.(error);
      }
    }
  }

  #fire(set: ReadonlySet<Listener>, head: number | 'deleted'): void {
    for (const listener of [...set]) {
      try {
        listener(head);
      } catch (error) {
        this.#options.onError?.(error);
      }
    }
  }

  #schedulePoll(): void {
    if (this.#closed || this.#pollTimer !== undefined || this.#listeners.size === 0) return;
    this.#pollTimer = setTimeout(() => {
      this.#pollTimer = undefined;
      void this.#readAndReport(false).finally(() => this.#schedulePoll());
    }, this.#options.pollMs ?? 2000);
    this.#pollTimer.unref();
  }

  /** Reads the watched heads and reports them (all of them, or only those that moved). */
  async #readAndReport(all: boolean): Promise<void> {
    if (this.#polling) {
      if (all) this.#reportAllAfterPoll = true;
      return;
    }
    if (this.#listeners.size === 0) return;
    this.#polling = true;
    try {
      const ids = [...this.#listeners.keys()];
      let heads: Map<string, { readonly head: number; readonly createdAt: number }>;
      try {
        heads = await this.#source.readHeads(ids);
      } catch (error) {
        this.#options.onError?.(error);
        return;
      }
      for (const id of ids) {
        const set = this.#listeners.get(id);
        if (set === undefined) continue;
        const now = heads.get(id);
        const known = this.#known.get(id);
        const createdAt = this.#incarnations.get(id)?.createdAt;
        if (now === undefined || (createdAt !== undefined && createdAt !== now.createdAt)) {
          this.#known.delete(id);
          this.#fire(set, 'deleted');
        } else if (all || now.head !== known?.head) {
          this.#known.set(id, { head: now.head });
          this.#fire(set, now.head);
        }
      }
    } finally {
      this.#polling = false;
    }
    if (this.#reportAllAfterPoll) {
      this.#reportAllAfterPoll = false;
      await this.#readAndReport(true);
    }
  }
}
