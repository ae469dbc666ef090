/**
 * Property/stress: concurrent appenders (appends, compactions, tool/result prunes, runs of chunks)
 * while subscribers connect, disconnect and resume at random cursors (seeded). At the end every
 * subscriber's rebuilt surface and event list equal the server's, with no gap, duplicate or
 * reordering (ClientSurface checks strictly increasing cursors and each replace's shadowed seqs).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { allEvents, api, replay, type Api } from '../support/e2e.js';
import { assistantMessage, input, replaceOp, toolResult, userMessage } from '../support/events.js';
import { ClientSurface, Tail } from '../support/subscribe.js';
import {
  SubscribeEventsRequest, SubscribeSurfaceRequest, type SubscribeEventsResponse, type SubscribeSurfaceResponse,
} from '../../gen/palimpsest/v1/service.js';
import type { EventInput, SessionEvent as PbSessionEvent } from '../../gen/palimpsest/v1/event.js';
import { rng } from '../support/rng.js';

let t: TestServer;
let a: Api;
// A small live buffer so that fallbacks to catch-up happen under load as well.
beforeAll(async () => { t = await startTestServer({ subscriberBufferBytes: 64 * 1024, durability: 'normal' }); a = api(t.client); });
afterAll(async () => { await t.stop(); });


const chunk = (text: string): EventInput => input('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text } });

interface Tool { id: string; callId: string }

async function appender(id: string, r: () => number, ops: number, tools: Map<number, Tool>, tag: string): Promise<void> {
  for (let i = 0; i < ops; i++) {
    const p = r();
    try {
      if (p < 0.3) {
        const n = 1 + Math.floor(r() * 20);
        await a.appendEvents({ sessionId: id, events: Array.from({ length: n }, (_, k) => chunk(`${tag}${i}.${k}`)) });
      } else if (p < 0.5) {
        await a.appendEvents({ sessionId: id, events: [userMessage(`${tag}u${i}`, `hello ${i}`)] });
      } else if (p < 0.7) {
        const callId = `${tag}c${i}`;
        const res = await a.appendEvents({ sessionId: id, events: [assistantMessage(`${tag}a${i}`, 'calling', [], [{ id: callId, name: 'ls' }])] });
        const callSeq = res.seqs[0] as number;
        const tr = await a.appendEvents({ sessionId: id, events: [toolResult(`${tag}t${i}`, callId, `out ${i}`, callSeq), chunk('x')] });
        tools.set(tr.seqs[0] as number, { id: `${tag}t${i}`, callId });
      } else if (p < 0.85) {
        // Prune: rewrite one tool/result on the surface, inner content only.
        const surf = (await a.getSurface({ sessionId: id })).seqs.filter((s) => tools.has(s));
        const target = surf[Math.floor(r() * surf.length)];
        if (target === undefined) continue;
        const tool = tools.get(target) as Tool;
        const res = await a.appendEvents({ sessionId: id, events: [input('tool/result', {
          turn: 1, step: 1,
          message: { id: tool.id, role: 'user', content: [{ type: 'tool-result', toolCallId: tool.callId, content: [{ type: 'text', text: `[pruned ${i}]` }] }], source: { kind: 'tool', callId: tool.callId } },
        }, { surfaceOp: replaceOp(target, target), sourceEventSeqs: { seqs: [target] } })] });
        tools.set(res.seqs[0] as number, tool);
      } else {
        // Compaction: a marker event, then a summary replacing a random surface range.
        const surf = (await a.getSurface({ sessionId: id })).seqs;
        if (surf.length < 2) continue;
        const x = Math.floor(r() * surf.length);
        const y = Math.min(surf.length - 1, x + Math.floor(r() * 4));
        const shadowed = surf.slice(x, y + 1);
        await a.appendEvents({ sessionId: id, events: [
          input('session/compaction', { reason: 'stress' }),
          input('user/message', { id: `${tag}s${i}`, role: 'user', content: [{ type: 'text', text: 'summary' }], source: { kind: 'plugin', plugin: 'compact' } },
            { surfaceOp: replaceOp(surf[x] as number, surf[y] as number), sourceEventSeqs: { seqs: shadowed } }),
        ] });
      }
    } catch (e) {
      // A concurrent appender moved the surface under a replace: rejected atomically, fine.
      const code = (e as { code?: number }).code;
      if (code !== 9 && code !== 3) throw e;
    }
  }
}

interface Segment<T> { after: number | undefined; snapshot: boolean; msgs: T[] }

/** Connects, reads a random number of messages, disconnects and resumes from the last cursor, until `done()` and caught up to the head. */
async function surfaceSubscriber(id: string, r: () => number, done: () => boolean, head: () => Promise<number>): Promise<Segment<SubscribeSurfaceResponse>[]> {
  const segs: Segment<SubscribeSurfaceResponse>[] = [];
  const mode = r();
  let after: number | undefined = mode < 0.3 ? undefined : Math.floor(r() * (Math.max(0, await head()) + 1));
  let snapshot = mode >= 0.3 && mode < 0.45;
  for (;;) {
    const seg: Segment<SubscribeSurfaceResponse> = { after, snapshot, msgs: [] };
    segs.push(seg);
    const tail = new Tail(t.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial({ sessionId: id, afterSeq: after, snapshot, heartbeatIntervalMs: 100 })));
    const last = done();
    const want = 1 + Math.floor(r() * 60);
    if (last) {
      const h = await head();
      await tail.until((x) => x.ended || ((x.msgs.at(-1)?.cursor ?? -1) >= h && x.msgs.some((m) => m.kind?.$case === 'caughtUp')), 20_000, 'final catch-up');
    } else {
      await tail.until((x) => x.ended || x.msgs.length >= want || (done() && x.msgs.length > 0), 20_000, 'some messages');
    }
    tail.cancel();
    if (tail.error && tail.error.code !== 1) throw tail.error;
    seg.msgs.push(...tail.msgs);
    const c = tail.msgs.at(-1)?.cursor;
    if (c !== undefined) after = c;
    if (tail.msgs.length > 0) snapshot = false;
    if (last) return segs;
  }
}

async function eventSubscriber(id: string, r: () => number, done: () => boolean, head: () => Promise<number>): Promise<{ start: number | undefined; msgs: SubscribeEventsResponse[] }> {
  const start = r() < 0.5 ? undefined : Math.floor(r() * (Math.max(0, await head()) + 1));
  let after = start;
  const msgs: SubscribeEventsResponse[] = [];
  for (;;) {
    const last = done();
    const tail = new Tail(t.client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: id, afterSeq: after, heartbeatIntervalMs: 100 })));
    if (last) {
      const h = await head();
      await tail.until((x) => x.ended || (x.msgs.at(-1)?.cursor ?? -1) >= h, 20_000, 'final events');
    } else {
      const want = 1 + Math.floor(r() * 80);
      await tail.until((x) => x.ended || x.msgs.length >= want || (done() && x.msgs.length > 0), 20_000, 'some events');
    }
    tail.cancel();
    if (tail.error && tail.error.code !== 1) throw tail.error;
    msgs.push(...tail.msgs);
    const c = tail.msgs.at(-1)?.cursor;
    if (c !== undefined) after = c;
    if (last) return { start, msgs };
  }
}

function surfaceEffects(e: PbSessionEvent): boolean {
  return e.surfaceOp !== undefined;
}

describe('subscriptions under concurrent appends, disconnects and resumes', () => {
  it.each([1, 2, 3, 4])('seed %i: every subscriber rebuilds exactly the server surface and event list', async (seed) => {
    const r = rng(seed * 7919);
    const id = `stress-${seed}`;
    await a.createSession({ sessionId: id });
    await a.appendEvents({ sessionId: id, events: [input('turn/start', { turn: 1 }), userMessage('u0', 'start')] });
    const tools = new Map<number, Tool>();
    let finished = false;
    const head = async (): Promise<number> => (await a.getSurface({ sessionId: id })).headSeq ?? -1;
    const writers = Promise.all([0, 1, 2].map((k) => appender(id, rng(seed * 100 + k), 60, tools, `w${k}`))).finally(() => { finished = true; });
    const subs = Promise.all(Array.from({ length: 6 }, (_, k) => surfaceSubscriber(id, rng(seed * 1000 + k), () => finished, head)));
    const evSubs = Promise.all(Array.from({ length: 3 }, (_, k) => eventSubscriber(id, rng(seed * 5000 + k), () => finished, head)));
    await writers;
    const [surfaceRuns, eventRuns] = await Promise.all([subs, evSubs]);
    void r;

    const log = await allEvents(a, id);
    const server = await a.getSurface({ sessionId: id });
    expect(replay(log).surface).toEqual(server.seqs);
    const headSeq = server.headSeq ?? -1;

    for (const segs of surfaceRuns) {
      const first = segs[0] as Segment<SubscribeSurfaceResponse>;
      const cs = new ClientSurface();
      let start = -1;
      if (!first.snapshot && first.after !== undefined) {
        start = first.after;
        cs.seqs = replay(log.filter((e) => e.seq <= start)).surface;
        cs.cursor = start;
      }
      for (const seg of segs) for (const m of seg.msgs) cs.apply(m);
      if (first.snapshot) {
        const snap = first.msgs[0];
        start = snap?.cursor ?? -1;
      }
      expect(cs.cursor).toBe(headSeq);
      expect(cs.seqs).toEqual(server.seqs);
      expect(cs.events).toEqual(log.filter((e) => e.seq > start && surfaceEffects(e)).map((e) => e.seq));
    }
    for (const run of eventRuns) {
      const got = run.msgs.filter((m) => m.kind?.$case === 'event').map((m) => (m.kind?.$case === 'event' ? m.kind.value : undefined));
      const expected = log.filter((e) => e.seq > (run.start ?? -1));
      expect(got.map((e) => e?.seq)).toEqual(expected.map((e) => e.seq));
      expect(got).toEqual(expected);
    }
    expect(t.server.app.feed.listenerCount(id)).toBe(0);
  }, 60_000);
});
