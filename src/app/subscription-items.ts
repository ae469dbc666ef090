/**
 * What subscriptions hand out, before any transport encoding: surface items (append, replace
 * with server-computed shadowed seqs, checkpoint, snapshot, caught-up) and event items. Live
 * items are built once per committed batch and shared by every subscriber of the session
 * (memoized on the batch object), so the transport can encode each once.
 */
import type { SessionEvent } from '../domain/event.js';
import type { SurfaceDelta } from '../domain/session-engine.js';
import type { CommittedBatch } from './change-feed.js';

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


const readMemo = new WeakMap<SessionEvent, EventItem>();

/**
 * The item of an event read from the store, shared by every subscriber that read the same event
 * object: a commit made on another replica wakes every subscription of the session, their
 * identical reads share one query and its event objects (the PostgreSQL store's coalesced reads),
 * so the item, and with it the bytes the transport caches on it, is built once, not once per
 * stream.
 */
export function eventItemOfRead(e: SessionEvent): EventItem {
  let item = readMemo.get(e);
  if (item === undefined) {
    item = { kind: 'event', cursor: e.seq, event: e };
    readMemo.set(e, item);
  }
  return item;
}
