/**
 * The wire form of SubscribeSessions messages (issue #35), encoded once and shared by every stream
 * (the service is registered with pass-through serializers, grpc/pass-through.ts):
 *
 * - A change (`SessionChange`, with its own `position`) is encoded once per feed record; a lone
 *   change's message (`change`) and every batch (`changes`, SubscribeSessionsRequest.batch) are
 *   spliced from those bytes (a repeated message field is its elements' bytes one after another),
 *   so a batch costs a copy, not an encoding, per change.
 * - The last batch is kept: the streams of one tenant without a selector get the same changes from
 *   one store read, so all but the first reuse its bytes.
 */
import type { FeedItem, SessionChange as Change } from '../app/feed-subscription.js';
import { SessionChange, SessionChangeKind, SubscribeSessionsResponse } from '../../gen/palimpsest/v1/service.js';

const KINDS: Record<string, SessionChangeKind> = {
  created: SessionChangeKind.SESSION_CHANGE_KIND_CREATED,
  deleted: SessionChangeKind.SESSION_CHANGE_KIND_DELETED,
  labels_changed: SessionChangeKind.SESSION_CHANGE_KIND_LABELS_CHANGED,
  appended: SessionChangeKind.SESSION_CHANGE_KIND_APPENDED,
};

/** At most this many changes per `changes` message (SubscribeSessionsRequest.batch). */
export const MAX_BATCH_CHANGES = 256;
/** A batch stops growing once its changes reach this many bytes. */
export const MAX_BATCH_BYTES = 256 * 1024;

function changeToProto(it: Change): SessionChange {
  return {
    kind: KINDS[it.change] ?? SessionChangeKind.SESSION_CHANGE_KIND_UNSPECIFIED,
    sessionId: it.sessionId,
    headSeq: it.headSeq,
    eventCount: it.eventCount,
    surfaceLength: it.surfaceLength,
    eventTypes: [...it.eventTypes],
    labels: { ...it.labels },
    previousLabels: { ...(it.previousLabels ?? {}) },
    createdAt: it.createdAt,
    time: it.time,
    position: it.position,
  };
}

/** One feed item as a stream message (one change per message). */
export function feedItemToProto(it: FeedItem): SubscribeSessionsResponse {
  if (it.kind === 'caught-up') return { position: it.position, kind: { $case: 'caughtUp', value: {} } };
  return { position: it.position, kind: { $case: 'change', value: changeToProto(it) } };
}

function toBuffer(u: Uint8Array): Buffer {
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

function varintLength(n: number): number {
  let len = 1;
  for (let v = n; v >= 128; v = Math.floor(v / 128)) len++;
  return len;
}

function putVarint(buf: Buffer, at: number, n: number): number {
  let v = n;
  let i = at;
  while (v >= 128) {
    buf[i++] = (v % 128) | 128;
    v = Math.floor(v / 128);
  }
  buf[i++] = v;
  return i;
}

/** SubscribeSessionsResponse field 1 (position, varint). */
const TAG_POSITION = 0x08;
/** SubscribeSessionsResponse field 2 (change, length-delimited). */
const TAG_CHANGE = 0x12;
/** SubscribeSessionsResponse field 5 (changes, length-delimited). */
const TAG_CHANGES = 0x2a;
/** SessionChanges field 1 (changes, repeated, length-delimited). */
const TAG_ITEM = 0x0a;

interface Encoded {
  /** The SessionChange message. */
  readonly change: Buffer;
  /** The one-change SubscribeSessionsResponse (`change`). */
  readonly message: Buffer;
}

/** The encodings of a shared change item (one object per feed record for every subscriber). */
const encoded = new WeakMap<object, Encoded>();
let lastItem: object | undefined;
let lastEncoded: Encoded | undefined;

function encodingOf(it: Change): Encoded {
  if (it === lastItem) return lastEncoded as Encoded;
  let e = encoded.get(it);
  if (e === undefined) {
    const change = toBuffer(SessionChange.encode(changeToProto(it)).finish());
    const message = Buffer.allocUnsafe(1 + varintLength(it.position) + 1 + varintLength(change.length) + change.length);
    let at = putVarint(message, (message[0] = TAG_POSITION, 1), it.position);
    message[at++] = TAG_CHANGE;
    at = putVarint(message, at, change.length);
    change.copy(message, at);
    e = { change, message };
    encoded.set(it, e);
  }
  lastItem = it;
  lastEncoded = e;
  return e;
}

/** The one-change message of a shared change item (encoded once, the same Buffer for every stream). */
export function encodeChange(it: Change): Buffer {
  return encodingOf(it).message;
}

/** Bytes a change adds to a batch. */
export function changeSize(it: Change): number {
  const n = encodingOf(it).change.length;
  return 1 + varintLength(n) + n;
}

let lastBatch: readonly Change[] = [];
let lastBatchBytes: Buffer | undefined;

function sameBatch(items: readonly Change[]): boolean {
  if (items.length !== lastBatch.length) return false;
  for (let i = 0; i < items.length; i++) if (items[i] !== lastBatch[i]) return false;
  return true;
}

/** A `changes` message of `items` (position order; `position` = the last one's). */
export function encodeChanges(items: readonly Change[]): Buffer {
  if (lastBatchBytes !== undefined && sameBatch(items)) return lastBatchBytes;
  let inner = 0;
  for (const it of items) inner += changeSize(it);
  const last = items[items.length - 1] as Change;
  const out = Buffer.allocUnsafe(1 + varintLength(last.position) + 1 + varintLength(inner) + inner);
  out[0] = TAG_POSITION;
  let at = putVarint(out, 1, last.position);
  out[at++] = TAG_CHANGES;
  at = putVarint(out, at, inner);
  for (const it of items) {
    const c = encodingOf(it).change;
    out[at++] = TAG_ITEM;
    at = putVarint(out, at, c.length);
    at += c.copy(out, at);
  }
  lastBatch = items;
  lastBatchBytes = out;
  return out;
}

/** The last encoding of a message carrying only a position (caught-up, heartbeat): many streams send the same one. */
export class PositionMessage {
  #position = Number.NaN;
  #bytes: Buffer | undefined;

  constructor(private readonly kind: 'caughtUp' | 'heartbeat') {}

  get(position: number): Buffer {
    if (position !== this.#position || this.#bytes === undefined) {
      this.#bytes = toBuffer(SubscribeSessionsResponse.encode({ position, kind: { $case: this.kind, value: {} } }).finish());
      this.#position = position;
    }
    return this.#bytes;
  }
}
