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
 * - Batching (SubscribeSessionsRequest.batch): the stream is woken once per store read and
 *   writes every change queued for it in one `changes` message (bounded: feed-codec.ts), a lone
 *   change as `change`; a stream that fell behind writes its backlog the same way. No timer:
 *   nothing waits for a batch to fill.
 * - Heartbeats: in the server's shared schedule (one timer for every stream, `Heartbeats`), after
 *   `interval` ms without a write, carrying the position to resume from.
 * - End: at server shutdown the feed closes the subscription and the stream ends with UNAVAILABLE
 *   / SERVER_SHUTDOWN and ErrorInfo metadata `cursor`; a cancelled call closes the subscription at
 *   once; a subscription error (FEED_POSITION_EXPIRED, a store failure) ends it with its status.
 */
import { FEED_IDLE, type FeedConsumer, type FeedSubscription, type SessionChange } from '../app/feed-subscription.js';
import { DomainError } from '../domain/errors.js';
import { changeSize, encodeChange, encodeChanges, MAX_BATCH_BYTES, MAX_BATCH_CHANGES, PositionMessage } from './feed-codec.js';
import type { Metrics } from './metrics.js';
import type { RpcContext, ServerSink } from './rpc/handler-table.js';
import { ServerStream } from './server-stream.js';
import type { Heartbeats } from './subscribe-heartbeats.js';

/** The lag histogram observes one delivery in LAG_SAMPLE_MASK + 1 per stream. */
const LAG_SAMPLE_MASK = 15;

const CAUGHT_UP = new PositionMessage('caughtUp');
const HEARTBEAT = new PositionMessage('heartbeat');

/** `#pump`: no step result carried over. */
const NO_CARRY: unique symbol = Symbol('no-carry');

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

  /**
   * @param batch SubscribeSessionsRequest.batch: what is queued when the stream pulls (one store
   *   read's changes, or a backlog) goes out in one `changes` message.
   */
  constructor(ctx: RpcContext, sink: ServerSink<unknown>, private readonly hub: FeedHub, private readonly interval: number, readonly batch = false) {
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

  /** Fast path from the tenant's reader (not used when batching); false = stop writing until drained. */
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
      // A step taken to end a batch is handled next, even when the batch filled the stream.
      let carry: ReturnType<FeedSubscription['step']> | typeof NO_CARRY = NO_CARRY;
      while (!this.ended && (carry !== NO_CARRY || !this.blocked)) {
        const r: ReturnType<FeedSubscription['step']> = carry !== NO_CARRY ? carry : sub.step();
        carry = NO_CARRY;
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
        else if (!this.batch) {
          this.#send(encodeChange(r));
          if (sub.live) this.#sampleLag(r);
        } else {
          // Everything queued behind it, up to the batch bounds, in one message.
          const items = [r];
          let bytes = changeSize(r);
          while (items.length < MAX_BATCH_CHANGES && bytes < MAX_BATCH_BYTES) {
            const n = sub.step();
            if (n === FEED_IDLE || n === undefined || n instanceof Promise || n.kind !== 'change') {
              carry = n;
              break;
            }
            items.push(n);
            bytes += changeSize(n);
          }
          this.#send(items.length === 1 ? encodeChange(r) : encodeChanges(items));
          if (sub.live) for (const it of items) this.#sampleLag(it);
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
