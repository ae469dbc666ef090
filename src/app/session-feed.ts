/**
 * The session feed (issue #35, SubscribeSessions) without any transport: one item per change of
 * any session of the caller's tenant (created, deleted, labels_changed, appended), each with the
 * feed position it resumes from, read from the store BY POSITION (an emmett-style consumer; the
 * store records each change in the transaction of the change, see FeedRecord in store-port.ts).
 *
 * - One reader per tenant (`TenantFeed`) follows the store's feed from its end and hands every
 *   record to the tenant's live subscribers: a change costs one store read per process, whatever
 *   the number of subscribers. It reads when poked (this process committed something:
 *   SessionService pokes after every write) and every `pollMs` while it has subscribers (commits
 *   of other processes or replicas; a poke is a hint, never a source of data).
 * - A subscription starts in catch-up: it reads the store itself after its cursor, page by page,
 *   and joins its tenant's reader once a read returned less than a page and the reader has not
 *   gone past the subscription's cursor (checked synchronously when it joins: every later record
 *   reaches it through the reader). Records at or below the cursor are dropped, so the overlap of
 *   catch-up and live is harmless: no gap, no duplicate, positions ascending.
 * - Live items are queued up to `bufferRecords`; beyond that the queue is dropped and the
 *   subscription reads the store again from what it handed out (a slow consumer costs a bounded
 *   buffer, never a lost change).
 * - Items are shared: every subscriber of a tenant gets the same object per record (the
 *   transport encodes it once, see feed-handlers.ts).
 * - A label selector keeps the records of sessions whose labels include it (for labels_changed,
 *   before or after the change: a subscriber sees a session leave its selection). The cursor
 *   still moves past the records it skips (the caught-up item and heartbeats carry it).
 */
import { DomainError } from '../domain/errors.js';
import type { CallContext } from './app-types.js';
import type { FeedChangeKind, FeedRecord, SessionStore } from './store-port.js';

/** One change as a subscriber sees it (session ids as the client knows them). */
export interface SessionChange {
  readonly kind: 'change';
  readonly position: number;
  readonly change: FeedChangeKind;
  readonly sessionId: string;
  readonly createdAt: number;
  /** Seq of the last event after the change (undefined: no events). */
  readonly headSeq: number | undefined;
  readonly eventCount: number;
  readonly surfaceLength: number;
  readonly eventTypes: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
  readonly previousLabels: Readonly<Record<string, string>> | undefined;
  /** When the store recorded the change (ms since epoch). */
  readonly time: number;
}

/** The subscription read everything up to `position` and is live from now on. */
export interface FeedCaughtUp {
  readonly kind: 'caught-up';
  readonly position: number;
}

export type FeedItem = SessionChange | FeedCaughtUp;

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

  constructor(readonly store: SessionStore, opts: SessionFeedOptions = {}) {
    this.pollMs = Math.max(1, opts.pollMs ?? DEFAULT_POLL_MS);
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
   * @throws DomainError CURSOR_OUT_OF_RANGE when `after` is beyond the feed's end
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
    }
    return new FeedSubscription(this, tenant, after, start.selector ?? {});
  }

  /** Stops every reader (subscriptions end at their next pull). */
  close(): void {
    this.#closed = true;
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
class TenantFeed {
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

/**
 * The item of a record, one object per record: every subscriber of the tenant gets the same
 * object, so the transport can encode it once and write the same bytes to every stream.
 */
const itemOfRecord = new WeakMap<FeedRecord, SessionChange>();

function changeOf(r: FeedRecord): SessionChange {
  let it = itemOfRecord.get(r);
  if (it === undefined) {
    const prefix = r.tenant === '' ? '' : `${r.tenant}/`;
    it = {
      kind: 'change',
      position: r.position,
      change: r.kind,
      sessionId: prefix !== '' && r.sessionId.startsWith(prefix) ? r.sessionId.slice(prefix.length) : r.sessionId,
      createdAt: r.createdAt,
      headSeq: r.nextSeq > 0 ? r.nextSeq - 1 : undefined,
      eventCount: r.eventCount,
      surfaceLength: r.surfaceLength,
      eventTypes: r.eventTypes,
      labels: r.labels,
      previousLabels: r.previousLabels,
      time: r.time,
    };
    itemOfRecord.set(r, it);
  }
  return it;
}

/** True when `labels` include every key/value of `selector`. */
export function matchesSelector(labels: Readonly<Record<string, string>> | undefined, selector: Readonly<Record<string, string>>): boolean {
  if (labels === undefined) return false;
  for (const k in selector) if (!Object.hasOwn(labels, k) || labels[k] !== selector[k]) return false;
  return true;
}

/** One subscriber of a tenant's feed (see the module comment). Pull with `next()`. */
export class FeedSubscription {
  /** Highest position accounted for: handed out, queued or skipped. */
  #last: number;
  /** Highest position below which everything was handed out or skipped (where a resume starts). */
  #resume: number;
  #mode: 'catch-up' | 'live' | 'ended' = 'catch-up';
  #queue: FeedItem[] = [];
  #wake: (() => void) | undefined;
  readonly #selectorEmpty: boolean;
  /** Times the live queue overflowed (tests, metrics). */
  fallbacks = 0;

  constructor(
    private readonly feed: SessionFeed,
    private readonly tenant: TenantFeed,
    after: number,
    private readonly selector: Readonly<Record<string, string>>,
  ) {
    this.#last = after;
    this.#resume = after;
    this.#selectorEmpty = Object.keys(selector).length === 0;
  }

  /** The position to resume after: every change up to it was handed out or filtered out. */
  get cursor(): number {
    return this.#resume;
  }

  /** True until closed. */
  get open(): boolean {
    return this.#mode !== 'ended';
  }

  /** True once live (after the caught-up item was queued). */
  get live(): boolean {
    return this.#mode === 'live';
  }

  /** The next queued item without waiting, or undefined when none is queued (then `next()`). */
  poll(): FeedItem | undefined {
    const it = this.#queue.shift();
    if (it === undefined) return undefined;
    this.#resume = it.position;
    if (this.#queue.length === 0) this.#resume = this.#last;
    return it;
  }

  /** The next item (waits while live and idle); undefined once closed. */
  async next(): Promise<FeedItem | undefined> {
    for (;;) {
      const it = this.#queue.shift();
      if (it !== undefined) {
        this.#resume = it.position;
        if (this.#queue.length === 0) this.#resume = this.#last;
        return it;
      }
      if (this.#mode === 'ended') return undefined;
      this.#resume = this.#last;
      if (this.#mode === 'catch-up') {
        await this.#catchUp();
        continue;
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }

  /** Ends the subscription (a pending `next()` resolves undefined). */
  close(): void {
    if (this.#mode === 'ended') return;
    if (this.#mode === 'live') this.tenant.leave(this);
    this.#mode = 'ended';
    this.#queue = [];
    this.#wakeUp();
  }

  /** The tenant's reader: one record, in position order. */
  offer(r: FeedRecord): void {
    if (this.#mode !== 'live' || r.position <= this.#last) return;
    this.#last = r.position;
    const item = this.#item(r);
    if (item === undefined) {
      if (this.#queue.length === 0) this.#resume = r.position;
      return;
    }
    if (this.#queue.length >= this.feed.bufferRecords) {
      // Too slow: drop the queue and read the store again after what was handed out.
      this.fallbacks++;
      this.#queue = [];
      this.#last = this.#resume;
      this.tenant.leave(this);
      this.#mode = 'catch-up';
      this.#wakeUp();
      return;
    }
    this.#queue.push(item);
    this.#wakeUp();
  }

  /** One catch-up step: a store page after the cursor, or the switch to live. */
  async #catchUp(): Promise<void> {
    const page = this.feed.pageSize;
    const records = await this.feed.store.readFeed({ tenant: this.tenant.tenant, after: this.#last, limit: page });
    if (this.#mode !== 'catch-up') return;
    for (const r of records) {
      if (r.position <= this.#last) continue;
      this.#last = r.position;
      const item = this.#item(r);
      if (item !== undefined) this.#queue.push(item);
      else if (this.#queue.length === 0) this.#resume = r.position;
    }
    if (records.length >= page) return;
    if (this.tenant.closed) {
      this.close();
      return;
    }
    // The end of the store's feed as of that read: live from here if the reader has not passed
    // it (checked and joined in one synchronous step), else read again.
    if (!this.tenant.canJoin(this.#last)) return;
    this.#mode = 'live';
    this.tenant.join(this);
    this.#queue.push({ kind: 'caught-up', position: this.#last });
    this.tenant.read();
  }

  #item(r: FeedRecord): SessionChange | undefined {
    if (!this.#selectorEmpty && !matchesSelector(r.labels, this.selector) && !matchesSelector(r.previousLabels, this.selector)) return undefined;
    return changeOf(r);
  }

  #wakeUp(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }
}
