/**
 * How subscription items are written (SubscribeSurface, SubscribeEvents): each item is encoded
 * once per options variant (include_messages x data_format x blob_refs) into a Buffer cached on
 * the item, so
 * every stream of a session writes the same bytes; cursor-only messages (caught-up, heartbeat) are
 * encoded once per cursor for all streams. See subscribe-handlers.ts.
 */
import { SubscribeEventsResponse, SubscribeSurfaceResponse } from '../../gen/palimpsest/v1/service.js';
import type { EventItem, Item, SurfaceItem } from '../app/subscription-items.js';
import { storedFormOf } from '../app/stored-form.js';
import { findBlobRefs } from '../domain/blobs.js';
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

/**
 * Encoding flags of a stream: bit 0 typed data, bit 1 include_messages (surface only), bit 2
 * blob_refs (issue #39: each event in its stored form, stored-form.ts; the data then in the json
 * form, a message holding a reference without its typed form).
 */
export const TYPED = 1;
export const MESSAGES = 2;
export const REFS = 4;
/** The cache variant of each flag combination (constant strings: nothing allocated per stream). */
const VARIANTS = ['j', 't', 'mj', 'mt', 'rj', 'rt', 'rmj', 'rmt'] as const;

function encodeSurface(it: SurfaceItem, sessionId: string, flags: number): Uint8Array {
  const includeMessages = (flags & MESSAGES) !== 0;
  const refs = (flags & REFS) !== 0;
  const typed = (flags & TYPED) !== 0 && !refs;
  const cursor = cursorField(it.cursor);
  let msg: SubscribeSurfaceResponse;
  switch (it.kind) {
    case 'append':
    case 'replace': {
      const kind: SubscribeSurfaceResponse['kind'] = it.kind === 'append'
        ? { $case: 'append', value: { seq: it.event.seq } }
        : { $case: 'replace', value: { start: it.start, end: it.end, seq: it.event.seq, shadowedSeqs: [...it.shadowed] } };
      let message: SubscribeSurfaceResponse['message'];
      const event = refs ? storedFormOf(it.event) : it.event;
      if (includeMessages) {
        const m = projectMessage(event, sessionId);
        if (m) {
          const typedMessage = (flags & TYPED) !== 0 && !(event !== it.event && findBlobRefs(m).length > 0);
          message = { seq: event.seq, messageJson: JSON.stringify(m), message: typedMessage ? messageFromJson(m) : undefined, tokens: estimateMessageTokens(m) };
        }
      }
      msg = { cursor, kind, event: eventToProto(event, typed ? 'typed' : 'json'), message };
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
  const refs = (flags & REFS) !== 0;
  const typed = (flags & TYPED) !== 0 && !refs;
  return SubscribeEventsResponse.encode(it.kind === 'event'
    ? { cursor: it.cursor, kind: { $case: 'event', value: eventToProto(refs ? storedFormOf(it.event) : it.event, typed ? 'typed' : 'json') } }
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
  variants: VARIANTS,
  encode: encodeSurface,
  caughtUp: new CursorMessage((cursor) => encodeSurface({ kind: 'caught-up', cursor }, '', 0)),
  heartbeat: new CursorMessage((cursor) => SubscribeSurfaceResponse.encode({
    cursor: cursorField(cursor), kind: { $case: 'heartbeat', value: {} }, event: undefined, message: undefined,
  }).finish()),
};

export const EVENTS: Codec<EventItem> = {
  variants: VARIANTS,
  encode: encodeEvent,
  caughtUp: new CursorMessage((cursor) => encodeEvent({ kind: 'caught-up', cursor }, '', 0)),
  heartbeat: new CursorMessage((cursor) => SubscribeEventsResponse.encode({ cursor: cursorField(cursor), kind: { $case: 'heartbeat', value: {} } }).finish()),
};

/** The first item of a snapshot subscription (shared function). */
export function surfaceSnapshot(seqs: readonly number[], cursor: number): SurfaceItem {
  return { kind: 'snapshot', seqs, cursor };
}
