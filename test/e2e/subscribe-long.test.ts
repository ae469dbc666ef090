/**
 * Catch-up over a log longer than one structural page (16,384 rows), with replaces past the page
 * boundary: the subscriber pages through the store and still rebuilds the server's surface.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestServer, type TestServer } from '../support/test-server.js';
import { input, replaceOp, userMessage } from '../support/events.js';
import { ClientSurface, Tail } from '../support/subscribe.js';
import { DataFormat, type SubscribeSurfaceResponse } from '../../gen/palimpsest/v1/service.js';

let t: TestServer;
beforeAll(async () => { t = await startTestServer(); });
afterAll(async () => { await t.stop(); });

describe('long catch-up', () => {
  it('pages through 40,000 events and applies replaces beyond the first page exactly', async () => {
    const c = t.client;
    await call(c.createSession.bind(c), { sessionId: 'long', labels: {}, strict: false });
    let seq = 0;
    for (let b = 0; b < 40; b++) {
      const events = [];
      for (let i = 0; i < 1000; i++, seq++) {
        events.push(seq % 50 === 0 ? userMessage(`m${seq}`, 'x') : input('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'x' } }));
      }
      await call(c.appendEvents.bind(c), { sessionId: 'long', idempotencyKey: '', events });
    }
    // A compaction of a range well past the first structural page, then a nested one.
    const summary = (start: number, end: number, cite: number[]) => input('user/message', { id: `s${start}`, role: 'user', content: [{ type: 'text', text: 'sum' }], source: { kind: 'plugin', plugin: 'compact' } },
      { surfaceOp: replaceOp(start, end), sourceEventSeqs: { seqs: cite } });
    const shadow = (from: number, to: number) => Array.from({ length: (to - from) / 50 + 1 }, (_, i) => from + i * 50);
    await call(c.appendEvents.bind(c), { sessionId: 'long', idempotencyKey: '', events: [summary(20_000, 30_000, shadow(20_000, 30_000))] });
    await call(c.appendEvents.bind(c), { sessionId: 'long', idempotencyKey: '', events: [summary(19_950, 40_000, [19_950, 40_000, 39_950])] });
    const server = await call(c.getSurface.bind(c), { sessionId: 'long' });
    const tail = new Tail<SubscribeSurfaceResponse>(c.subscribeSurface({ sessionId: 'long', snapshot: false, includeMessages: false, heartbeatIntervalMs: 0, dataFormat: DataFormat.DATA_FORMAT_JSON, waitForCreate: false, blobRefs: false }));
    const surface = new ClientSurface();
    await tail.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'), 30_000, 'caught-up');
    for (const m of tail.msgs) surface.apply(m);
    tail.cancel();
    expect(surface.seqs).toEqual(server.seqs);
    expect(surface.cursor).toBe(40_001);
  }, 60_000);
});
