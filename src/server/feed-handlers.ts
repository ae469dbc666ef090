/**
 * Handler-table entries of the session feed and of session metadata (issue #35): SubscribeSessions (a
 * server stream over the app's SessionFeed, src/app/session-feed.ts) and UpdateSession (unary,
 * src/app/update-session.ts). Decode, call the app, encode; the catch-up/live logic and the
 * store reads are the app's. Merged into the handler table by makeHandlers (handlers.ts).
 *
 * SubscribeSessions sends the same signals as the per-session streams: `caught_up` when the
 * subscription switches to live, a heartbeat after `heartbeat_interval_ms` without a message
 * (carrying the position to resume from), and at server shutdown UNAVAILABLE / SERVER_SHUTDOWN
 * with ErrorInfo metadata `cursor` (resume with after = cursor). Each stream is a push consumer
 * of its subscription (feed-stream.ts: one encoded Buffer per record written to every idle
 * stream, backpressure per stream); a subscriber that does not read makes its subscription fall
 * back to reading the store (bounded memory, nothing lost).
 */
import type { SessionService, SessionView } from '../app/session-service.js';
import type { SubscribeSessionsRequest, UpdateSessionRequest, UpdateSessionResponse } from '../../gen/palimpsest/v1/service.js';
import type { Session } from '../../gen/palimpsest/v1/session.js';
import { sessionToProto } from './convert.js';
import { FeedStream, type FeedHub } from './feed-stream.js';
import type { Metrics } from './metrics.js';
import { Heartbeats } from './subscribe-heartbeats.js';
import { serverStream, unary, type HandlerTable } from './rpc/handler-table.js';
import type { RevocableCalls } from './revocable-calls.js';

/** Minimum heartbeat interval a client may ask for, ms (as for the per-session streams). */
const MIN_HEARTBEAT_MS = 100;
/** The server's default heartbeat interval, ms (ServerConfig.heartbeatMs default). */
const DEFAULT_HEARTBEAT_MS = 15_000;

export { feedItemToProto } from './feed-codec.js';

function toSession(v: SessionView): Session {
  return sessionToProto(v.record, v.surfaceLength, v);
}

/** The SubscribeSessions and UpdateSession handlers. */
export function feedHandlers(app: SessionService, requireId: (id: string) => string, metrics: Metrics, opts: { heartbeatMs?: number; revocable?: RevocableCalls } = {}): HandlerTable {
  const heartbeatMs = opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  const hub: FeedHub = { metrics, heartbeats: new Heartbeats() };
  return {
    subscribeSessions: serverStream<SubscribeSessionsRequest, unknown>('read', (ctx, r, sink) => {
      const interval = r.heartbeatIntervalMs === 0 ? heartbeatMs : Math.max(MIN_HEARTBEAT_MS, r.heartbeatIntervalMs);
      const stream = new FeedStream(ctx, sink, hub, interval, r.batch);
      // A token file reload that revokes the stream's token ends it (revocable-calls.ts).
      const untrack = opts.revocable?.add({ credential: ctx.credential, tenant: ctx.caller.tenant, permission: 'read', revoke: (err) => stream.end(err) });
      if (untrack) stream.onEnd(untrack);
      void stream.start(() => app.sessionFeed.subscribe(ctx.caller, { after: r.after, fromNow: r.fromNow, selector: r.labelSelector }));
    }),
    updateSession: unary<UpdateSessionRequest, UpdateSessionResponse>('append', async (ctx, r) => ({
      session: toSession(await app.updateSession(ctx.caller, requireId(r.sessionId), {
        setLabels: r.setLabels, removeLabels: r.removeLabels, expectedVersion: r.expectedVersion,
      })),
    })),
  };
}
