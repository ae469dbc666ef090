/**
 * The server side of subscriptions (SubscribeSurface, SubscribeEvents; entries of the handler table): request checks, encoding,
 * backpressure, heartbeats and end-of-stream signals. The catch-up/live state machine is
 * src/app/subscriptions.ts.
 *
 * - Encoding once: live items are shared by every subscriber of a session (memoized per committed
 *   batch), and each is encoded once per options variant (include_messages x data_format) into a
 *   Buffer cached on the item. The service definition is registered with response serializers that
 *   pass Buffers through (grpc/pass-through.ts), so every stream is written the same bytes.
 * - One object per stream (`SubscriberStream`, a ServerStream from server-stream.ts): the
 *   subscription's consumer, its options, its heartbeat schedule entry and its entry in the
 *   open-stream set, with shared methods and no closures; an idle caught-up stream holds that
 *   object, its Subscription (which is its own feed listener) and nothing pending (no promise,
 *   timer or suspended generator frame).
 * - Backpressure: the stream pulls the subscription (`step()`) only while `write()` returns true;
 *   after false it waits for `drain`. Meanwhile live items accumulate in the subscription's bounded buffer; when
 *   that would exceed `config.subscriberBufferBytes` the buffer is dropped and the subscriber is
 *   switched back to catch-up from the store at its last cursor (then a new `caught_up`, then
 *   live). grpc-js itself holds at most its writable high-water mark (16 messages) per stream.
 * - Fast path: the stream registers itself as the subscription's direct sink, so a live subscriber
 *   that is idle (nothing buffered, stream writable) gets each committed batch written from the
 *   feed callback itself (the fan-out is one loop over the session's listeners writing the same
 *   Buffer: no promise, closure or object per delivery); when `write()` returns false there, the
 *   subscription buffers the rest and its consumer stays parked until `drain` (`Subscription.resume()`).
 * - Heartbeats: one schedule for every stream of the server (`Heartbeats`: one timer, a min-heap
 *   by due time). Per-write cost is the write itself: writes only record their time; a stream
 *   visited before its interval has passed since its last write is put back at that time, so each
 *   stream is visited exactly when a timer of its own would have fired. The lag histogram
 *   observes one delivery in 16 per stream.
 * - Signals: `caught_up` when switching to live; a heartbeat after `heartbeat_interval_ms` without
 *   a write (not while waiting for drain); SESSION_NOT_FOUND when the session is deleted;
 *   UNAVAILABLE/SERVER_SHUTDOWN with ErrorInfo metadata `cursor` at shutdown.
 * - A cancelled or disconnected call closes its subscription at once (feed listener, buffers,
 *   heartbeat schedule entry, open-stream set).
 * - Revocation: each stream remembers the hash of the token that opened it; after a token file
 *   reload (`recheck`), a stream whose token is gone ends with UNAUTHENTICATED, and one whose
 *   token lost the read permission (or now names another tenant) with PERMISSION_DENIED.
 */
import {
  DataFormat, SubscribeEventsResponse, SubscribeSurfaceResponse,
  type SubscribeEventsRequest, type SubscribeSurfaceRequest,
} from '../../gen/palimpsest/v1/service.js';
import type { SessionService } from '../app/session-service.js';
import {
  IDLE, NO_CURSOR, Subscription, eventSource, surfaceSource,
  type EventItem, type Item, type SubscriptionConsumer, type SubscriptionOptions, type SubscriptionStats, type SurfaceItem,
} from '../app/subscriptions.js';
import { projectMessage } from '../domain/derive.js';
import { DomainError } from '../domain/errors.js';
import type { ServerConfig } from './config.js';
import { eventToProto } from './convert.js';
import type { Permission } from './permissions.js';
import { grants } from './auth.js';
import { serverStream, type HandlerTable, type RpcContext, type ServerSink } from './rpc/handler-table.js';
import type { Metrics } from './metrics.js';
import { MAX_TIMER_MS, ServerStream } from './server-stream.js';
import { messageFromJson } from './typed-data.js';
import { estimateMessageTokens } from '../domain/token-estimate.js';

/** Minimum heartbeat interval a client may ask for, ms. */
export const MIN_HEARTBEAT_MS = 100;

/** The lag histogram observes one delivery in LAG_SAMPLE_MASK + 1 per stream. */
const LAG_SAMPLE_MASK = 15;

/** Per-item encoded bytes, one entry per options variant; items shared by subscribers share this. */
const encoded = new WeakMap<object, Map<string, Buffer>>();
// A live item is encoded for many streams in a row: remember the last lookup in front of the maps.
let lastItem: object | undefined;
let lastVariant = '';
let lastBytes: Buffer | undefined;

function cached<I extends Item>(item: I, codec: Codec<I>, sessionId: string, flags: number): Buffer {
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
const TYPED = 1;
const MESSAGES = 2;
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
class CursorMessage {
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
interface Codec<I extends Item> {
  readonly variants: readonly string[];
  encode(it: I, sessionId: string, flags: number): Uint8Array;
  readonly caughtUp: CursorMessage;
  readonly heartbeat: CursorMessage;
}

const SURFACE: Codec<SurfaceItem> = {
  variants: SURFACE_VARIANTS,
  encode: encodeSurface,
  caughtUp: new CursorMessage((cursor) => encodeSurface({ kind: 'caught-up', cursor }, '', 0)),
  heartbeat: new CursorMessage((cursor) => SubscribeSurfaceResponse.encode({
    cursor: cursorField(cursor), kind: { $case: 'heartbeat', value: {} }, event: undefined, message: undefined,
  }).finish()),
};

const EVENTS: Codec<EventItem> = {
  variants: EVENT_VARIANTS,
  encode: encodeEvent,
  caughtUp: new CursorMessage((cursor) => encodeEvent({ kind: 'caught-up', cursor }, '', 0)),
  heartbeat: new CursorMessage((cursor) => SubscribeEventsResponse.encode({ cursor: cursorField(cursor), kind: { $case: 'heartbeat', value: {} } }).finish()),
};

/** The first item of a snapshot subscription (shared function). */
function surfaceSnapshot(seqs: readonly number[], cursor: number): SurfaceItem {
  return { kind: 'snapshot', seqs, cursor };
}

/** One open stream, for shutdown and tests. */
export interface ActiveSubscription {
  readonly sessionId: string;
  /** SHA-256 of the token that opened the stream ('' without auth). */
  readonly credential: string;
  /** The tenant the stream was authorized for ('' without auth). */
  readonly tenant: string;
  /** A snapshot of the subscription's counters (undefined until it is open). */
  readonly stats: SubscriptionStats | undefined;
  /** Ends the stream with an error (mapped to its status). */
  end(err: unknown): void;
  /** The cursor to resume from. */
  cursor(): number;
}

/** What `subscriptionStreams` returns (the ServerExtensions.streams shape plus introspection). */
export interface SubscriptionStreams {
  readonly handlers: HandlerTable;
  /** Ends every open stream with UNAVAILABLE / SERVER_SHUTDOWN and its resume cursor. */
  shutdown(): void;
  /** The open streams. */
  readonly active: ReadonlySet<ActiveSubscription>;
  /** Streams in the shared heartbeat schedule (tests: back to 0 once every stream ended). */
  readonly heartbeatsScheduled: number;
  /**
   * Re-checks every open stream's token after the token file was reloaded: `lookup` gives the
   * token's current entry by hash (undefined = revoked). Returns the number of streams ended.
   */
  recheck(lookup: (credential: string) => { readonly tenant: string; readonly permissions: readonly Permission[] } | undefined): number;
}

const live = new WeakMap<SessionService, SubscriptionStreams>();

/** The subscription streams serving `app` (tests read internal stats through it). */
export function streamsOf(app: SessionService): SubscriptionStreams | undefined {
  return live.get(app);
}

/** What every stream of one `subscriptionStreams` shares (one object, referenced by each stream). */
interface Hub {
  readonly config: ServerConfig;
  readonly metrics: Metrics;
  readonly active: Set<ActiveSubscription>;
  readonly heartbeats: Heartbeats;
}

/**
 * The schedule's clock: whole milliseconds of performance.now() (small integers stay unboxed in
 * the stream objects; a double field would be one more heap object per stream).
 */
function nowMs(): number {
  return Math.floor(performance.now());
}

/** A stream in the heartbeat schedule. */
interface Beating {
  /** When the stream is to be looked at next (`nowMs()` clock). */
  dueAt: number;
  /** Position in the schedule's heap (-1 = not scheduled). */
  heapIndex: number;
  /** Looked at (dueAt passed): the next time to look, or -1 to leave the schedule. */
  beat(now: number): number;
}

/**
 * The heartbeat schedule of every stream of a server: one timer for all, armed at the earliest
 * due time of a binary min-heap of streams (O(log n) per add, remove and visit; nothing per
 * write: writes only record their time, and a stream visited before its interval has passed since
 * its last write is put back at that time). A stream's visits are exactly those its own timer had.
 */
export class Heartbeats {
  readonly #heap: Beating[] = [];
  #timer: NodeJS.Timeout | undefined;
  #armedAt = Infinity;

  /** Streams scheduled. */
  get size(): number {
    return this.#heap.length;
  }

  /** Schedules `s` to be visited at `dueAt` (it must not be scheduled already). */
  add(s: Beating, dueAt: number): void {
    s.dueAt = dueAt;
    s.heapIndex = this.#heap.length;
    this.#heap.push(s);
    this.#up(s.heapIndex);
    this.#arm();
  }

  /** Takes `s` out of the schedule (no-op when not in it). */
  remove(s: Beating): void {
    const i = s.heapIndex;
    if (i < 0 || this.#heap[i] !== s) return;
    s.heapIndex = -1;
    const last = this.#heap.pop() as Beating;
    if (last !== s) {
      this.#heap[i] = last;
      last.heapIndex = i;
      this.#down(i);
      this.#up(last.heapIndex);
    }
    if (this.#heap.length === 0 && this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#armedAt = Infinity;
    }
  }

  readonly #fire = (): void => {
    this.#timer = undefined;
    this.#armedAt = Infinity;
    const now = nowMs();
    for (let top = this.#heap[0]; top !== undefined && top.dueAt <= now; top = this.#heap[0]) {
      const next = top.beat(now);
      if (top.heapIndex !== 0) continue; // it left the schedule while beating
      if (next < 0) {
        this.remove(top);
        continue;
      }
      top.dueAt = next;
      this.#down(0);
    }
    this.#arm();
  };

  #arm(): void {
    const top = this.#heap[0];
    if (top === undefined || top.dueAt >= this.#armedAt) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#armedAt = top.dueAt;
    // setTimeout fires a longer delay at once (with a warning): wait in steps of at most its limit.
    this.#timer = setTimeout(this.#fire, Math.min(MAX_TIMER_MS, Math.max(0, top.dueAt - performance.now())));
    this.#timer.unref();
  }

  #up(i: number): void {
    const h = this.#heap;
    const s = h[i] as Beating;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const ps = h[p] as Beating;
      if (ps.dueAt <= s.dueAt) break;
      h[i] = ps;
      ps.heapIndex = i;
      i = p;
    }
    h[i] = s;
    s.heapIndex = i;
  }

  #down(i: number): void {
    const h = this.#heap;
    const n = h.length;
    const s = h[i] as Beating;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && (h[r] as Beating).dueAt < (h[l] as Beating).dueAt ? r : l;
      const cs = h[c] as Beating;
      if (cs.dueAt >= s.dueAt) break;
      h[i] = cs;
      cs.heapIndex = i;
      i = c;
    }
    h[i] = s;
    s.heapIndex = i;
  }
}

/**
 * One SubscribeSurface / SubscribeEvents stream: the stream adapter (server-stream.ts:
 * backpressure, cancellation, deadline), the subscription's consumer (pulls with `step()` while
 * writable, the fast path `deliver`, `wake` after an idle step), its options object (`sizeOf`),
 * its heartbeat schedule entry and its entry in the open-stream set. Everything per stream lives
 * in this one object and its Subscription: no closures, no timer, no suspended frame while idle.
 */
class SubscriberStream<I extends Item> extends ServerStream<unknown> implements ActiveSubscription, SubscriptionConsumer<I>, SubscriptionOptions<I>, Beating {
  readonly credential: string;
  readonly tenant: string;
  sub: Subscription<I> | undefined;
  lastWrite = 0;
  deliveries = 0;
  dueAt = 0;
  heapIndex = -1;
  #stepping = false;
  #reading = false;

  constructor(
    ctx: RpcContext,
    sink: ServerSink<unknown>,
    private readonly hub: Hub,
    readonly sessionId: string,
    private readonly interval: number,
    private readonly codec: Codec<I>,
    private readonly flags: number,
    readonly after: number | undefined,
    readonly snapshot: ((seqs: readonly number[], cursor: number) => I) | undefined,
  ) {
    super(ctx, sink);
    this.credential = ctx.credential;
    this.tenant = ctx.caller.tenant;
    hub.active.add(this);
    hub.metrics.subscriptions.inc();
  }

  /** Subscription option: the live buffer limit. */
  get bufferBytes(): number {
    return this.hub.config.subscriberBufferBytes;
  }

  get stats(): SubscriptionStats | undefined {
    return this.sub?.stats;
  }

  cursor(): number {
    return this.sub?.cursor ?? NO_CURSOR;
  }

  /** Opens the subscription (`open` checks the request), then writes what it hands out. */
  async start(shuttingDown: boolean, open: () => Promise<Subscription<I>>): Promise<void> {
    try {
      if (shuttingDown) throw new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; resubscribe to another replica or later', {});
      const sub = await open();
      if (this.ended) {
        sub.close();
        return;
      }
      this.sub = sub;
      this.lastWrite = nowMs();
      this.hub.heartbeats.add(this, this.lastWrite + this.interval);
      sub.setDirect(this);
      this.#pump();
    } catch (e) {
      this.end(e);
    }
  }

  /** Encoded bytes of an item (shared items are encoded once per variant). */
  encode(it: I): Buffer {
    if (it.kind === 'caught-up') return this.codec.caughtUp.get(it.cursor);
    if (it.kind === 'snapshot') {
      // The subscriber's own first message: not worth a cache entry.
      const u = this.codec.encode(it, this.sessionId, this.flags);
      return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
    }
    return cached(it, this.codec, this.sessionId, this.flags);
  }

  /** Subscription option: the size of an item as sent. */
  sizeOf(it: I): number {
    return this.encode(it).length;
  }

  /** Fast path from the subscription (see the module comment); false = stop writing. */
  deliver(it: I): boolean {
    try {
      const more = this.#send(this.encode(it));
      this.#sampleLag();
      return more;
    } catch (e) {
      this.end(e);
      return false;
    }
  }

  /** The subscription has something again after an idle step. */
  wake(): void {
    this.#pump();
  }

  /** Heartbeat schedule visit: a heartbeat after `interval` ms without a write (not while blocked). */
  beat(now: number): number {
    const sub = this.sub;
    if (this.ended || !sub) return -1;
    if (this.blocked) return now + this.interval;
    const idle = now - this.lastWrite;
    if (idle < this.interval) return this.lastWrite + this.interval;
    this.#send(this.codec.heartbeat.get(sub.cursor));
    return now + this.interval;
  }

  protected override onDrained(): void {
    this.sub?.resume();
    this.#pump();
  }

  protected override onEnded(): void {
    this.sub?.close();
    this.hub.heartbeats.remove(this);
    this.hub.active.delete(this);
    this.hub.metrics.subscriptions.dec();
  }

  /** Pulls and writes while writable; parks on an idle step, waits out a catch-up read. */
  #pump(): void {
    const sub = this.sub;
    if (!sub || this.#stepping || this.#reading) return;
    this.#stepping = true;
    try {
      while (!this.ended && !this.blocked) {
        const r = sub.step();
        if (r === IDLE) break;
        if (r === undefined) {
          this.end();
          break;
        }
        if (r instanceof Promise) {
          this.#reading = true;
          // The read settles the subscription's state either way (a failure is thrown by the next step).
          const again = (): void => {
            this.#reading = false;
            this.#pump();
          };
          void r.then(again, again);
          break;
        }
        this.#send(this.encode(r));
        this.#sampleLag();
      }
    } catch (e) {
      this.end(e);
    } finally {
      this.#stepping = false;
    }
  }

  #send(b: Buffer): boolean {
    this.lastWrite = nowMs();
    return this.write(b);
  }

  #sampleLag(): void {
    const sub = this.sub;
    if ((++this.deliveries & LAG_SAMPLE_MASK) === 0 && sub && sub.head >= 0) {
      this.hub.metrics.subscriptionLag.observe(Math.max(0, sub.head - sub.cursor));
    }
  }
}

/** Builds the SubscribeSurface / SubscribeEvents handlers. */
export function subscriptionStreams(app: SessionService, config: ServerConfig, metrics: Metrics): SubscriptionStreams {
  const active = new Set<ActiveSubscription>();
  let shuttingDown = false;
  const heartbeats = new Heartbeats();
  const hub: Hub = { config, metrics, active, heartbeats };

  function heartbeatMs(requested: number): number {
    return requested === 0 ? config.heartbeatMs : Math.max(MIN_HEARTBEAT_MS, requested);
  }

  const handlers: HandlerTable = {
    subscribeSurface: serverStream<SubscribeSurfaceRequest, unknown>('read', (ctx, r, sink) => {
      const flags = (r.dataFormat === DataFormat.DATA_FORMAT_TYPED ? TYPED : 0) | (r.includeMessages ? MESSAGES : 0);
      const s = new SubscriberStream<SurfaceItem>(ctx, sink, hub, r.sessionId, heartbeatMs(r.heartbeatIntervalMs),
        SURFACE, flags, r.afterSeq, r.snapshot ? surfaceSnapshot : undefined);
      void s.start(shuttingDown, async () => {
        if (!r.sessionId) throw new DomainError('INVALID_ARGUMENT', 'session_id is required', { field: 'session_id' });
        // Store reads and the feed use the tenant's storage key; the client id stays the id.
        return Subscription.open(app, ctx.caller, r.sessionId, surfaceSource(app, app.storageKey(ctx.caller, r.sessionId)), s, r.waitForCreate ? () => !s.ended : undefined);
      });
    }),
    subscribeEvents: serverStream<SubscribeEventsRequest, unknown>('read', (ctx, r, sink) => {
      const flags = r.dataFormat === DataFormat.DATA_FORMAT_TYPED ? TYPED : 0;
      const s = new SubscriberStream<EventItem>(ctx, sink, hub, r.sessionId, heartbeatMs(r.heartbeatIntervalMs),
        EVENTS, flags, r.afterSeq, undefined);
      void s.start(shuttingDown, async () => {
        if (!r.sessionId) throw new DomainError('INVALID_ARGUMENT', 'session_id is required', { field: 'session_id' });
        return Subscription.open(app, ctx.caller, r.sessionId, eventSource(app, app.storageKey(ctx.caller, r.sessionId)), s, r.waitForCreate ? () => !s.ended : undefined);
      });
    }),
  };

  const streams: SubscriptionStreams = {
    handlers,
    active,
    get heartbeatsScheduled() {
      return heartbeats.size;
    },
    recheck(lookup) {
      let ended = 0;
      for (const s of [...active]) {
        if (s.credential === '') continue;
        const token = lookup(s.credential);
        let err: DomainError | undefined;
        if (!token) {
          err = new DomainError('UNAUTHENTICATED', 'the bearer token of this stream was revoked (token file reloaded); resubscribe with a valid token', {});
        } else if (!grants(token, 'read')) {
          err = new DomainError('PERMISSION_DENIED', 'the bearer token of this stream no longer has the read permission (token file reloaded)', { permission: 'read' });
        } else if (token.tenant !== s.tenant) {
          err = new DomainError('PERMISSION_DENIED', 'the bearer token of this stream now belongs to another tenant (token file reloaded); resubscribe', {});
        }
        if (!err) continue;
        s.end(err);
        ended++;
      }
      return ended;
    },
    shutdown() {
      shuttingDown = true;
      for (const s of [...active]) {
        const c = s.cursor();
        s.end(new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; resubscribe with after_seq = the cursor in the error details',
          c >= 0 ? { cursor: String(c) } : {}));
      }
    },
  };
  live.set(app, streams);
  return streams;
}
