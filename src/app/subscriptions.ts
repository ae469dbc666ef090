/**
 * Live subscriptions to one session (SubscribeSurface, SubscribeEvents) without any transport:
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
 * - Catch-up for the surface rebuilds the surface state from the store's structural rows (a
 *   {@link SurfaceTracker} folded from seq 0 to the cursor), so replace deltas carry the shadowed
 *   seqs computed by the server, never trusted from the client; event data is read only for the
 *   events that change the surface (a run of chunks costs structural rows, not data).
 * - Live items are built once per committed batch and shared by every subscriber of the session
 *   (`surfaceItemsOf`/`eventItemsOf` are memoized on the batch object), so the transport can encode
 *   each item once and write the same bytes to every stream.
 * - Fast path: a consumer may register a direct sink (`setDirect`). When a batch is committed while
 *   the subscription is live with an empty buffer and its consumer is parked in `next()` (so it has
 *   nothing older to write and its stream is writable), the batch's items are handed to the sink
 *   synchronously from the feed callback instead of being queued and pulled through a promise. The
 *   sink returns false when its stream stops accepting writes: the rest of the batch goes to the
 *   (bounded) buffer and the parked consumer is left parked, not woken, until `resume()` (the
 *   stream drained). Order and the at/below-cursor drop are the same on both paths.
 */
import type { SessionEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { SeqTable } from '../domain/seq-table.js';
import { ChunkedSurface, SurfaceDraft } from '../domain/surface.js';
import type { SurfaceDelta } from '../domain/session-engine.js';
import type { CommittedBatch } from './change-feed.js';
import type { CallContext, SessionService } from './session-service.js';
import type { StructuralRow } from './store-port.js';

/** "No event seen yet" as a cursor. */
export const NO_CURSOR = -1;

/** One message of a surface subscription (before encoding). `cursor` -1 = no event seen yet. */
export type SurfaceItem =
  | { readonly kind: 'append'; readonly cursor: number; readonly event: SessionEvent }
  | {
      readonly kind: 'replace'; readonly cursor: number; readonly event: SessionEvent;
      readonly start: number; readonly end: number; readonly shadowed: readonly number[];
    }
  | { readonly kind: 'checkpoint'; readonly cursor: number }
  | { readonly kind: 'snapshot'; readonly cursor: number; readonly seqs: readonly number[] }
  | { readonly kind: 'caught-up'; readonly cursor: number };

/** One message of an event subscription (before encoding). */
export type EventItem =
  | { readonly kind: 'event'; readonly cursor: number; readonly event: SessionEvent }
  | { readonly kind: 'caught-up'; readonly cursor: number };

/** Anything a subscription hands out. */
export interface Item {
  readonly kind: string;
  readonly cursor: number;
}

/**
 * The surface as of a cursor, rebuilt from structural rows, reporting what each row did to it
 * (the same algorithm as `SessionEngine.loadStructural`, with the deltas kept).
 */
export class SurfaceTracker {
  readonly #table = new SeqTable();
  readonly #surf = new ChunkedSurface(this.#table);

  /** Applies one stored row (trusted: it was validated when appended) and returns its delta. */
  apply(row: StructuralRow): SurfaceDelta {
    const seq = row.seq;
    this.#table.push(seq, 0);
    const op = row.surfaceOp;
    if (op === undefined) return { kind: 'none', seq };
    if (op === 'append') {
      this.#surf.append(seq);
      return { kind: 'append', seq };
    }
    const draft = new SurfaceDraft(this.#surf);
    const a = draft.locate(op.start);
    const b = draft.locate(op.end);
    if (a === undefined || b === undefined || draft.compare(a, b) > 0) {
      throw new Error(`stored row ${seq}: replace ${op.start}..${op.end} is not a surface range`);
    }
    const shadowed = draft.range(a, b);
    const index = draft.indexOf(a);
    draft.replace(a, b, shadowed, seq);
    this.#surf.adopt(draft);
    return { kind: 'replace', seq, start: op.start, end: op.end, shadowed, index };
  }

  /** The surface in order. */
  surface(): number[] {
    return this.#surf.toArray();
  }
}

/**
 * Surface items of consecutive events and their deltas. A run of events that leave the surface
 * alone yields one checkpoint only when it ends the list: a delta's cursor already moves past the
 * events before it.
 */
export function surfaceItems(events: readonly SessionEvent[], deltas: readonly SurfaceDelta[]): SurfaceItem[] {
  const out: SurfaceItem[] = [];
  let trailing = NO_CURSOR;
  for (let i = 0; i < deltas.length; i++) {
    const d = deltas[i] as SurfaceDelta;
    const e = events[i] as SessionEvent;
    if (d.kind === 'append') {
      out.push({ kind: 'append', cursor: d.seq, event: e });
      trailing = NO_CURSOR;
    } else if (d.kind === 'replace') {
      out.push({ kind: 'replace', cursor: d.seq, event: e, start: d.start, end: d.end, shadowed: d.shadowed });
      trailing = NO_CURSOR;
    } else trailing = d.seq;
  }
  if (trailing !== NO_CURSOR) out.push({ kind: 'checkpoint', cursor: trailing });
  return out;
}

const surfaceMemo = new WeakMap<CommittedBatch, readonly SurfaceItem[]>();
const eventMemo = new WeakMap<CommittedBatch, readonly EventItem[]>();
// The feed hands one batch to every listener in a row: remember the last one in front of the maps.
let lastSurface: { batch: CommittedBatch; items: readonly SurfaceItem[] } | undefined;
let lastEvents: { batch: CommittedBatch; items: readonly EventItem[] } | undefined;

/** The surface items of a committed batch, built once and shared by every subscriber. */
export function surfaceItemsOf(batch: CommittedBatch): readonly SurfaceItem[] {
  if (lastSurface?.batch === batch) return lastSurface.items;
  let items = surfaceMemo.get(batch);
  if (!items) {
    items = surfaceItems(batch.events, batch.deltas);
    surfaceMemo.set(batch, items);
  }
  lastSurface = { batch, items };
  return items;
}

/** The event items of a committed batch, built once and shared by every subscriber. */
export function eventItemsOf(batch: CommittedBatch): readonly EventItem[] {
  if (lastEvents?.batch === batch) return lastEvents.items;
  let items = eventMemo.get(batch);
  if (!items) {
    items = batch.events.map((e) => ({ kind: 'event', cursor: e.seq, event: e }) as const);
    eventMemo.set(batch, items);
  }
  lastEvents = { batch, items };
  return items;
}

/** One catch-up episode: pages of items after a cursor, read from the store. */
export interface CatchUp<I extends Item> {
  /** The next page (whose last item's cursor is the last seq it covers), or undefined when none is stored yet. */
  next(): Promise<I[] | undefined>;
}

/** What a subscription is over: its catch-up reader and its live items. */
export interface ItemSource<I extends Item> {
  /** A catch-up episode reading after `after` (NO_CURSOR = from the start). */
  catchUp(after: number): CatchUp<I>;
  /** The items of a committed batch (shared objects). */
  live(batch: CommittedBatch): readonly I[];
  /** The caught-up signal. */
  caughtUp(cursor: number): I;
}

/** Max structural rows and data events per catch-up page. */
const PAGE_ROWS = 4096;
const PAGE_EVENTS = 128;
/** Structural rows read from the store at a time. */
const STRUCTURE_PAGE = 16_384;

/**
 * Surface subscriptions. A catch-up reads structural rows after the cursor and event data only for
 * the rows that change the surface. The surface state (for the shadowed seqs of replace deltas) is
 * rebuilt only when a replace shows up: structure folded from seq 0 to the row before it.
 */
export function surfaceSource(app: SessionService, sessionId: string): ItemSource<SurfaceItem> {
  return {
    catchUp(after) {
      let tracker: SurfaceTracker | undefined;
      let rows: StructuralRow[] = [];
      let pos = 0;
      let last = after;
      return {
        async next() {
          if (pos >= rows.length) {
            // Page through the log: a catching-up subscriber never holds more than one page.
            rows = await app.store.readStructure(sessionId, last + 1, STRUCTURE_PAGE);
            pos = 0;
            if (rows.length === 0) return undefined;
          }
          const take: StructuralRow[] = [];
          const wanted: number[] = [];
          let replaces = false;
          while (pos < rows.length && take.length < PAGE_ROWS && wanted.length < PAGE_EVENTS) {
            const r = rows[pos++] as StructuralRow;
            take.push(r);
            if (r.surfaceOp !== undefined) wanted.push(r.seq);
            if (r.surfaceOp !== undefined && r.surfaceOp !== 'append') replaces = true;
          }
          if (replaces && !tracker) {
            // The surface state at the cursor, folded from the start in pages (held: one structural
            // copy of the surface, as long as this subscriber catches up over replaces).
            const t = new SurfaceTracker();
            let from = 0;
            for (let done = false; !done;) {
              const page = await app.store.readStructure(sessionId, from, STRUCTURE_PAGE);
              for (const r of page) {
                if (r.seq > last) {
                  done = true;
                  break;
                }
                t.apply(r);
              }
              if (page.length < STRUCTURE_PAGE) break;
              from = (page[page.length - 1] as StructuralRow).seq + 1;
            }
            tracker = t;
          }
          const byS = new Map<number, SessionEvent>();
          if (wanted.length > 0) for (const e of await app.store.getEvents(sessionId, wanted)) byS.set(e.seq, e);
          const events: SessionEvent[] = [];
          const deltas: SurfaceDelta[] = [];
          for (const r of take) {
            const d: SurfaceDelta = tracker ? tracker.apply(r) : { kind: r.surfaceOp === 'append' ? 'append' : 'none', seq: r.seq };
            const e = byS.get(r.seq);
            if (d.kind !== 'none' && !e) throw new DomainError('SESSION_NOT_FOUND', `session ${JSON.stringify(sessionId)} does not exist`, { sessionId });
            events.push(e as SessionEvent);
            deltas.push(d);
          }
          last = (take[take.length - 1] as StructuralRow).seq;
          return surfaceItems(events, deltas);
        },
      };
    },
    live: surfaceItemsOf,
    caughtUp: (cursor) => ({ kind: 'caught-up', cursor }),
  };
}

/** Event subscriptions: catch-up reads pages of events. */
export function eventSource(app: SessionService, sessionId: string): ItemSource<EventItem> {
  return {
    catchUp(after) {
      let last = after;
      return {
        async next() {
          const page = await app.store.readEvents(sessionId, { fromSeq: last + 1, direction: 'forward', limit: PAGE_EVENTS });
          if (page.length === 0) return undefined;
          last = (page[page.length - 1] as SessionEvent).seq;
          return page.map((e) => ({ kind: 'event', cursor: e.seq, event: e }) as const);
        },
      };
    },
    live: eventItemsOf,
    caughtUp: (cursor) => ({ kind: 'caught-up', cursor }),
  };
}

/** Options of a subscription. */
export interface SubscriptionOptions<I extends Item> {
  /** Max bytes of undelivered live items held before falling back to catch-up. */
  readonly bufferBytes: number;
  /** Byte size of an item as it will be sent (the transport encodes it; shared items once). */
  readonly sizeOf: (item: I) => number;
}

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
export class Subscription<I extends Item> {
  readonly stats: SubscriptionStats = { mode: 'catch-up', bufferedBytes: 0, maxBufferedBytes: 0, fallbacks: 0, cursor: NO_CURSOR, head: NO_CURSOR, remoteHeads: 0 };
  #last = NO_CURSOR;
  #catchUp: CatchUp<I> | undefined;
  #page: I[] = [];
  #pagePos = 0;
  #queue: I[] = [];
  #queueSizes: number[] = [];
  #queuePos = 0;
  #discarding = false;
  #drops = 0;
  #wake: (() => void) | undefined;
  /** The snapshot, handed out before anything else. */
  #first: I | undefined;
  #error: Error | undefined;
  #unsubscribe: (() => void) | undefined;
  /** Synchronous delivery to an idle consumer (see the module comment). */
  #direct: ((it: I) => boolean) | undefined;
  /** The sink refused more: the consumer waits for `resume()` and must not be woken before. */
  #blocked = false;

  private constructor(
    private readonly source: ItemSource<I>,
    private readonly opts: SubscriptionOptions<I>,
  ) {}

  /**
   * Opens a subscription after `after` (NO_CURSOR = from the start). With `snapshot`, the first
   * item is the surface at the head (use with a surface source; `after` is ignored).
   *
   * @throws DomainError SESSION_NOT_FOUND, CURSOR_OUT_OF_RANGE (after is beyond the head)
   */
  static async open<I extends Item>(app: SessionService, ctx: CallContext, sessionId: string, source: ItemSource<I>, opts: SubscriptionOptions<I> & {
    after?: number; snapshot?: (seqs: readonly number[], cursor: number) => I;
  }): Promise<Subscription<I>> {
    const sub = new Subscription(source, opts);
    // Listen before the first (hence before the last) store read.
    sub.#unsubscribe = app.feed.subscribe(app.storageKey(ctx, sessionId), {
      onCommit: (b) => sub.#onCommit(b),
      onHead: (nextSeq) => sub.#onHead(nextSeq),
      onDeleted: () => sub.#fail(new DomainError('SESSION_NOT_FOUND', `session ${JSON.stringify(sessionId)} was deleted`, { sessionId })),
    });
    try {
      if (opts.snapshot) {
        const surf = await app.getSurface(ctx, sessionId);
        const cursor = surf.headSeq ?? NO_CURSOR;
        sub.#last = cursor;
        sub.stats.cursor = cursor;
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
        sub.stats.cursor = after;
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
  setDirect(sink: ((it: I) => boolean) | undefined): void {
    this.#direct = sink;
  }

  /** The direct sink can take items again (its stream drained): wakes a consumer parked meanwhile. */
  resume(): void {
    if (!this.#blocked) return;
    this.#blocked = false;
    this.#wakeUp();
  }

  /** Cursor of the last item handed out (NO_CURSOR = none): where a resumed subscription starts. */
  get cursor(): number {
    return this.#last;
  }

  /** True until closed or failed. */
  get open(): boolean {
    return this.stats.mode !== 'ended';
  }

  /**
   * The next item, in order; waits while live and idle. Resolves undefined once closed; rejects
   * with the error that ended the subscription (session deleted, store failure).
   */
  async next(): Promise<I | undefined> {
    for (;;) {
      if (this.#error) throw this.#error;
      if (this.stats.mode === 'ended') return undefined;
      if (this.#first) {
        const it = this.#first;
        this.#first = undefined;
        return it;
      }
      if (this.stats.mode === 'catch-up') {
        while (this.#pagePos < this.#page.length) {
          const it = this.#page[this.#pagePos++] as I;
          if (it.cursor <= this.#last) continue;
          return this.#handOut(it);
        }
        this.#page = [];
        this.#pagePos = 0;
        this.#pruneQueue();
        this.#discarding = false;
        const drops = this.#drops;
        const catchUp = this.#catchUp as CatchUp<I>;
        const page = await catchUp.next();
        if (this.#error || this.stats.mode !== 'catch-up' || this.#catchUp !== catchUp) continue;
        if (page) {
          this.#page = page;
          continue;
        }
        if (this.#drops !== drops) continue;
        this.#catchUp = undefined;
        this.stats.mode = 'live';
        return this.#handOut(this.source.caughtUp(this.#last));
      }
      // live
      while (this.#queuePos < this.#queue.length) {
        const it = this.#queue[this.#queuePos] as I;
        this.stats.bufferedBytes -= this.#queueSizes[this.#queuePos] as number;
        this.#queuePos++;
        if (this.#queuePos > 1024 && this.#queuePos * 2 > this.#queue.length) this.#compactQueue();
        if (it.cursor <= this.#last) continue;
        return this.#handOut(it);
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }

  /** Ends the subscription and releases its listener and buffers (idempotent). */
  close(): void {
    if (this.stats.mode === 'ended' && !this.#unsubscribe) return;
    this.stats.mode = 'ended';
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#clearQueue();
    this.#page = [];
    this.#catchUp = undefined;
    this.#blocked = false;
    this.#wakeUp();
  }

  #handOut(it: I): I {
    if (it.cursor > this.#last) this.#last = it.cursor;
    this.stats.cursor = this.#last;
    return it;
  }

  #fail(err: Error): void {
    if (this.stats.mode === 'ended') return;
    this.#error = err;
    this.close();
  }

  #onCommit(batch: CommittedBatch): void {
    const lastEvent = batch.events[batch.events.length - 1];
    if (lastEvent && lastEvent.seq > this.stats.head) this.stats.head = lastEvent.seq;
    if (this.stats.mode === 'ended' || this.#discarding) return;
    // A batch that does not start right after what this subscription has means commits made
    // elsewhere came in between (their head report may still be on its way): read the store.
    const firstEvent = batch.events[0];
    if (this.stats.mode === 'live' && firstEvent !== undefined && firstEvent.seq > this.#known() + 1) {
      this.#remoteCatchUp();
      return;
    }
    const items = this.source.live(batch);
    let i = 0;
    // Fast path: the consumer is parked (live, nothing buffered, stream writable) — write directly.
    if (this.#wake && this.#direct && !this.#blocked && this.stats.mode === 'live' && this.#queuePos === this.#queue.length && !this.#first) {
      const sink = this.#direct;
      while (i < items.length) {
        const it = items[i++] as I;
        if (it.cursor <= this.#last) continue;
        this.#handOut(it);
        const more = sink(it);
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
      if (this.stats.bufferedBytes + size > this.opts.bufferBytes) {
        this.#overflow();
        return;
      }
      this.#queue.push(it);
      this.#queueSizes.push(size);
      queued = true;
      this.stats.bufferedBytes += size;
      if (this.stats.bufferedBytes > this.stats.maxBufferedBytes) this.stats.maxBufferedBytes = this.stats.bufferedBytes;
    }
    if (queued && !this.#blocked) this.#wakeUp();
  }

  /**
   * The stored head moved by a commit published elsewhere (another process): the events are only
   * in the store, so read them through catch-up. While catching up, the read in flight may have
   * missed them: it is not taken as the last one (as after a discarded live item).
   */
  #onHead(nextSeq: number): void {
    const headSeq = nextSeq - 1;
    if (headSeq > this.stats.head) this.stats.head = headSeq;
    if (this.stats.mode === 'ended') return;
    if (this.stats.mode === 'live') {
      // Live, what was handed out and buffered is gap-free (see #onCommit): covered already?
      if (headSeq <= this.#known()) return;
      this.#remoteCatchUp();
      return;
    }
    if (headSeq <= this.#last) return;
    this.stats.remoteHeads++;
    this.#drops++;
  }

  /** The highest seq handed out or buffered (live: everything up to it is accounted for). */
  #known(): number {
    if (this.#queuePos >= this.#queue.length) return this.#last;
    return Math.max(this.#last, (this.#queue[this.#queue.length - 1] as I).cursor);
  }

  /** Live -> catch-up because the store has events this subscription got no batch for. */
  #remoteCatchUp(): void {
    this.stats.remoteHeads++;
    this.#drops++;
    // Buffered local items are in the store too: re-read everything after the cursor in order.
    this.#clearQueue();
    this.stats.mode = 'catch-up';
    this.#catchUp = this.source.catchUp(this.#last);
    this.#page = [];
    this.#pagePos = 0;
    if (!this.#blocked) this.#wakeUp();
  }

  /** The live buffer would exceed its limit: drop it and read the store from the cursor instead. */
  #overflow(): void {
    this.#clearQueue();
    this.#drops++;
    this.#discarding = true;
    if (this.stats.mode === 'live') {
      this.stats.mode = 'catch-up';
      this.stats.fallbacks++;
      this.#catchUp = this.source.catchUp(this.#last);
      this.#page = [];
      this.#pagePos = 0;
    }
    if (!this.#blocked) this.#wakeUp();
  }

  /** Drops buffered live items already covered by what was handed out (catch-up overlap). */
  #pruneQueue(): void {
    while (this.#queuePos < this.#queue.length && (this.#queue[this.#queuePos] as I).cursor <= this.#last) {
      this.stats.bufferedBytes -= this.#queueSizes[this.#queuePos] as number;
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
    this.#queue = [];
    this.#queueSizes = [];
    this.#queuePos = 0;
    this.stats.bufferedBytes = 0;
  }

  #wakeUp(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }
}
