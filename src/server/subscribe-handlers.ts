/**
 * The server side of subscriptions (SubscribeSurface, SubscribeEvents; entries of the handler table): request checks, encoding,
 * backpressure, heartbeats (subscribe-heartbeats.ts) and end-of-stream signals; the encoding is
 * subscribe-codecs.ts. The catch-up/live state machine is src/app/subscription.ts.
 *
 * - Encoding once: live items are shared by every subscriber of a session (memoized per committed
 *   batch), and each is encoded once per options variant (include_messages x data_format x
 *   blob_refs) into a
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
import { DataFormat, type SubscribeEventsRequest, type SubscribeSurfaceRequest } from '../../gen/palimpsest/v1/service.js';
import type { SessionService } from '../app/session-service.js';
import { IDLE, Subscription, type SubscriptionConsumer, type SubscriptionOptions, type SubscriptionStats } from '../app/subscription.js';
import type { EventItem, Item, SurfaceItem } from '../app/subscription-items.js';
import { NO_CURSOR } from '../app/subscription-items.js';
import { eventSource, surfaceSource } from '../app/subscription-sources.js';
import { DomainError } from '../domain/errors.js';
import type { ServerConfig } from './config.js';
import type { Permission } from './permissions.js';
import { grants } from './auth.js';
import { serverStream, type HandlerTable, type RpcContext, type ServerSink } from './rpc/handler-table.js';
import type { Metrics } from './metrics.js';
import { ServerStream } from './server-stream.js';
import { EVENTS, MESSAGES, REFS, SURFACE, TYPED, cached, surfaceSnapshot, type Codec } from './subscribe-codecs.js';
import { Heartbeats, nowMs, type Beating } from './subscribe-heartbeats.js';

/** Minimum heartbeat interval a client may ask for, ms. */
export const MIN_HEARTBEAT_MS = 100;

/** The lag histogram observes one delivery in LAG_SAMPLE_MASK + 1 per stream. */
const LAG_SAMPLE_MASK = 15;

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

/** What `subscriptionStreams` returns (the ServerExtensions.streams shape plus introspection; tests capture it through that hook). */
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

/** What every stream of one `subscriptionStreams` shares (one object, referenced by each stream). */
interface Hub {
  readonly config: ServerConfig;
  readonly metrics: Metrics;
  readonly active: Set<ActiveSubscription>;
  readonly heartbeats: Heartbeats;
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
      const flags = (r.dataFormat === DataFormat.DATA_FORMAT_TYPED ? TYPED : 0) | (r.includeMessages ? MESSAGES : 0) | (r.blobRefs ? REFS : 0);
      const s = new SubscriberStream<SurfaceItem>(ctx, sink, hub, r.sessionId, heartbeatMs(r.heartbeatIntervalMs),
        SURFACE, flags, r.afterSeq, r.snapshot ? surfaceSnapshot : undefined);
      void s.start(shuttingDown, async () => {
        if (!r.sessionId) throw new DomainError('INVALID_ARGUMENT', 'session_id is required', { field: 'session_id' });
        // Store reads and the feed use the tenant's storage key; the client id stays the id.
        return Subscription.open(app, ctx.caller, r.sessionId, surfaceSource(app, app.storageKey(ctx.caller, r.sessionId)), s, r.waitForCreate ? () => !s.ended : undefined);
      });
    }),
    subscribeEvents: serverStream<SubscribeEventsRequest, unknown>('read', (ctx, r, sink) => {
      const flags = (r.dataFormat === DataFormat.DATA_FORMAT_TYPED ? TYPED : 0) | (r.blobRefs ? REFS : 0);
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
  return streams;
}
