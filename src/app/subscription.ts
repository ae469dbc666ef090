/**
 * The subscription state machine: live subscriptions to one session (SubscribeSurface, SubscribeEvents) without any transport:
 * catch-up from the store, then live from the change feed, with no gap, duplicate or reordering.
 *
 * State machine of a {@link Subscription}:
 *
 *   catch-up ──(a store read finds nothing new and nothing was discarded meanwhile)──▶ live
 *      ▲                                                                               │
 *      └──────────(the live buffer would exceed `bufferBytes`: it is dropped)───────────┘
 *   any ──(session deleted)──▶ failed (SESSION_NOT_FOUND)     any ──(close())──▶ closed
 *
 * - The feed listener is registered before the first store read and stays registered until the
 *   subscription ends, so it is always in place before the *last* catch-up read: every event is
 *   either in the store when a read runs or in the live buffer after it.
 * - `#last` is the cursor of the last item handed out; anything at or below it is dropped (catch-up
 *   reads and live batches overlap at the switch), and items are handed out in seq order only.
 * - The live buffer is bounded: an item that would push it over `bufferBytes` drops the whole
 *   buffer and switches the subscription back to catch-up from `#last` (during catch-up, further
 *   live items are discarded until the next store read starts, and a read during which something
 *   was discarded is never taken as the last one). A slow subscriber therefore costs at most
 *   `bufferBytes` plus one store page, and never loses an event: it re-reads them from the store.
 * - Commits made by other processes reach the subscription only as a head (`onHead`, from the
 *   store-driven feed): a live subscription that has no batch up to that head, or gets a local
 *   batch that does not start right after what it has (the head report may still be on its way),
 *   goes back to catch-up from `#last`; during catch-up such a head or batch (not queued) makes the
 *   read in flight not count as the last one. Same guarantees as for local batches: the store is read by position.
 * - Catch-up for the surface rebuilds the surface state from the store's structural rows (a
 *   {@link SurfaceTracker} folded from seq 0 to the cursor), so replace deltas carry the shadowed
 *   seqs computed by the server, never trusted from the client; event data is read only for the
 *   events that change the surface (a run of chunks costs structural rows, not data).
 * - Live items are built once per committed batch and shared by every subscriber of the session
 *   (`surfaceItemsOf`/`eventItemsOf` are memoized on the batch object), so the transport can encode
 *   each item once and write the same bytes to every stream.
 * - Fast path: a consumer may register a direct sink (`setDirect`). When a batch is committed while
 *   the subscription is live with an empty buffer and its consumer is parked (its last `step()`
 *   answered IDLE, or it waits in `next()`: it has nothing older to write and its stream is
 *   writable), the batch's items are handed to the sink (`deliver`) synchronously from the feed
 *   callback instead of being queued and pulled. The sink returns false when its stream stops accepting writes: the rest of the batch goes to the
 *   (bounded) buffer and the parked consumer is left parked, not woken, until `resume()` (the
 *   stream drained). Order and the at/below-cursor drop are the same on both paths.
 * - Idle cost: an idle live subscriber holds this object and its feed registration (the
 *   subscription itself is the feed listener); buffers are allocated only when something is
 *   buffered. A push consumer (`setDirect` with a {@link SubscriptionConsumer}) pulls with `step()`,
 *   which never leaves a suspended frame or a pending promise behind while live and idle: it is
 *   told to pull again through `wake()`. `next()` is the promise-based pull over the same steps.
 */
import { DomainError } from '../domain/errors.js';
import type { CommittedBatch, SessionListener } from './change-feed.js';
import type { CallContext, SessionService } from './session-service.js';
import { waitForSession } from './wait-for-session.js';
import { NO_CURSOR, type Item } from './subscription-items.js';
import type { CatchUp, ItemSource } from './subscription-sources.js';

/** Options of a subscription. */
export interface SubscriptionOptions<I extends Item> {
  /** Max bytes of undelivered live items held before falling back to catch-up. */
  readonly bufferBytes: number;
  /**
   * Byte size of an item as it will be sent (the transport encodes it; shared items once). Called
   * as a method of the options object, which the subscription keeps (a transport may pass its
   * per-stream object itself).
   */
  sizeOf(item: I): number;
}

/**
 * The consumer of a subscription that is pushed to (the transport's stream): `deliver` is the fast
 * path (false = the stream stops accepting writes until `resume()`), `wake` says `step()` has
 * something again after it answered {@link IDLE}.
 */
export interface SubscriptionConsumer<I extends Item> {
  deliver(it: I): boolean;
  wake(): void;
}

/** `step()`: nothing to hand out now; `wake()` (or the promise of `next()`) follows when there is. */
export const IDLE: unique symbol = Symbol('idle');

/** Empty buffer shared by every subscription until it buffers something (never pushed to). */
const NONE: never[] = [];

/** Internal counters (tests, metrics). */
export interface SubscriptionStats {
  mode: 'catch-up' | 'live' | 'ended';
  /** Bytes of live items buffered now. */
  bufferedBytes: number;
  /** Highest `bufferedBytes` ever reached (never above the limit). */
  maxBufferedBytes: number;
  /** Times the live buffer was dropped for a switch back to catch-up. */
  fallbacks: number;
  /** Cursor of the last item handed out (-1 = none). */
  cursor: number;
  /** Highest seq published for the session since the subscription started (-1 = none). */
  head: number;
  /** Heads reported for commits made elsewhere that sent the subscription to catch-up. */
  remoteHeads: number;
}

/**
 * One subscriber's catch-up/live state machine (see the module comment). The consumer pulls with
 * `next()` only when it can write, which is what bounds memory under backpressure.
 */
export class Subscription<I extends Item> implements SessionListener {
  // The counters (read through `stats`); fields of this object, not a second object per subscriber.
  #mode: SubscriptionStats['mode'] = 'catch-up';
  #bufferedBytes = 0;
  #maxBufferedBytes = 0;
  #fallbacks = 0;
  #head = NO_CURSOR;
  #remoteHeads = 0;
  #last = NO_CURSOR;
  #catchUp: CatchUp<I> | undefined;
  #page: I[] = NONE;
  #pagePos = 0;
  #queue: I[] = NONE;
  #queueSizes: number[] = NONE;
  #queuePos = 0;
  #discarding = false;
  #drops = 0;
  /** The consumer is parked (step() answered IDLE, or next() waits): wake it when there is something. */
  #parked = false;
  /** The resolver of a waiting `next()`. */
  #wake: (() => void) | undefined;
  /** A catch-up read in flight (step() answers it until it settles). */
  #reading: Promise<void> | undefined;
  /** The snapshot (or caught-up signal), handed out before anything else. */
  #first: I | undefined;
  #error: Error | undefined;
  /** The feed key this subscription listens on (undefined once it stopped listening). */
  #feedKey: string | undefined;
  #feed: SessionService['feed'] | undefined;
  /** Synchronous delivery to an idle consumer (see the module comment). */
  #direct: SubscriptionConsumer<I> | undefined;
  /** The sink refused more: the consumer waits for `resume()` and must not be woken before. */
  #blocked = false;

  private constructor(
    private readonly source: ItemSource<I>,
    private readonly opts: SubscriptionOptions<I>,
    private readonly sessionId: string,
  ) {}

  /**
   * Opens a subscription after `after` (NO_CURSOR = from the start). With `snapshot`, the first
   * item is the surface at the head (use with a surface source; `after` is ignored).
   *
   * With `waitForCreate`, a session that does not exist yet is waited for (see waitForSession).
   *
   * @throws DomainError SESSION_NOT_FOUND, CURSOR_OUT_OF_RANGE (after is beyond the head)
   */
  static async open<I extends Item>(app: SessionService, ctx: CallContext, sessionId: string, source: ItemSource<I>, opts: SubscriptionOptions<I> & {
    after?: number; snapshot?: (seqs: readonly number[], cursor: number) => I;
  }, waitForCreate?: () => boolean): Promise<Subscription<I>> {
    // wait_for_create: the session may not exist yet (an observer started before its agent);
    // `waitForCreate()` says whether the caller still wants it.
    if (waitForCreate !== undefined) await waitForSession(app, ctx, sessionId, waitForCreate);
    const sub = new Subscription(source, opts, sessionId);
    // Listen before the first (hence before the last) store read; the subscription is the listener.
    sub.#feedKey = app.storageKey(ctx, sessionId);
    sub.#feed = app.feed;
    app.feed.listen(sub.#feedKey, sub);
    try {
      if (opts.snapshot) {
        const surf = await app.getSurface(ctx, sessionId);
        const cursor = surf.headSeq ?? NO_CURSOR;
        sub.#last = cursor;
        sub.#first = opts.snapshot(surf.seqs, cursor);
        sub.#catchUp = source.catchUp(cursor);
      } else {
        const view = await app.getSession(ctx, sessionId);
        const after = opts.after ?? NO_CURSOR;
        const head = view.headSeq ?? NO_CURSOR;
        if (after > head) {
          throw new DomainError('CURSOR_OUT_OF_RANGE', `after_seq ${after} is beyond the session head ${head}; resume from a cursor this server sent`, {
            sessionId, afterSeq: String(after), head: String(head),
          });
        }
        sub.#last = after;
        sub.#catchUp = source.catchUp(after);
      }
    } catch (e) {
      sub.close();
      throw e;
    }
    return sub;
  }

  /**
   * Registers the fast-path sink: called synchronously from the feed with live items while the
   * consumer is parked in `next()`; returns false when it cannot take more until `resume()`.
   */
  setDirect(sink: SubscriptionConsumer<I> | undefined): void {
    this.#direct = sink;
  }

  /** The direct sink can take items again (its stream drained): wakes a consumer parked meanwhile. */
  resume(): void {
    if (!this.#blocked) return;
    this.#blocked = false;
    this.#wakeUp();
  }

  /** A snapshot of the counters (tests, metrics). */
  get stats(): SubscriptionStats {
    return {
      mode: this.#mode, bufferedBytes: this.#bufferedBytes, maxBufferedBytes: this.#maxBufferedBytes, fallbacks: this.#fallbacks,
      cursor: this.#last, head: this.#head, remoteHeads: this.#remoteHeads,
    };
  }

  /** Highest seq published for the session since the subscription started (NO_CURSOR = none). */
  get head(): number {
    return this.#head;
  }

  /** Cursor of the last item handed out (NO_CURSOR = none): where a resumed subscription starts. */
  get cursor(): number {
    return this.#last;
  }

  /** True until closed or failed. */
  get open(): boolean {
    return this.#mode !== 'ended';
  }

  /**
   * The next item, in order; waits while live and idle. Resolves undefined once closed; rejects
   * with the error that ended the subscription (session deleted, store failure).
   */
  async next(): Promise<I | undefined> {
    for (;;) {
      const r = this.step();
      if (r === IDLE) {
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
      } else if (r instanceof Promise) await r;
      else return r;
    }
  }

  /**
   * One pull without waiting: the next item, undefined once closed, {@link IDLE} when live with
   * nothing to hand out (the consumer is woken when there is: `wake()` of the consumer set with
   * `setDirect`, or a waiting `next()`), or a promise while a catch-up read is in flight (step
   * again once it settles). Throws the error that ended the subscription.
   */
  step(): I | undefined | typeof IDLE | Promise<void> {
    if (this.#error) throw this.#error;
    if (this.#mode === 'ended') return undefined;
    if (this.#first) {
      const it = this.#first;
      this.#first = undefined;
      return this.#handOut(it);
    }
    if (this.#mode === 'catch-up') {
      if (this.#reading) return this.#reading;
      while (this.#pagePos < this.#page.length) {
        const it = this.#page[this.#pagePos++] as I;
        if (it.cursor <= this.#last) continue;
        return this.#handOut(it);
      }
      this.#page = NONE;
      this.#pagePos = 0;
      this.#pruneQueue();
      this.#discarding = false;
      const drops = this.#drops;
      const catchUp = this.#catchUp as CatchUp<I>;
      const reading: Promise<void> = catchUp.next().then((page) => {
        if (this.#reading === reading) this.#reading = undefined;
        if (this.#error || this.#mode !== 'catch-up' || this.#catchUp !== catchUp) return;
        if (page) {
          this.#page = page;
          return;
        }
        if (this.#drops !== drops) return;
        this.#catchUp = undefined;
        this.#mode = 'live';
        this.#first = this.source.caughtUp(this.#last);
      }, (e: unknown) => {
        if (this.#reading === reading) this.#reading = undefined;
        if (this.#mode !== 'ended') this.#error = e instanceof Error ? e : new Error(String(e));
      });
      this.#reading = reading;
      return reading;
    }
    // live
    while (this.#queuePos < this.#queue.length) {
      const it = this.#queue[this.#queuePos] as I;
      this.#bufferedBytes -= this.#queueSizes[this.#queuePos] as number;
      this.#queuePos++;
      if (this.#queuePos > 1024 && this.#queuePos * 2 > this.#queue.length) this.#compactQueue();
      if (it.cursor <= this.#last) continue;
      return this.#handOut(it);
    }
    if (this.#queue !== NONE) this.#clearQueue();
    this.#parked = true;
    return IDLE;
  }

  /** Ends the subscription and releases its listener and buffers (idempotent). */
  close(): void {
    if (this.#mode === 'ended' && this.#feedKey === undefined) return;
    this.#mode = 'ended';
    if (this.#feedKey !== undefined) this.#feed?.unlisten(this.#feedKey, this);
    this.#feedKey = undefined;
    this.#feed = undefined;
    this.#clearQueue();
    this.#page = NONE;
    this.#pagePos = 0;
    this.#catchUp = undefined;
    this.#blocked = false;
    this.#wakeUp();
  }

  #handOut(it: I): I {
    if (it.cursor > this.#last) this.#last = it.cursor;
    return it;
  }

  #fail(err: Error): void {
    if (this.#mode === 'ended') return;
    this.#error = err;
    this.close();
  }

  /** Feed listener: the session was deleted. */
  onDeleted(): void {
    const sessionId = this.sessionId;
    this.#fail(new DomainError('SESSION_NOT_FOUND', `session ${JSON.stringify(sessionId)} was deleted`, { sessionId }));
  }

  /**
   * Feed listener: a batch this process committed. A throw while taking it (encoding or sizing an
   * item) fails the subscription, so the stream ends with an error and the client resumes from
   * its cursor, instead of staying open without the batch.
   */
  onCommit(batch: CommittedBatch): void {
    try {
      this.#onCommit(batch);
    } catch (e) {
      this.#fail(e instanceof Error ? e : new Error(String(e)));
    }
  }

  #onCommit(batch: CommittedBatch): void {
    const lastEvent = batch.events[batch.events.length - 1];
    if (lastEvent && lastEvent.seq > this.#head) this.#head = lastEvent.seq;
    if (this.#mode === 'ended' || this.#discarding) return;
    // A batch that does not start right after what this subscription has means commits made
    // elsewhere came in between (their head report may still be on its way): read the store.
    const firstEvent = batch.events[0];
    if (firstEvent !== undefined && firstEvent.seq > this.#known() + 1) {
      // During catch-up it is not queued either: counted as a drop, so the read in flight is not
      // taken as the last one and the next read fetches the missing commits with it.
      if (this.#mode === 'live') this.#remoteCatchUp();
      else this.#drops++;
      return;
    }
    const items = this.source.live(batch);
    let i = 0;
    // Fast path: the consumer is parked (live, nothing buffered, stream writable) — write directly.
    if (this.#parked && this.#direct && !this.#blocked && this.#mode === 'live' && this.#queuePos === this.#queue.length && !this.#first) {
      const sink = this.#direct;
      while (i < items.length) {
        const it = items[i++] as I;
        if (it.cursor <= this.#last) continue;
        this.#handOut(it);
        const more = sink.deliver(it);
        if (!this.open) return; // the sink failed (or the call ended) and closed us
        if (!more) {
          this.#blocked = true;
          break;
        }
      }
    }
    let queued = false;
    for (; i < items.length; i++) {
      const it = items[i] as I;
      if (it.cursor <= this.#last) continue;
      const size = this.opts.sizeOf(it);
      if (this.#bufferedBytes + size > this.opts.bufferBytes) {
        this.#overflow();
        return;
      }
      if (this.#queue === NONE) {
        this.#queue = [];
        this.#queueSizes = [];
      }
      this.#queue.push(it);
      this.#queueSizes.push(size);
      queued = true;
      this.#bufferedBytes += size;
      if (this.#bufferedBytes > this.#maxBufferedBytes) this.#maxBufferedBytes = this.#bufferedBytes;
    }
    if (queued && !this.#blocked) this.#wakeUp();
  }

  /**
   * The stored head moved by a commit published elsewhere (another process): the events are only
   * in the store, so read them through catch-up. While catching up, the read in flight may have
   * missed them: it is not taken as the last one (as after a discarded live item). Feed listener.
   */
  onHead(nextSeq: number): void {
    const headSeq = nextSeq - 1;
    if (headSeq > this.#head) this.#head = headSeq;
    if (this.#mode === 'ended') return;
    if (this.#mode === 'live') {
      // Live, what was handed out and buffered is gap-free (see #onCommit): covered already?
      if (headSeq <= this.#known()) return;
      this.#remoteCatchUp();
      return;
    }
    if (headSeq <= this.#last) return;
    this.#remoteHeads++;
    this.#drops++;
  }

  /** The highest seq handed out or buffered (live: everything up to it is accounted for). */
  #known(): number {
    if (this.#queuePos >= this.#queue.length) return this.#last;
    return Math.max(this.#last, (this.#queue[this.#queue.length - 1] as I).cursor);
  }

  /** Live -> catch-up because the store has events this subscription got no batch for. */
  #remoteCatchUp(): void {
    this.#remoteHeads++;
    this.#drops++;
    // Buffered local items are in the store too: re-read everything after the cursor in order.
    this.#clearQueue();
    this.#mode = 'catch-up';
    this.#catchUp = this.source.catchUp(this.#last);
    this.#page = NONE;
    this.#pagePos = 0;
    if (!this.#blocked) this.#wakeUp();
  }

  /** The live buffer would exceed its limit: drop it and read the store from the cursor instead. */
  #overflow(): void {
    this.#clearQueue();
    this.#drops++;
    this.#discarding = true;
    if (this.#mode === 'live') {
      this.#mode = 'catch-up';
      this.#fallbacks++;
      this.#catchUp = this.source.catchUp(this.#last);
      this.#page = NONE;
      this.#pagePos = 0;
    }
    if (!this.#blocked) this.#wakeUp();
  }

  /** Drops buffered live items already covered by what was handed out (catch-up overlap). */
  #pruneQueue(): void {
    while (this.#queuePos < this.#queue.length && (this.#queue[this.#queuePos] as I).cursor <= this.#last) {
      this.#bufferedBytes -= this.#queueSizes[this.#queuePos] as number;
      this.#queuePos++;
    }
    if (this.#queuePos === this.#queue.length) this.#clearQueue();
    else if (this.#queuePos > 1024) this.#compactQueue();
  }

  #compactQueue(): void {
    this.#queue = this.#queue.slice(this.#queuePos);
    this.#queueSizes = this.#queueSizes.slice(this.#queuePos);
    this.#queuePos = 0;
  }

  #clearQueue(): void {
    this.#queue = NONE;
    this.#queueSizes = NONE;
    this.#queuePos = 0;
    this.#bufferedBytes = 0;
  }

  #wakeUp(): void {
    if (!this.#parked) return;
    this.#parked = false;
    const w = this.#wake;
    this.#wake = undefined;
    if (w) w();
    else this.#direct?.wake();
  }
}
