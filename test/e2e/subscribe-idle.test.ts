/**
 * Idle SubscribeSurface streams and what they hold on the server: each is in the open-stream set,
 * the shared heartbeat schedule and the change feed while open, and in none of them once it ended
 * (1,000 streams opened and cancelled: everything back to empty). Heartbeats of idle streams come
 * from the shared schedule at the requested interval, and a live write postpones them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SubscribeSurfaceRequest, type SubscribeSurfaceResponse } from '../../gen/palimpsest/v1/service.js';
import { userMessage } from '../support/events.js';
import { Tail, eventually } from '../support/subscribe.js';
import { call, startTestServer, type TestServer } from '../support/test-server.js';

let t: TestServer;
// 1,000 streams and a few calls on one connection: above the default per-connection limit.
beforeAll(async () => { t = await startTestServer({ maxConcurrentStreams: 1100 }); });
afterAll(async () => { await t.stop(); });

function surface(req: Partial<SubscribeSurfaceRequest>): Tail<SubscribeSurfaceResponse> {
  return new Tail(t.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial(req)));
}

describe('idle SubscribeSurface streams', () => {
  it('1,000 streams opened then cancelled leave nothing behind (open set, heartbeat schedule, feed)', async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'idle-many', labels: {}, strict: false, pairingGuard: true });
    await call(t.client.appendEvents.bind(t.client), { sessionId: 'idle-many', idempotencyKey: '', events: [userMessage('u1', 'hi')] });
    const streams = t.streams!;
    const tails = Array.from({ length: 1000 }, () => surface({ sessionId: 'idle-many' }));
    await eventually(() => tails.every((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp')), 30_000, 'every stream caught up');
    expect(streams.active.size).toBe(1000);
    expect(streams.heartbeatsScheduled).toBe(1000);
    expect(t.server.app.feed.listenerCount('idle-many')).toBe(1000);
    // A live append reaches every idle stream (the fast path), once each.
    await call(t.client.appendEvents.bind(t.client), { sessionId: 'idle-many', idempotencyKey: '', events: [userMessage('u2', 'again')] });
    await eventually(() => tails.every((x) => x.msgs.some((m) => m.kind?.$case === 'append' && m.cursor === 1)), 30_000, 'the append on every stream');
    expect(tails.every((x) => x.msgs.filter((m) => m.kind?.$case === 'append' && m.cursor === 1).length === 1)).toBe(true);
    for (const x of tails) x.cancel();
    await eventually(() => streams.active.size === 0, 30_000, 'every stream ended');
    // Released when the stream ended, not at its next heartbeat visit (15 s away by default).
    expect(streams.heartbeatsScheduled).toBe(0);
    expect(t.server.app.feed.listenerCount()).toBe(0);
  });

  it('an idle stream gets heartbeats at its interval carrying the cursor; a live write postpones the next one', async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'idle-hb', labels: {}, strict: false, pairingGuard: true });
    await call(t.client.appendEvents.bind(t.client), { sessionId: 'idle-hb', idempotencyKey: '', events: [userMessage('u1', 'hi')] });
    const at: number[] = [];
    const tail = surface({ sessionId: 'idle-hb', heartbeatIntervalMs: 150 });
    tail.stream.on('data', () => at.push(performance.now()));
    const beats = (): SubscribeSurfaceResponse[] => tail.msgs.filter((m) => m.kind?.$case === 'heartbeat');
    await tail.until(() => beats().length >= 3, 10_000, 'three heartbeats');
    expect(beats().every((m) => m.cursor === 0)).toBe(true);
    // Consecutive heartbeats are at least an interval apart (client arrival times; generous margin below).
    const hbTimes = tail.msgs.map((m, i) => (m.kind?.$case === 'heartbeat' ? at[i]! : -1)).filter((x) => x >= 0);
    for (let i = 1; i < hbTimes.length; i++) expect(hbTimes[i]! - hbTimes[i - 1]!).toBeGreaterThan(100);
    const n = tail.msgs.length;
    await call(t.client.appendEvents.bind(t.client), { sessionId: 'idle-hb', idempotencyKey: '', events: [userMessage('u2', 'live')] });
    await tail.until(() => tail.msgs.slice(n).some((m) => m.kind?.$case === 'heartbeat' && m.cursor === 1), 10_000, 'a heartbeat after the append');
    const appendIdx = tail.msgs.findIndex((m, i) => i >= n && m.kind?.$case === 'append');
    const nextHb = tail.msgs.findIndex((m, i) => i > appendIdx && m.kind?.$case === 'heartbeat');
    expect(appendIdx).toBeGreaterThanOrEqual(n);
    expect(at[nextHb]! - at[appendIdx]!).toBeGreaterThan(100);
    tail.cancel();
    await eventually(() => t.streams!.active.size === 0, 10_000, 'the stream ended');
    expect(t.streams!.heartbeatsScheduled).toBe(0);
  });
});
