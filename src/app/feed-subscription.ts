/**
 * One subscriber of a tenant's session feed (issue #35; the feed itself is session-feed.ts). Pulled
 * with `step()` by a push consumer (the transport's stream) or with `next()`; shaped like the
 * per-session Subscription (subscription.ts):
 *
 * - Catch-up: reads the store after its cursor, page by page, and joins its tenant's reader once a
 *   read returned less than a page and the reader has not gone past the cursor (checked and joined
 *   in one synchronous step: every later record reaches it through the reader). Records at or
 *   below the cursor are dropped, so the overlap of catch-up and live is harmless.
 * - Fast path (push): a consumer registered with `setDirect` that is parked (its last `step()`
 *   answered IDLE: nothing older to write, stream writable) gets each live record's item from the
 *   reader synchronously (`deliver`, the same item object for every subscriber of the tenant, so
 *   the transport encodes it once and writes the same bytes to every stream): no promise, timer or
 *   queue entry per delivery. When `deliver` returns false (the stream wants a drain), later items
 *   are queued and the consumer is not woken before `resume()`.
 * - Batching consumer (`FeedConsumer.batch`, SubscribeSessions `batch`): the live records of one
 *   store read are queued, not pushed one by one, and the consumer is woken once at the reader's
 *   `flush()` after the read (synchronously, no timer), so it can write them in one message; a
 *   stream that fell behind finds its backlog queued the same way.
 * - Backpressure: at most `bufferRecords` items are queued; beyond that the queue is dropped and the
 *   subscription reads the store again after what it handed out (a slow subscriber costs a bounded
 *   buffer, never a lost change, never unbounded memory).
 * - Expiry: the store may prune old records (feed retention). A catch-up read that finds records
 *   after its cursor pruned ends the subscription with FEED_POSITION_EXPIRED (see `#expired`).
 * - A label selector keeps the records of sessions whose labels include it (for labels_changed,
 *   before or after the change). The cursor still moves past the records it skips.
 */
import { DomainError } from '../domain/errors.js';
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

/** `step()`: nothing to hand out now; the consumer's `wake()` (or `next()`) follows when there is. */
export const FEED_IDLE: unique symbol = Symbol('feed-idle');

/** A push consumer of a feed subscription (the transport's stream). */
export interface FeedConsumer {
  /** Fast path: a live item while parked; false = take nothing more until `resume()`. */
  deliver(it: SessionChange): boolean;
  /** `step()` has something again after it answered {@link FEED_IDLE}. */
  wake(): void;
  /** Takes the live items of one store read together: woken at the reader's `flush()` instead of pushed one by one. */
  readonly batch?: boolean;
}

/** What a subscription needs of its tenant's shared reader (session-feed.ts TenantFeed). */
export interface FeedReader {
  readonly tenant: string;
  /** True once the feed closed (server shutdown). */
  readonly closed: boolean;
  /** True when a subscription at `cursor` misses nothing by joining now. */
  canJoin(cursor: number): boolean;
  join(sub: FeedSubscription): void;
  leave(sub: FeedSubscription): void;
  /** Reads the store now (coalesced). */
  read(): void;
}

/** What a subscription needs of its feed (session-feed.ts SessionFeed). */
export interface FeedSettings {
  readonly store: SessionStore;
  readonly pageSize: number;
  readonly bufferRecords: number;
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

/** The error of a resume after records the store no longer has (feed retention). */
export function feedPositionExpired(after: number, pruned: number): DomainError {
  return new DomainError('FEED_POSITION_EXPIRED',
    `the feed no longer has the changes after position ${after} (feed retention pruned them up to position ${pruned}); ` +
    'relist the sessions with ListSessions and subscribe from_now', { after: String(after), oldest: String(pruned + 1) });
}

const NONE: never[] = [];

/** One subscriber of a tenant's feed (see the module comment). */
export class FeedSubscription {
  /** Highest position accounted for: handed out, queued or skipped. */
  #last: number;
  /** Highest position below which everything was handed out or skipped (where a resume starts). */
  #resume: number;
  #mode: 'catch-up' | 'live' | 'ended' = 'catch-up';
  #queue: FeedItem[] = NONE;
  #queuePos = 0;
  /** The consumer is parked (step() answered IDLE, or next() waits). */
  #parked = false;
  /** The resolver of a waiting `next()`. */
  #wake: (() => void) | undefined;
  #direct: FeedConsumer | undefined;
  /** The consumer refused more: not woken before `resume()`. */
  #blocked = false;
  /** A batching consumer is woken at the reader's next `flush()`. */
  #wakeAtFlush = false;
  #reading: Promise<void> | undefined;
  #error: Error | undefined;
  readonly #selectorEmpty: boolean;
  /** Times the live queue overflowed (tests, metrics). */
  fallbacks = 0;

  constructor(
    private readonly feed: FeedSettings,
    private readonly reader: FeedReader,
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

  /** Registers the push consumer (see the module comment). */
  setDirect(consumer: FeedConsumer | undefined): void {
    this.#direct = consumer;
  }

  /** The push consumer can take items again (its stream drained). */
  resume(): void {
    if (!this.#blocked) return;
    this.#blocked = false;
    this.#wakeUp();
  }

  /**
   * One pull without waiting: the next item, undefined once closed, {@link FEED_IDLE} when live with
   * nothing queued (the consumer is woken when there is), or a promise while a catch-up read is in
   * flight (step again once it settles). Throws the error that ended the subscription.
   */
  step(): FeedItem | undefined | typeof FEED_IDLE | Promise<void> {
    if (this.#error) throw this.#error;
    if (this.#mode === 'ended') return undefined;
    if (this.#queuePos < this.#queue.length) {
      const it = this.#queue[this.#queuePos++] as FeedItem;
      if (this.#queuePos === this.#queue.length) {
        this.#queue = NONE;
        this.#queuePos = 0;
        this.#resume = this.#last;
      } else {
        this.#resume = it.position;
        if (this.#queuePos > 1024 && this.#queuePos * 2 > this.#queue.length) {
          this.#queue = this.#queue.slice(this.#queuePos);
          this.#queuePos = 0;
        }
      }
      return it;
    }
    this.#resume = this.#last;
    if (this.#mode === 'catch-up') {
      if (this.#reading) return this.#reading;
      const reading: Promise<void> = this.#catchUp().then(() => {
        if (this.#reading === reading) this.#reading = undefined;
      }, (e: unknown) => {
        if (this.#reading === reading) this.#reading = undefined;
        if (this.#mode !== 'ended') this.#fail(e instanceof Error ? e : new Error(String(e)));
      });
      this.#reading = reading;
      return reading;
    }
    this.#parked = true;
    return FEED_IDLE;
  }

  /** The next item (waits while live and idle); undefined once closed; rejects with the error that ended it. */
  async next(): Promise<FeedItem | undefined> {
    for (;;) {
      const r = this.step();
      if (r === FEED_IDLE) {
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
      } else if (r instanceof Promise) await r;
      else return r;
    }
  }

  /** Ends the subscription (a parked consumer is woken and steps undefined). */
  close(): void {
    if (this.#mode === 'ended') return;
    if (this.#mode === 'live') this.reader.leave(this);
    this.#mode = 'ended';
    this.#queue = NONE;
    this.#queuePos = 0;
    this.#blocked = false;
    this.#wakeUp();
  }

  /** The tenant's reader: one record, in position order. */
  offer(r: FeedRecord): void {
    if (this.#mode !== 'live' || r.position <= this.#last) return;
    this.#last = r.position;
    const item = this.#item(r);
    const empty = this.#queuePos === this.#queue.length;
    if (item === undefined) {
      if (empty) this.#resume = r.position;
      return;
    }
    const batching = this.#direct?.batch === true;
    // Fast path: parked, writable, nothing older queued: write it from here.
    if (empty && this.#parked && !this.#blocked && this.#direct !== undefined && !batching) {
      this.#resume = r.position;
      if (!this.#direct.deliver(item)) this.#blocked = true;
      return;
    }
    if (this.#queue.length - this.#queuePos >= this.feed.bufferRecords) {
      // Too slow: drop the queue and read the store again after what was handed out.
      this.fallbacks++;
      this.#queue = NONE;
      this.#queuePos = 0;
      this.#last = this.#resume;
      this.reader.leave(this);
      this.#mode = 'catch-up';
      if (!this.#blocked) this.#wakeUp();
      return;
    }
    if (this.#queue === NONE) this.#queue = [];
    this.#queue.push(item);
    if (batching) this.#wakeAtFlush = true;
    else if (!this.#blocked) this.#wakeUp();
  }

  /** The tenant's reader: the records of one store read were offered (a batching consumer takes them now). */
  flush(): void {
    if (!this.#wakeAtFlush) return;
    this.#wakeAtFlush = false;
    if (!this.#blocked) this.#wakeUp();
  }

  /** One catch-up step: a store page after the cursor, or the switch to live. */
  async #catchUp(): Promise<void> {
    const page = this.feed.pageSize;
    const after = this.#last;
    const records = await this.feed.store.readFeed({ tenant: this.reader.tenant, after, limit: page });
    if (this.#mode !== 'catch-up' || this.#last !== after) return;
    await this.#checkNotPruned(after, records);
    if (this.#mode !== 'catch-up' || this.#last !== after) return;
    for (const r of records) {
      if (r.position <= this.#last) continue;
      this.#last = r.position;
      const item = this.#item(r);
      if (item !== undefined) {
        if (this.#queue === NONE) this.#queue = [];
        this.#queue.push(item);
      } else if (this.#queuePos === this.#queue.length) this.#resume = r.position;
    }
    if (records.length >= page) return;
    if (this.reader.closed) {
      this.close();
      return;
    }
    // The end of the store's feed as of that read: live from here if the reader has not passed
    // it (checked and joined in one synchronous step), else read again.
    if (!this.reader.canJoin(this.#last)) return;
    this.#mode = 'live';
    this.reader.join(this);
    if (this.#queue === NONE) this.#queue = [];
    this.#queue.push({ kind: 'caught-up', position: this.#last });
    this.reader.read();
  }

  /**
   * Throws FEED_POSITION_EXPIRED when records after `after` were pruned before `records` was read.
   * Pruning removes a prefix of the tenant's records in one transaction (never its last one) and
   * the store marks the highest position removed (`feedPrunedUpTo`; positions may have holes, as
   * on SQLite where they are shared by all tenants): `after` at or above the mark lost nothing.
   * Below it, records after `after` are gone unless the read saw one at or below the mark (then it
   * was made before that prune, complete: the subscription checked the mark before this page, and
   * retention sweeps run once per interval, not twice within one page's read).
   */
  async #checkNotPruned(after: number, records: readonly FeedRecord[]): Promise<void> {
    if (after === 0) return;
    const pruned = await this.feed.store.feedPrunedUpTo(this.reader.tenant);
    if (after >= pruned) return;
    const first = records[0];
    if (first !== undefined && first.position <= pruned) return;
    throw feedPositionExpired(after, pruned);
  }

  #item(r: FeedRecord): SessionChange | undefined {
    if (!this.#selectorEmpty && !matchesSelector(r.labels, this.selector) && !matchesSelector(r.previousLabels, this.selector)) return undefined;
    return changeOf(r);
  }

  #fail(err: Error): void {
    if (this.#mode === 'ended') return;
    this.#error = err;
    this.close();
  }

  #wakeUp(): void {
    if (!this.#parked && this.#wake === undefined) return;
    this.#parked = false;
    const w = this.#wake;
    this.#wake = undefined;
    if (w) w();
    else this.#direct?.wake();
  }
}
