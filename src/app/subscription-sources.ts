/**
 * The sources a subscription reads: catch-up episodes that page through the store after a cursor
 * (a notification is only a hint; consumers read the store by position), and the live items of
 * committed batches. Surface catch-up reads structural rows and event data only for rows that
 * change the surface; the surface state for replace deltas is folded from the start only when a
 * replace shows up (SurfaceTracker, the engine's own fold).
 */
import type { SessionEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import type { SurfaceDelta } from '../domain/session-engine.js';
import { SurfaceTracker } from '../domain/surface-fold.js';
import type { CommittedBatch } from './change-feed.js';
import type { SessionService } from './session-service.js';
import type { StructuralRow } from './store-port.js';
import { eventItemOfRead, eventItemsOf, surfaceItems, surfaceItemsOf, type EventItem, type Item, type SurfaceItem } from './subscription-items.js';

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
  // One plain object per subscriber whose functions are shared (no closures; spreading it works).
  return { app, sessionId, catchUp: surfaceCatchUp, live: surfaceItemsOf, caughtUp: caughtUpSurface } as SourceOf<SurfaceItem>;
}

/** A source object: its functions read the app and session from `this`. */
interface SourceOf<I extends Item> extends ItemSource<I> {
  readonly app: SessionService;
  readonly sessionId: string;
}

function caughtUpSurface(cursor: number): SurfaceItem {
  return { kind: 'caught-up', cursor };
}

function caughtUpEvents(cursor: number): EventItem {
  return { kind: 'caught-up', cursor };
}

function surfaceCatchUp(this: SourceOf<SurfaceItem>, after: number): CatchUp<SurfaceItem> {
  const { app, sessionId } = this;
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
}

/** Event subscriptions: catch-up reads pages of events. */
export function eventSource(app: SessionService, sessionId: string): ItemSource<EventItem> {
  return { app, sessionId, catchUp: eventCatchUp, live: eventItemsOf, caughtUp: caughtUpEvents } as SourceOf<EventItem>;
}

function eventCatchUp(this: SourceOf<EventItem>, after: number): CatchUp<EventItem> {
  const { app, sessionId } = this;
  let last = after;
  return {
    async next() {
      const page = await app.store.readEvents(sessionId, { fromSeq: last + 1, direction: 'forward', limit: PAGE_EVENTS });
      if (page.length === 0) return undefined;
      last = (page[page.length - 1] as SessionEvent).seq;
      return page.map(eventItemOfRead);
    },
  };
}

