/**
 * One SubscribeSessions stream (issue #35): the push side of a feed subscription
 * (src/app/feed-subscription.ts), shaped like the per-session SubscriberStream
 * (subscribe-handlers.ts) rather than a generator:
 *
 * - Fast path: the stream is its subscription's push consumer. While it is idle and writable, the
 *   tenant's reader hands each record's shared item to `deliver`, which writes the item's Buffer
 *   (encoded once per record for every stream, `encodeChange`) from the reader's loop itself: no
 *   promise, timer or suspended frame per delivery.
 * - Backpressure: after `write()` returned false the subscription queues (bounded, then it falls
 *   back to reading the store from its cursor) and this stream pulls again with `step()` at
 *   `drain`. grpc-js holds at most its high-water mark per stream.
 * - Heartbeats: in the server's shared schedule (one timer for every stream, `Heartbeats`), after
 *   `interval` ms without a write, carrying the position to resume from.
 * - End: at server shutdown the feed closes the subscription and the stream ends with UNAVAILABLE
 *   / SERVER_SHUTDOWN and ErrorInfo metadata `cursor`; a cancelled call closes the subscription at
 *   once; a subscription error (FEED_POSITION_EXPIRED, a store failure) ends it with its status.
 */
import { FEED_IDLE, type FeedConsumer, type FeedItem, type FeedSubscription, type SessionChange } from '../app/feed-subscription.js';
import { DomainError } from '../domain/errors.js';
import { SessionChangeKind, SubscribeSessionsResponse } from '../../gen/palimpsest/v1/service.js';
import type { Metrics } from './metrics.js';
import type { RpcContext, ServerSink } from './rpc/handler-table.js';
import { ServerStream } from './server-stream.js';
import type { Heartbeats } from './subscribe-heartbeats.js';

/** The lag histogram observes one delivery in LAG_SAMPLE_MASK + 1 per stream. */
const LAG_SAMPLE_MASK = 15;

const KINDS: Record<string, SessionChangeKind> = {
  created: SessionChangeKind.SESSION_CHANGE_KIND_CREATED,
  deleted: SessionChangeKind.SESSION_CHANGE_KIND_DELETED,
  labels_changed: SessionChangeKind.SESSION_CHANGE_KIND_LABELS_CHANGED,
  appended: SessionChangeKind.SESSION_CHANGE_KIND_APPENDED,
};

/** One feed item as a stream message. */
export function feedItemToProto(it: FeedItem): SubscribeSessionsResponse {
  if (it.kind === 'caught-up') return { position: it.position, kind: { $case: 'caughtUp', value: {} } };
  return {
    position: it.position,
    kind: {
      $case: 'change',
      value: {
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
      },
    },
  };
}

function toBuffer(u: Uint8Array): Buffer {
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

/**
 * Encoded bytes of a shared change item (one object per feed record for every subscriber):
 * encoded once, the same Buffer written to every stream (the service is registered with
 * pass-through serializers, grpc/pass-through.ts). The last lookup sits in front of the map: a
 * record is written to many streams in a row.
 */
const encoded = new WeakMap<object, Buffer>();
let lastItem: object | undefined;
let lastBytes: Buffer | undefined;

export function encodeChange(it: SessionChange): Buffer {
  if (it === lastItem) return lastBytes as Buffer;
  let b = encoded.get(it);
  if (b === undefined) {
    b = toBuffer(SubscribeSessionsResponse.encode(feedItemToProto(it)).finish());
    encoded.set(it, b);
  }
  lastItem = it;
  lastBytes = b;
  return b;
}

/** The last encoding of a message carrying only a position (caught-up, heartbeat): many streams send the same one. */
class PositionMessage {
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

const CAUGHT_UP = new PositionMessage('caughtUp');
const HEARTBEAT = new PositionMessage('heartbeat');

/** What every feed stream of a server shares. */
export interface FeedHub {
  readonly metrics: Metrics;
  readonly heartbeats: Heartbeats;
}

function nowMs(): number {
  return Math.floor(performance.now());
}

/** One SubscribeSessions stream (see the module comment). */
export class FeedStream extends ServerStream<unknown> implements FeedConsumer {
  sub: FeedSubscription | undefined;
  lastWrite = 0;
  deliveries = 0;
  /** Heartbeat schedule entry (subscribe-heartbeats.ts). */
  dueAt = 0;
  heapIndex = -1;
  #stepping = false;
  #reading = false;

  constructor(ctx: RpcContext, sink: ServerSink<unknown>, private readonly hub: FeedHub, private readonly interval: number) {
    super(ctx, sink);
  }

  /** Opens the subscription, then writes what it hands out. */
  async start(open: () => Promise<FeedSubscription>): Promise<void> {
    try {
      const sub = await open();
      if (this.ended) {
        sub.close();
        return;
      }
      this.sub = sub;
      this.hub.metrics.feedSubscribers.inc();
      this.lastWrite = nowMs();
      this.hub.heartbeats.add(this, this.lastWrite + this.interval);
      sub.setDirect(this);
      this.#pump();
    } catch (e) {
      this.end(e);
    }
  }

  /** Fast path from the tenant's reader; false = stop writing until drained. */
  deliver(it: SessionChange): boolean {
    try {
      const more = this.#send(encodeChange(it));
      this.#sampleLag(it);
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
    if (this.ended || sub === undefined) return -1;
    if (this.blocked) return now + this.interval;
    const idle = now - this.lastWrite;
    if (idle < this.interval) return this.lastWrite + this.interval;
    this.#send(HEARTBEAT.get(sub.cursor));
    return now + this.interval;
  }

  protected override onDrained(): void {
    this.sub?.resume();
    this.#pump();
  }

  protected override onEnded(): void {
    const sub = this.sub;
    if (sub === undefined) return;
    sub.close();
    this.hub.heartbeats.remove(this);
    this.hub.metrics.feedSubscribers.dec();
  }

  /** Pulls and writes while writable; parks on an idle step, waits out a catch-up read. */
  #pump(): void {
    const sub = this.sub;
    if (sub === undefined || this.#stepping || this.#reading) return;
    this.#stepping = true;
    try {
      while (!this.ended && !this.blocked) {
        const r = sub.step();
        if (r === FEED_IDLE) break;
        if (r === undefined) {
          // Closed by the feed under a live stream: the server is shutting down.
          this.end(new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; resubscribe with after = the cursor in the error details',
            { cursor: String(sub.cursor) }));
          break;
        }
        if (r instanceof Promise) {
          this.#reading = true;
          const again = (): void => {
            this.#reading = false;
            this.#pump();
          };
          void r.then(again, again);
          break;
        }
        if (r.kind === 'caught-up') this.#send(CAUGHT_UP.get(r.position));
        else {
          this.#send(encodeChange(r));
          if (sub.live) this.#sampleLag(r);
        }
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

  #sampleLag(it: SessionChange): void {
    if ((++this.deliveries & LAG_SAMPLE_MASK) === 0) this.hub.metrics.feedLag.observe(Math.max(0, Date.now() - it.time) / 1000);
  }
}
