/**
 * How subscription items are written (SubscribeSurface, SubscribeEvents): each item is encoded
 * once per options variant (include_messages x data_format) into a Buffer cached on the item, so
 * every stream of a session writes the same bytes; cursor-only messages (caught-up, heartbeat) are
 * encoded once per cursor for all streams. See subscribe-handlers.ts.
 */
import { SubscribeEventsResponse, SubscribeSurfaceResponse } from '../../gen/palimpsest/v1/service.js';
import type { EventItem, Item, SurfaceItem } from '../app/subscription-items.js';
import { projectMessage } from '../domain/derive.js';
import { estimateMessageTokens } from '../domain/token-estimate.js';
import { eventToProto } from './convert.js';
import { messageFromJson } from './typed-data.js';

/** Per-item encoded bytes, one entry per options variant; items shared by subscribers share this. */
const encoded = new WeakMap<object, Map<string, Buffer>>();
// A live item is encoded for many streams in a row: remember the last lookup in front of the maps.
let lastItem: object | undefined;
let lastVariant = '';
let lastBytes: Buffer | undefined;

export function cached<I extends Item>(item: I, codec: Codec<I>, sessionId: string, flags: number): Buffer {
  const variant = codec.variants[flags] as string;
  if (item === lastItem && variant === lastVariant) return lastBytes as Buffer;
  const b = lookup(item, variant, codec, sessionId, flags);
  lastItem = item;
  lastVariant = variant;
  lastBytes = b;
  return b;
}

function lookup<I extends Item>(item: I, variant: string, codec: Codec<I>, sessionId: string, flags: number): Buffer {
  let m = encoded.get(item);
  if (!m) {
    m = new Map();
    encoded.set(item, m);
  }
  let b = m.get(variant);
  if (!b) {
    const bytes = codec.encode(item, sessionId, flags);
    b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    m.set(variant, b);
  }
  return b;
}

function cursorField(c: number): number | undefined {
  return c < 0 ? undefined : c;
}

/** Encoding flags of a surface stream: bit 0 typed data, bit 1 include_messages. */
export const TYPED = 1;
export const MESSAGES = 2;
/** The cache variant of each flag combination (constant strings: nothing allocated per stream). */
const SURFACE_VARIANTS = ['j', 't', 'mj', 'mt'] as const;
const EVENT_VARIANTS = ['j', 't'] as const;

function encodeSurface(it: SurfaceItem, sessionId: string, flags: number): Uint8Array {
  const includeMessages = (flags & MESSAGES) !== 0;
  const typed = (flags & TYPED) !== 0;
  const cursor = cursorField(it.cursor);
  let msg: SubscribeSurfaceResponse;
  switch (it.kind) {
    case 'append':
    case 'replace': {
      const kind: SubscribeSurfaceResponse['kind'] = it.kind === 'append'
        ? { $case: 'append', value: { seq: it.event.seq } }
        : { $case: 'replace', value: { start: it.start, end: it.end, seq: it.event.seq, shadowedSeqs: [...it.shadowed] } };
      let message: SubscribeSurfaceResponse['message'];
      if (includeMessages) {
        const m = projectMessage(it.event, sessionId);
        if (m) message = { seq: it.event.seq, messageJson: JSON.stringify(m), message: typed ? messageFromJson(m) : undefined, tokens: estimateMessageTokens(m) };
      }
      msg = { cursor, kind, event: eventToProto(it.event, typed ? 'typed' : 'json'), message };
      break;
    }
    case 'checkpoint':
      msg = { cursor, kind: { $case: 'checkpoint', value: {} }, event: undefined, message: undefined };
      break;
    case 'snapshot':
      msg = { cursor, kind: { $case: 'snapshot', value: { seqs: [...it.seqs] } }, event: undefined, message: undefined };
      break;
    case 'caught-up':
      msg = { cursor, kind: { $case: 'caughtUp', value: {} }, event: undefined, message: undefined };
      break;
  }
  return SubscribeSurfaceResponse.encode(msg).finish();
}

function encodeEvent(it: EventItem, _sessionId: string, flags: number): Uint8Array {
  const typed = (flags & TYPED) !== 0;
  return SubscribeEventsResponse.encode(it.kind === 'event'
    ? { cursor: it.cursor, kind: { $case: 'event', value: eventToProto(it.event, typed ? 'typed' : 'json') } }
    : { cursor: cursorField(it.cursor), kind: { $case: 'caughtUp', value: {} } }).finish();
}

/**
 * The last encoding of a message that carries only a cursor (caught-up, heartbeat): thousands of
 * streams of one session send it at the same cursor, so it is encoded once, not per stream, and
 * such per-subscriber items stay out of the per-item cache.
 */
export class CursorMessage {
  #cursor = Number.NaN;
  #bytes: Buffer | undefined;

  constructor(private readonly encode: (cursor: number) => Uint8Array) {}

  get(cursor: number): Buffer {
    if (cursor !== this.#cursor || !this.#bytes) {
      const u = this.encode(cursor);
      this.#bytes = Buffer.from(u.buffer, u.byteOffset, u.byteLength);
      this.#cursor = cursor;
    }
    return this.#bytes;
  }
}

/** How one kind of subscription is written: shared by all its streams. */
export interface Codec<I extends Item> {
  readonly variants: readonly string[];
  encode(it: I, sessionId: string, flags: number): Uint8Array;
  readonly caughtUp: CursorMessage;
  readonly heartbeat: CursorMessage;
}

export const SURFACE: Codec<SurfaceItem> = {
  variants: SURFACE_VARIANTS,
  encode: encodeSurface,
  caughtUp: new CursorMessage((cursor) => encodeSurface({ kind: 'caught-up', cursor }, '', 0)),
  heartbeat: new CursorMessage((cursor) => SubscribeSurfaceResponse.encode({
    cursor: cursorField(cursor), kind: { $case: 'heartbeat', value: {} }, event: undefined, message: undefined,
  }).finish()),
};

export const EVENTS: Codec<EventItem> = {
  variants: EVENT_VARIANTS,
  encode: encodeEvent,
  caughtUp: new CursorMessage((cursor) => encodeEvent({ kind: 'caught-up', cursor }, '', 0)),
  heartbeat: new CursorMessage((cursor) => SubscribeEventsResponse.encode({ cursor: cursorField(cursor), kind: { $case: 'heartbeat', value: {} } }).finish()),
};

/** The first item of a snapshot subscription (shared function). */
export function surfaceSnapshot(seqs: readonly number[], cursor: number): SurfaceItem {
  return { kind: 'snapshot', seqs, cursor };
}
