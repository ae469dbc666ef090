/**
 * Handler-table entries of the session feed and of session metadata (issue #35): SubscribeSessions (a
 * server stream over the app's SessionFeed, src/app/session-feed.ts) and UpdateSession (unary,
 * src/app/update-session.ts). Decode, call the app, encode; the catch-up/live logic and the
 * store reads are the app's. Merged into the handler table by makeHandlers (handlers.ts).
 *
 * SubscribeSessions sends the same signals as the per-session streams: `caught_up` when the
 * subscription switches to live, a heartbeat after `heartbeat_interval_ms` without a message
 * (carrying the position to resume from), and at server shutdown UNAVAILABLE / SERVER_SHUTDOWN
 * with ErrorInfo metadata `cursor` (resume with after = cursor). Backpressure is the stream's
 * (pipeStream pulls the next item only while writable); a subscriber that does not read makes
 * its subscription fall back to reading the store (bounded memory, nothing lost).
 */
import type { SessionService, SessionView } from '../app/session-service.js';
import type { FeedItem, FeedSubscription } from '../app/session-feed.js';
import { DomainError } from '../domain/errors.js';
import {
  SessionChangeKind, SubscribeSessionsResponse,
  type SubscribeSessionsRequest, type UpdateSessionRequest, type UpdateSessionResponse,
} from '../../gen/palimpsest/v1/service.js';
import type { Session } from '../../gen/palimpsest/v1/session.js';
import { sessionToProto } from './convert.js';
import type { Metrics } from './metrics.js';
import { pipeStream } from './server-stream.js';
import { serverStream, unary, type HandlerTable } from './rpc/handler-table.js';
import type { RevocableCalls } from './revocable-calls.js';

/** Minimum heartbeat interval a client may ask for, ms (as for the per-session streams). */
const MIN_HEARTBEAT_MS = 100;
/** The server's default heartbeat interval, ms (ServerConfig.heartbeatMs default). */
const DEFAULT_HEARTBEAT_MS = 15_000;

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

/**
 * Encoded bytes of a shared change item (one object per feed record for every subscriber, see
 * session-feed.ts): encoded once, the same Buffer written to every stream (the service is
 * registered with pass-through serializers, grpc/pass-through.ts).
 */
const encoded = new WeakMap<object, Buffer>();

function encodeChange(it: FeedItem): Buffer {
  let b = encoded.get(it);
  if (b === undefined) {
    const u = SubscribeSessionsResponse.encode(feedItemToProto(it)).finish();
    b = Buffer.from(u.buffer, u.byteOffset, u.byteLength);
    encoded.set(it, b);
  }
  return b;
}

function toSession(v: SessionView): Session {
  return sessionToProto(v.record, v.surfaceLength, v);
}

/** The SubscribeSessions and UpdateSession handlers. */
export function feedHandlers(app: SessionService, requireId: (id: string) => string, metrics: Metrics, opts: { heartbeatMs?: number; revocable?: RevocableCalls } = {}): HandlerTable {
  const heartbeatMs = opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  return {
    subscribeSessions: serverStream<SubscribeSessionsRequest, SubscribeSessionsResponse>('read', (ctx, r, sink) => {
      const interval = r.heartbeatIntervalMs === 0 ? heartbeatMs : Math.max(MIN_HEARTBEAT_MS, r.heartbeatIntervalMs);
      let sub: FeedSubscription | undefined;
      const stream = pipeStream(ctx, sink, async function* () {
        sub = await app.sessionFeed.subscribe(ctx.caller, { after: r.after, fromNow: r.fromNow, selector: r.labelSelector });
        metrics.feedSubscribers.inc();
        try {
          let pending: Promise<FeedItem | undefined> | undefined;
          for (;;) {
            // Queued items are taken without a timer; only a wait races the heartbeat.
            let it = pending === undefined ? sub.poll() : undefined;
            if (it === undefined) {
              pending ??= sub.next();
              let timer: NodeJS.Timeout | undefined;
              const beat = new Promise<'beat'>((resolve) => {
                timer = setTimeout(() => resolve('beat'), interval);
              });
              const got = await Promise.race([pending, beat]);
              clearTimeout(timer);
              if (got === 'beat') {
                yield { position: sub.cursor, kind: { $case: 'heartbeat', value: {} } };
                continue;
              }
              pending = undefined;
              it = got;
            }
            if (it === undefined) {
              // The feed closed under a live stream: the server is shutting down.
              throw new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; resubscribe with after = the cursor in the error details',
                { cursor: String(sub.cursor) });
            }
            if (it.kind === 'change' && sub.live) metrics.feedLag.observe(Math.max(0, Date.now() - it.time) / 1000);
            // Changes are shared by the tenant's subscribers: encoded once (the signals are per stream).
            yield it.kind === 'change' ? (encodeChange(it) as unknown as SubscribeSessionsResponse) : feedItemToProto(it);
          }
        } finally {
          sub.close();
          metrics.feedSubscribers.dec();
        }
      });
      stream.onEnd(() => sub?.close());
      // A token file reload that revokes the stream's token ends it (revocable-calls.ts).
      const untrack = opts.revocable?.add({ credential: ctx.credential, tenant: ctx.caller.tenant, permission: 'read', revoke: (err) => stream.end(err) });
      if (untrack) stream.onEnd(untrack);
    }),
    updateSession: unary<UpdateSessionRequest, UpdateSessionResponse>('append', async (ctx, r) => ({
      session: toSession(await app.updateSession(ctx.caller, requireId(r.sessionId), {
        setLabels: r.setLabels, removeLabels: r.removeLabels, expectedVersion: r.expectedVersion,
      })),
    })),
  };
}
