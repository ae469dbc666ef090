/**
 * A stalled subscriber (its client stream is paused, so HTTP/2 flow control and grpc-js
 * backpressure reach the server) while appends continue: the server's buffer for it never
 * exceeds the limit (it falls back to catch-up instead), a second subscriber keeps getting deltas
 * promptly, and once the stalled one reads again it catches up exactly.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { api, type Api } from '../support/e2e.js';
import { userMessage } from '../support/events.js';
import { ClientSurface, Tail, eventually } from '../support/subscribe.js';
import { SubscribeSurfaceRequest, type SubscribeSurfaceResponse } from '../../gen/palimpsest/v1/service.js';

const LIMIT = 64 * 1024;
let t: TestServer;
let a: Api;
beforeAll(async () => { t = await startTestServer({ subscriberBufferBytes: LIMIT, durability: 'normal' }); a = api(t.client); });
afterAll(async () => { await t.stop(); });

describe('slow subscriber', () => {
  it('is bounded by the buffer limit, does not slow others, and catches up exactly', async () => {
    await a.createSession({ sessionId: 'slow' });
    const stalledStream = t.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial({ sessionId: 'slow' }));
    const stalled = new Tail<SubscribeSurfaceResponse>(stalledStream);
    await stalled.until((x) => x.msgs.length > 0);
    stalledStream.pause();
    const fast = new Tail<SubscribeSurfaceResponse>(t.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial({ sessionId: 'slow' })));
    await fast.until((x) => x.msgs.length > 0);
    const entries = [...(t.streams?.active ?? [])];
    expect(entries).toHaveLength(2);
    const slowStats = () => entries[0]?.stats;

    const text = 'x'.repeat(16 * 1024);
    const latencies: number[] = [];
    let n = 0;
    // Append until the stalled subscriber has been switched back to catch-up, then 200 more (it
    // stays in catch-up, holding nothing, while it does not read).
    let fellBackAt = Infinity;
    while (n < fellBackAt + 200) {
      if (fellBackAt === Infinity && (slowStats()?.fallbacks ?? 0) > 0) fellBackAt = n;
      if (n > 3000) throw new Error('the stalled subscriber never fell back ' + JSON.stringify(slowStats()) + ' ' + stalled.msgs.length);
      const started = performance.now();
      const { seqs } = await a.appendEvents({ sessionId: 'slow', events: [userMessage(`m${n}`, text)] });
      const seq = seqs[0] as number;
      await fast.until((x) => (x.msgs.at(-1)?.cursor ?? -1) >= seq, 5000, `fast delivery of ${seq}`);
      latencies.push(performance.now() - started);
      expect(slowStats()?.bufferedBytes ?? 0).toBeLessThanOrEqual(LIMIT);
      n++;
    }
    const stats = slowStats();
    expect(stats?.maxBufferedBytes).toBeLessThanOrEqual(LIMIT);
    expect(stats?.maxBufferedBytes).toBeGreaterThan(0);
    expect(stats?.fallbacks).toBe(1);
    expect(stats?.mode).toBe('catch-up');
    expect(stats?.bufferedBytes).toBe(0);
    latencies.sort((x, y) => x - y);
    // Generous bound: an append plus a delivery on loopback, never held behind the stalled stream.
    expect(latencies[Math.floor(latencies.length * 0.99)]).toBeLessThan(250);

    stalledStream.resume();
    const head = (await a.getSurface({ sessionId: 'slow' })).headSeq ?? -1;
    await stalled.until((x) => (x.msgs.at(-1)?.cursor ?? -1) >= head && x.msgs.at(-1)?.kind?.$case === 'caughtUp', 20_000, 'stalled catch-up');
    const cs = new ClientSurface();
    for (const m of stalled.msgs) cs.apply(m);
    const server = await a.getSurface({ sessionId: 'slow' });
    expect(cs.seqs).toEqual(server.seqs);
    expect(cs.events).toEqual(server.seqs);
    expect(cs.caughtUp).toBeGreaterThanOrEqual(2);
    stalled.cancel();
    fast.cancel();
    await eventually(() => t.server.app.feed.listenerCount('slow') === 0, 5000, 'listeners released');
  }, 60_000);
});
