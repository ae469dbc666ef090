/**
 * The session feed (issue #35, SubscribeSessions) without any transport: one item per change of
 * any session of the caller's tenant (created, deleted, labels_changed, appended), each with the
 * feed position it resumes from, read from the store BY POSITION (an emmett-style consumer; the
 * store records each change in the transaction of the change, see FeedRecord in store-port.ts).
 *
 * - One reader per tenant (`TenantFeed`) follows the store's feed from its end and hands every
 *   record to the tenant's live subscribers: a change costs one store read per process, whatever
 *   the number of subscribers. It reads when poked: this process committed something
 *   (SessionService pokes after every write), or another process or replica did (the store's
 *   change hints, PostgreSQL NOTIFY, when given as `notifications`); and every `pollMs` while it
 *   has subscribers (200 ms without hints; with hints a safety net every `safetyPollMs`, 5 s). A
 *   poke is a hint, never a source of data.
 * - Subscriptions (feed-subscription.ts) catch up from the store after their cursor, then join
 *   their tenant's reader; a live subscription whose stream is idle and writable gets each record
 *   pushed synchronously by the reader (the transport writes one encoded Buffer per record to
 *   every such stream, feed-handlers.ts); a slow one queues a bounded number of items, then falls
 *   back to reading the store. No gap, no duplicate, positions ascending.
 * - Feed retention may prune old records (pruneFeed in the store, off the hot path): a resume
 *   after a pruned position fails with FEED_POSITION_EXPIRED (relist and subscribe from_now).
 */
import { DomainError } from '../domain/errors.js';
import type { CallContext } from './app-types.js';
import { FeedSubscription, feedPositionExpired, type FeedReader } from './feed-subscription.js';
import type { SessionStore } from './store-port.js';

export { FEED_IDLE, FeedSubscription, matchesSelector, type FeedConsumer, type FeedItem, type FeedCaughtUp, type SessionChange } from './feed-subscription.js';

/** Options of {@link SessionFeed}. */
export interface SessionFeedOptions {
  /** How often a tenant's reader reads the store while it has subscribers, ms (other processes' commits). */
  readonly pollMs?: number;
  /** Records per store read. */
  readonly pageSize?: number;
  /** Live items a subscription queues before it falls back to reading the store. */
  readonly bufferRecords?: number;
  /** Reports a failed background read (the reader retries at the next poll). */
  readonly onError?: (err: unknown) => void;
  /**
   * Change hints from other processes or replicas (the store's HeadWatch.watchFeed: PostgreSQL
   * LISTEN/NOTIFY): a hint naming a tenant makes that tenant's reader read, one without (after a
   * reconnect of the LISTEN connection) every reader. With it, the readers poll only every
   * `safetyPollMs` (a hint lost while the LISTEN connection was down or a replica died between
   * its commit and its NOTIFY); returns the function that stops the hints.
   */
  readonly notifications?: (onChange: (tenant?: string) => void) => () => void;
  /** The poll period when `notifications` are given, ms (default 5000). */
  readonly safetyPollMs?: number;
}

/** Where a subscription starts. */
export interface FeedStart {
  /** After this position (0 = from the beginning of the feed). */
  readonly after?: number;
  /** From the current end of the feed (`after` is ignored). */
  readonly fromNow?: boolean;
  /** Only sessions whose labels include all of these. */
  readonly selector?: Readonly<Record<string, string>>;
}

const DEFAULT_POLL_MS = 200;
const DEFAULT_SAFETY_POLL_MS = 5000;
const DEFAULT_PAGE = 500;
const DEFAULT_BUFFER = 10_000;

/** The feed of every tenant of one service. */
export class SessionFeed {
  readonly #tenants = new Map<string, TenantFeed>();
  readonly pollMs: number;
  readonly pageSize: number;
  readonly bufferRecords: number;
  readonly onError: (err: unknown) => void;
  #closed = false;
  readonly #stopHints: (() => void) | undefined;

  constructor(readonly store: SessionStore, opts: SessionFeedOptions = {}) {
    this.pollMs = Math.max(1, opts.notifications === undefined ? opts.pollMs ?? DEFAULT_POLL_MS : opts.safetyPollMs ?? DEFAULT_SAFETY_POLL_MS);
    this.#stopHints = opts.notifications?.((tenant) => (tenant === undefined ? this.poke() : this.#tenants.get(tenant)?.read()));
    this.pageSize = Math.max(1, opts.pageSize ?? DEFAULT_PAGE);
    this.bufferRecords = Math.max(1, opts.bufferRecords ?? DEFAULT_BUFFER);
    this.onError = opts.onError ?? (() => undefined);
  }

  /** This process committed something: the readers read now (a hint; cheap when nobody listens). */
  poke(): void {
    for (const t of this.#tenants.values()) t.read();
  }

  /** Subscribers now (all tenants). */
  get subscribers(): number {
    let n = 0;
    for (const t of this.#tenants.values()) n += t.subscribers;
    return n;
  }

  /**
   * Opens a subscription to the caller's tenant's feed.
   *
   * @throws DomainError CURSOR_OUT_OF_RANGE when `after` is beyond the feed's end,
   *   FEED_POSITION_EXPIRED when records after it were pruned (feed retention)
   */
  async subscribe(ctx: CallContext, start: FeedStart = {}): Promise<FeedSubscription> {
    if (this.#closed) throw new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; resubscribe to another replica or later', {});
    const tenant = this.#tenant(ctx.tenant);
    const end = await this.store.feedEnd(ctx.tenant);
    let after = 0;
    if (start.fromNow === true) after = end;
    else if (start.after !== undefined) {
      if (!Number.isSafeInteger(start.after) || start.after < 0) {
        throw new DomainError('INVALID_ARGUMENT', `after ${start.after} is not a feed position`, { field: 'after' });
      }
      if (start.after > end) {
        throw new DomainError('CURSOR_OUT_OF_RANGE', `after ${start.after} is beyond the feed's end ${end}; resume from a position this server sent`, {
          afterSeq: String(start.after), head: String(end),
        });
      }
      after = start.after;
      if (after > 0) {
        // Resuming after records that feed retention pruned: a gap the client must know about.
        const pruned = await this.store.feedPrunedUpTo(ctx.tenant);
        if (after < pruned) throw feedPositionExpired(after, pruned);
      }
    }
    return new FeedSubscription(this, tenant, after, start.selector ?? {});
  }

  /** Stops every reader (subscriptions end at their next pull). */
  close(): void {
    this.#closed = true;
    this.#stopHints?.();
    for (const t of this.#tenants.values()) t.close();
    this.#tenants.clear();
  }

  #tenant(name: string): TenantFeed {
    let t = this.#tenants.get(name);
    if (t === undefined) {
      t = new TenantFeed(this, name);
      this.#tenants.set(name, t);
    }
    return t;
  }
}

/** One tenant's reader of the store's feed, shared by the tenant's live subscriptions. */
class TenantFeed implements FeedReader {
  readonly #subs = new Set<FeedSubscription>();
  /** The last position read (undefined until the end was read, at the first subscriber). */
  #position: number | undefined;
  #reading = false;
  #again = false;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(private readonly feed: SessionFeed, readonly tenant: string) {}

  get subscribers(): number {
    return this.#subs.size;
  }

  /** True once the feed closed (server shutdown). */
  get closed(): boolean {
    return this.#closed;
  }

  /** The last position this reader handed to its subscribers (undefined: not started). */
  get position(): number | undefined {
    return this.#position;
  }

  /** Adds a live subscription whose cursor is at or past this reader's position (see `canJoin`). */
  join(sub: FeedSubscription): void {
    this.#subs.add(sub);
    if (this.#timer === undefined && !this.#closed) {
      this.#timer = setInterval(() => this.read(), this.feed.pollMs);
      this.#timer.unref();
    }
  }

  /** True when a subscription at `cursor` misses nothing by joining now. */
  canJoin(cursor: number): boolean {
    return this.#position === undefined || this.#position <= cursor;
  }

  leave(sub: FeedSubscription): void {
    this.#subs.delete(sub);
    if (this.#subs.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      // Idle: the next subscriber starts the reader from the end again.
      if (!this.#reading) this.#position = undefined;
    }
  }

  /** Reads the store after the reader's position and hands the records out (coalesced). */
  read(): void {
    if (this.#closed || this.#subs.size === 0) return;
    if (this.#reading) {
      this.#again = true;
      return;
    }
    this.#reading = true;
    void this.#drain().finally(() => {
      this.#reading = false;
      if (this.#subs.size === 0) this.#position = undefined;
    });
  }

  async #drain(): Promise<void> {
    const store = this.feed.store;
    const page = this.feed.pageSize;
    try {
      // The first read of a reader with subscribers: they all joined at or after this end, and
      // commits made since are read by position below.
      if (this.#position === undefined) {
        const lowest = Math.min(...[...this.#subs].map((s) => s.cursor));
        this.#position = lowest;
      }
      for (;;) {
        this.#again = false;
        const records = await store.readFeed({ tenant: this.tenant, after: this.#position, limit: page });
        if (this.#closed) return;
        for (const r of records) {
          this.#position = r.position;
          for (const s of this.#subs) s.offer(r);
        }
        // Batching subscribers take this read's records together (one message per stream).
        if (records.length > 0) for (const s of this.#subs) s.flush();
        if (records.length < page && !this.#again) return;
        if (this.#subs.size === 0) return;
      }
    } catch (e) {
      this.feed.onError(e);
    }
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    for (const s of [...this.#subs]) s.close();
  }
}
