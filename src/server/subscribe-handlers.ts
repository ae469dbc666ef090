/**
 * The gRPC side of subscriptions (SubscribeSurface, SubscribeEvents): request checks, encoding,
 * backpressure, heartbeats and end-of-stream signals. The catch-up/live state machine is
 * src/app/subscriptions.ts.
 *
 * - Encoding once: live items are shared by every subscriber of a session (memoized per committed
 *   batch), and each is encoded once per options variant (include_messages x data_format) into a
 *   Buffer cached on the item. The service definition is registered with response serializers that
 *   pass Buffers through (`preEncodedStreams`), so grpc-js writes the same bytes to every stream.
 * - Backpressure (server-stream.ts, the one generator-to-stream adapter): the next item is pulled
 *   only while `write()` returns true; after false the adapter waits for `drain`. Meanwhile live items accumulate in the subscription's bounded buffer; when
 *   that would exceed `config.subscriberBufferBytes` the buffer is dropped and the subscriber is
 *   switched back to catch-up from the store at its last cursor (then a new `caught_up`, then
 *   live). grpc-js itself holds at most its writable high-water mark (16 messages) per stream.
 * - Fast path: the writer registers itself as the subscription's direct sink, so a live subscriber
 *   that is idle (nothing buffered, stream writable) gets each committed batch written from the
 *   feed callback itself, with no promise hop; when `write()` returns false there, the subscription
 *   buffers the rest and its consumer stays parked until `drain` (`Subscription.resume()`).
 * - Per-write cost is the write itself: the heartbeat timer is not touched per write (writes
 *   record their time; the timer re-arms for the rest of the interval when it fires), and the lag
 *   histogram observes one delivery in 16 per stream.
 * - Signals: `caught_up` when switching to live; a heartbeat after `heartbeat_interval_ms` without
 *   a write (not while waiting for drain); SESSION_NOT_FOUND when the session is deleted;
 *   UNAVAILABLE/SERVER_SHUTDOWN with ErrorInfo metadata `cursor` at shutdown.
 * - A cancelled or disconnected call closes its subscription at once (feed listener, buffers,
 *   timer).
 * - Revocation: each stream remembers the hash of the token that opened it; after a token file
 *   reload (`recheck`), a stream whose token is gone ends with UNAUTHENTICATED, and one whose
 *   token lost the read permission (or now names another tenant) with PERMISSION_DENIED.
 */
import type { ServerWritableStream, ServiceError, UntypedHandleCall } from '@grpc/grpc-js';
import {
  DataFormat, SubscribeEventsResponse, SubscribeSurfaceResponse,
  type SubscribeEventsRequest, type SubscribeSurfaceRequest,
} from '../../gen/palimpsest/v1/service.js';
import type { SessionService } from '../app/session-service.js';
import {
  NO_CURSOR, Subscription, eventSource, surfaceSource,
  type EventItem, type Item, type ItemSource, type SubscriptionStats, type SurfaceItem,
} from '../app/subscriptions.js';
import { projectMessage } from '../domain/derive.js';
import { DomainError } from '../domain/errors.js';
import type { ServerConfig } from './config.js';
import { eventToProto } from './convert.js';
import type { ContextResolver, Permission } from './permissions.js';
import { TENANT_KEY, credentialOf, grants } from './auth.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import { pipeStream, type ServerStream } from './server-stream.js';
import { toServiceError } from './status-map.js';
import { messageFromJson } from './typed-data.js';

/** Minimum heartbeat interval a client may ask for, ms. */
export const MIN_HEARTBEAT_MS = 100;

/** The lag histogram observes one delivery in LAG_SAMPLE_MASK + 1 per stream. */
const LAG_SAMPLE_MASK = 15;

/**
 * A copy of a service definition whose streaming methods' response serializers accept an
 * already-encoded Buffer as is (and encode anything else as before). Registering the service
 * under it lets the subscription handlers write one pre-encoded Buffer to many streams.
 */
export function preEncodedStreams<D extends object>(def: D): D {
  const out: Record<string, unknown> = { ...(def as Record<string, unknown>) };
  for (const [name, m] of Object.entries(def) as [string, { responseStream?: boolean; responseSerialize: (v: unknown) => Buffer }][]) {
    if (!m.responseStream) continue;
    const encode = m.responseSerialize;
    out[name] = { ...m, responseSerialize: (v: unknown): Buffer => (Buffer.isBuffer(v) ? v : encode(v)) };
  }
  return out as D;
}

/** Per-item encoded bytes, one entry per options variant; items shared by subscribers share this. */
const encoded = new WeakMap<object, Map<string, Buffer>>();
// A live item is encoded for many streams in a row: remember the last lookup in front of the maps.
let lastItem: object | undefined;
let lastVariant = '';
let lastBytes: Buffer | undefined;

function cached<T extends object>(item: T, variant: string, encode: (item: T) => Uint8Array): Buffer {
  if (item === lastItem && variant === lastVariant) return lastBytes as Buffer;
  const b = lookup(item, variant, encode);
  lastItem = item;
  lastVariant = variant;
  lastBytes = b;
  return b;
}

function lookup<T extends object>(item: T, variant: string, encode: (item: T) => Uint8Array): Buffer {
  let m = encoded.get(item);
  if (!m) {
    m = new Map();
    encoded.set(item, m);
  }
  let b = m.get(variant);
  if (!b) {
    const bytes = encode(item);
    b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    m.set(variant, b);
  }
  return b;
}

function cursorField(c: number): number | undefined {
  return c < 0 ? undefined : c;
}

function surfaceEncoder(sessionId: string, includeMessages: boolean, typed: boolean): (it: SurfaceItem) => Buffer {
  const variant = `${includeMessages ? 'm' : ''}${typed ? 't' : 'j'}`;
  const format = typed ? 'typed' : 'json';
  const encode = (it: SurfaceItem): Uint8Array => {
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
          if (m) message = { seq: it.event.seq, messageJson: JSON.stringify(m), message: typed ? messageFromJson(m) : undefined };
        }
        msg = { cursor, kind, event: eventToProto(it.event, format), message };
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
  };
  return (it) => cached(it, variant, encode);
}

function eventEncoder(typed: boolean): (it: EventItem) => Buffer {
  const variant = typed ? 't' : 'j';
  const encode = (it: EventItem): Uint8Array => SubscribeEventsResponse.encode(it.kind === 'event'
    ? { cursor: it.cursor, kind: { $case: 'event', value: eventToProto(it.event, typed ? 'typed' : 'json') } }
    : { cursor: cursorField(it.cursor), kind: { $case: 'caughtUp', value: {} } }).finish();
  return (it) => cached(it, variant, encode);
}

/** One open stream, for shutdown and tests. */
export interface ActiveSubscription {
  readonly sessionId: string;
  /** SHA-256 of the token that opened the stream ('' without auth). */
  readonly credential: string;
  /** The tenant the stream was authorized for ('' without auth). */
  readonly tenant: string;
  /** The subscription's counters (undefined until it is open). */
  readonly stats: SubscriptionStats | undefined;
  /** Ends the stream with an error status. */
  end(err: ServiceError): void;
  /** The cursor to resume from. */
  cursor(): number;
}

/** What `subscriptionStreams` returns (the ServerExtensions.streams shape plus introspection). */
export interface SubscriptionStreams {
  readonly handlers: Record<string, UntypedHandleCall>;
  /** Ends every open stream with UNAVAILABLE / SERVER_SHUTDOWN and its resume cursor. */
  shutdown(): void;
  /** The open streams. */
  readonly active: ReadonlySet<ActiveSubscription>;
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

/** Builds the SubscribeSurface / SubscribeEvents handlers. */
export function subscriptionStreams(app: SessionService, config: ServerConfig, metrics: Metrics, logger: Logger, resolve?: ContextResolver): SubscriptionStreams {
  const active = new Set<ActiveSubscription>();
  let shuttingDown = false;
  const fail = (err: unknown): ServiceError => toServiceError(err, (e) => logger.error({ err: e }, 'unexpected error'));

  function heartbeatMs(requested: number): number {
    return requested === 0 ? config.heartbeatMs : Math.max(MIN_HEARTBEAT_MS, requested);
  }

  /**
   * Runs one stream through the stream adapter (server-stream.ts: backpressure, cancellation,
   * deadline): open, then pull items and write them, plus heartbeats and the fast path.
   */
  function run<I extends Item>(
    call: ServerWritableStream<unknown, unknown>,
    sessionId: string,
    interval: number,
    open: () => Promise<Subscription<I>>,
    encode: (it: I) => Buffer,
    heartbeat: (cursor: number) => Buffer,
  ): void {
    let sub: Subscription<I> | undefined;
    let timer: NodeJS.Timeout | undefined;
    let lastWrite = 0;
    let deliveries = 0;
    const tenantValue = call.metadata.get(TENANT_KEY)[0];
    const entry: ActiveSubscription = {
      sessionId,
      credential: credentialOf(call.metadata),
      tenant: typeof tenantValue === 'string' ? tenantValue : '',
      get stats() {
        return sub?.stats;
      },
      end: (err) => stream.end(err),
      cursor: () => sub?.cursor ?? NO_CURSOR,
    };
    const write = (b: Buffer): boolean => {
      lastWrite = performance.now();
      return stream.write(b);
    };
    // Heartbeat after `interval` ms without a write: writes only record their time; the timer
    // re-arms for what is left of the interval (no per-write timer work), and skips while blocked.
    const beat = (): void => {
      timer = undefined;
      if (stream.ended || !sub) return;
      const idle = performance.now() - lastWrite;
      let wait = interval;
      if (!stream.blocked) {
        if (idle >= interval) write(heartbeat(sub.cursor));
        else wait = interval - idle;
      }
      timer = setTimeout(beat, wait);
      timer.unref();
    };
    // One delivery from the subscription's fast path; false = stop writing.
    const deliver = (it: I): boolean => {
      try {
        const more = write(encode(it));
        sampleLag();
        return more;
      } catch (e) {
        stream.end(fail(e));
        return false;
      }
    };
    const sampleLag = (): void => {
      if ((++deliveries & LAG_SAMPLE_MASK) === 0 && sub && sub.stats.head >= 0) {
        metrics.subscriptionLag.observe(Math.max(0, sub.stats.head - sub.cursor));
      }
    };
    const stream: ServerStream<unknown> = pipeStream(call, async function* () {
      if (shuttingDown) throw new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; resubscribe to another replica or later', {});
      const opened = await open();
      if (stream.ended) {
        opened.close();
        return;
      }
      sub = opened;
      lastWrite = performance.now();
      timer = setTimeout(beat, interval);
      timer.unref();
      sub.setDirect(deliver);
      for (;;) {
        const it = await sub.next();
        if (it === undefined) return;
        lastWrite = performance.now();
        yield encode(it);
        sampleLag();
      }
    }, fail);
    active.add(entry);
    metrics.subscriptions.inc();
    stream.onDrain(() => sub?.resume());
    stream.onEnd(() => {
      sub?.close();
      if (timer) clearTimeout(timer);
      timer = undefined;
      active.delete(entry);
      metrics.subscriptions.dec();
    });
  }

  const handlers: Record<string, UntypedHandleCall> = {
    subscribeSurface: (call: ServerWritableStream<SubscribeSurfaceRequest, unknown>): void => {
      const r = call.request;
      const typed = r.dataFormat === DataFormat.DATA_FORMAT_TYPED;
      const encode = surfaceEncoder(r.sessionId, r.includeMessages, typed);
      run<SurfaceItem>(call as ServerWritableStream<unknown, unknown>, r.sessionId, heartbeatMs(r.heartbeatIntervalMs), async () => {
        if (!r.sessionId) throw new DomainError('INVALID_ARGUMENT', 'session_id is required', { field: 'session_id' });
        const ctx = resolve ? resolve(call, 'read') : { tenant: '' };
        // Store reads and the feed use the tenant's storage key; the client id stays the id.
        const source: ItemSource<SurfaceItem> = surfaceSource(app, app.storageKey(ctx, r.sessionId));
        return Subscription.open(app, ctx, r.sessionId, source, {
          after: r.afterSeq,
          snapshot: r.snapshot ? (seqs, cursor) => ({ kind: 'snapshot', seqs, cursor }) : undefined,
          bufferBytes: config.subscriberBufferBytes,
          sizeOf: (it) => encode(it).length,
        });
      }, encode, (cursor) => Buffer.from(SubscribeSurfaceResponse.encode({
        cursor: cursorField(cursor), kind: { $case: 'heartbeat', value: {} }, event: undefined, message: undefined,
      }).finish()));
    },
    subscribeEvents: (call: ServerWritableStream<SubscribeEventsRequest, unknown>): void => {
      const r = call.request;
      const encode = eventEncoder(r.dataFormat === DataFormat.DATA_FORMAT_TYPED);
      run<EventItem>(call as ServerWritableStream<unknown, unknown>, r.sessionId, heartbeatMs(r.heartbeatIntervalMs), async () => {
        if (!r.sessionId) throw new DomainError('INVALID_ARGUMENT', 'session_id is required', { field: 'session_id' });
        const ctx = resolve ? resolve(call, 'read') : { tenant: '' };
        return Subscription.open(app, ctx, r.sessionId, eventSource(app, app.storageKey(ctx, r.sessionId)), {
          after: r.afterSeq,
          bufferBytes: config.subscriberBufferBytes,
          sizeOf: (it) => encode(it).length,
        });
      }, encode, (cursor) => Buffer.from(SubscribeEventsResponse.encode({ cursor: cursorField(cursor), kind: { $case: 'heartbeat', value: {} } }).finish()));
    },
  };

  const streams: SubscriptionStreams = {
    handlers,
    active,
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
        s.end(fail(err));
        ended++;
      }
      return ended;
    },
    shutdown() {
      shuttingDown = true;
      for (const s of [...active]) {
        const c = s.cursor();
        s.end(fail(new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; resubscribe with after_seq = the cursor in the error details',
          c >= 0 ? { cursor: String(c) } : {})));
      }
    },
  };
  live.set(app, streams);
  return streams;
}
