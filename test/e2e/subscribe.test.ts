import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { call, startTestServer, type TestServer } from '../support/test-server.js';
import { assistantMessage, input, replaceOp, toolResult, userMessage } from '../support/events.js';
import { ClientSurface, Tail, eventually } from '../support/subscribe.js';
import {
  DataFormat, SubscribeEventsRequest, SubscribeSurfaceRequest,
  type SubscribeEventsResponse, type SubscribeSurfaceResponse,
} from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';

let t: TestServer;
beforeAll(async () => { t = await startTestServer(); });
afterAll(async () => { await t.stop(); });

const chunk = (text: string): EventInput => input('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text } });

async function create(id: string): Promise<void> {
  // Deltas of arbitrary replaces (some split tool pairs): the tool-pairing guard is off here.
  await call(t.client.createSession.bind(t.client), { sessionId: id, labels: {}, strict: false, pairingGuard: false });
}

async function append(id: string, events: EventInput[]): Promise<number[]> {
  return (await call(t.client.appendEvents.bind(t.client), { sessionId: id, idempotencyKey: '', events })).seqs;
}

function surface(req: Partial<SubscribeSurfaceRequest>): Tail<SubscribeSurfaceResponse> {
  return new Tail(t.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial(req)));
}

function events(req: Partial<SubscribeEventsRequest>): Tail<SubscribeEventsResponse> {
  return new Tail(t.client.subscribeEvents(SubscribeEventsRequest.fromPartial(req)));
}

function rebuild(msgs: readonly SubscribeSurfaceResponse[]): ClientSurface {
  const s = new ClientSurface();
  for (const m of msgs) s.apply(m);
  return s;
}

const kinds = (msgs: readonly SubscribeSurfaceResponse[]): string[] => msgs.map((m) => `${m.kind?.$case}@${m.cursor ?? '-'}`);

/** turn 1: user, 3 chunks, assistant with a tool call, tool result (seqs 0..6). */
async function seed(id: string): Promise<void> {
  await create(id);
  await append(id, [
    input('turn/start', { turn: 1 }),
    userMessage('u1', 'hello'),
    chunk('a'), chunk('b'), chunk('c'),
    assistantMessage('a1', 'calling', [1], [{ id: 'c1', name: 'ls' }]),
    toolResult('t1', 'c1', 'file list', 5),
  ]);
}

describe('SubscribeSurface', () => {
  it('catches up (coalesced checkpoints), signals caught-up, then follows live appends and replaces', async () => {
    await seed('s-live');
    const tail = surface({ sessionId: 's-live' });
    await tail.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'), 10_000, 'caught up');
    expect(kinds(tail.msgs)).toEqual(['append@1', 'append@5', 'append@6', 'caughtUp@6']);
    // A trailing run of non-surface events gets one checkpoint; a compaction replaces 1..5; a
    // tool/result rewrite replaces 6 with only inner content changed.
    await append('s-live', [chunk('x'), chunk('y'), input('turn/end', { turn: 1 })]);
    await append('s-live', [input('user/message', { id: 'sum', role: 'user', content: [{ type: 'text', text: 'summary' }], source: { kind: 'plugin', plugin: 'compact' } },
      { surfaceOp: replaceOp(1, 5), sourceEventSeqs: { seqs: [1, 5] } })]);
    await append('s-live', [input('tool/result', {
      turn: 1, step: 1,
      message: { id: 't1', role: 'user', content: [{ type: 'tool-result', toolCallId: 'c1', content: [{ type: 'text', text: '[pruned]' }] }], source: { kind: 'tool', callId: 'c1' } },
    }, { surfaceOp: replaceOp(6, 6), sourceEventSeqs: { seqs: [6] } })]);
    await tail.until((x) => (x.msgs.at(-1)?.cursor ?? -1) >= 11, 10_000, 'live deltas');
    expect(kinds(tail.msgs).slice(4)).toEqual(['checkpoint@9', 'replace@10', 'replace@11']);
    const rep = tail.msgs[5]?.kind;
    expect(rep?.$case === 'replace' && rep.value).toEqual({ start: 1, end: 5, seq: 10, shadowedSeqs: [1, 5] });
    const got = rebuild(tail.msgs);
    const server = await call(t.client.getSurface.bind(t.client), { sessionId: 's-live' });
    expect(got.seqs).toEqual(server.seqs);
    expect(got.seqs).toEqual([10, 11]);
    tail.cancel();
  });

  it('resumes from any cursor with exactly the deltas after it (shadowed seqs computed in catch-up)', async () => {
    await seed('s-resume');
    await append('s-resume', [input('user/message', { id: 'sum', role: 'user', content: [{ type: 'text', text: 'summary' }], source: { kind: 'plugin', plugin: 'compact' } },
      { surfaceOp: replaceOp(1, 6), sourceEventSeqs: { seqs: [1, 5, 6] } }), chunk('z')]);
    const full = surface({ sessionId: 's-resume' });
    await full.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
    full.cancel();
    const all = full.msgs.filter((m) => m.kind?.$case !== 'caughtUp');
    expect(kinds(all)).toEqual(['append@1', 'append@5', 'append@6', 'replace@7', 'checkpoint@8']);
    for (let after = 0; after <= 8; after++) {
      const tail = surface({ sessionId: 's-resume', afterSeq: after });
      await tail.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
      tail.cancel();
      const got = tail.msgs.filter((m) => m.kind?.$case !== 'caughtUp');
      const expected = all.filter((m) => (m.cursor ?? -1) > after);
      // A resumed stream may coalesce differently only in checkpoints; deltas are identical.
      expect(got.filter((m) => m.kind?.$case !== 'checkpoint')).toEqual(expected.filter((m) => m.kind?.$case !== 'checkpoint'));
      expect(tail.msgs.at(-1)?.cursor).toBe(8);
    }
  });

  it('starts with a snapshot of the current surface when asked', async () => {
    await seed('s-snap');
    const tail = surface({ sessionId: 's-snap', snapshot: true, afterSeq: 2 });
    await tail.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
    expect(kinds(tail.msgs)).toEqual(['snapshot@6', 'caughtUp@6']);
    const k = tail.msgs[0]?.kind;
    expect(k?.$case === 'snapshot' && k.value.seqs).toEqual([1, 5, 6]);
    await append('s-snap', [userMessage('u2', 'more')]);
    await tail.until((x) => x.msgs.length >= 3);
    expect(rebuild(tail.msgs).seqs).toEqual([1, 5, 6, 7]);
    tail.cancel();
  });

  it('attaches derived messages only with include_messages, typed data on request', async () => {
    await seed('s-msg');
    const plain = surface({ sessionId: 's-msg' });
    const withMsgs = surface({ sessionId: 's-msg', includeMessages: true, dataFormat: DataFormat.DATA_FORMAT_TYPED });
    await plain.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
    await withMsgs.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
    expect(plain.msgs.every((m) => m.message === undefined)).toBe(true);
    expect(plain.msgs[0]?.event?.data?.kind?.$case).toBe('json');
    const first = withMsgs.msgs[0];
    expect(first?.message?.seq).toBe(1);
    expect(JSON.parse(first?.message?.messageJson ?? '{}')).toMatchObject({ id: 'u1', role: 'user' });
    expect(first?.message?.message).toBeDefined();
    expect(withMsgs.msgs[2]?.message?.seq).toBe(6);
    // Live deltas too (encoded once per variant, written to both streams).
    await append('s-msg', [userMessage('u2', 'live')]);
    await plain.until((x) => x.msgs.length >= 5);
    await withMsgs.until((x) => x.msgs.length >= 5);
    expect(plain.msgs[4]?.message).toBeUndefined();
    expect(JSON.parse(withMsgs.msgs[4]?.message?.messageJson ?? '{}')).toMatchObject({ id: 'u2' });
    plain.cancel();
    withMsgs.cancel();
  });

  it('sends heartbeats at the requested interval carrying the cursor', async () => {
    await seed('s-hb');
    const tail = surface({ sessionId: 's-hb', heartbeatIntervalMs: 100 });
    await tail.until((x) => x.msgs.filter((m) => m.kind?.$case === 'heartbeat').length >= 2, 5000, 'two heartbeats');
    const hb = tail.msgs.filter((m) => m.kind?.$case === 'heartbeat');
    expect(hb.every((m) => m.cursor === 6)).toBe(true);
    tail.cancel();
  });

  it('ends with NOT_FOUND when the session is deleted, and releases its listener', async () => {
    await seed('s-del');
    const tail = surface({ sessionId: 's-del' });
    await tail.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
    expect(t.server.app.feed.listenerCount('s-del')).toBe(1);
    await call(t.client.deleteSession.bind(t.client), { sessionId: 's-del' });
    await tail.until((x) => x.ended);
    expect(tail.error?.code).toBe(status.NOT_FOUND);
    expect(tail.decoded?.reason).toBe('SESSION_NOT_FOUND');
    expect(t.server.app.feed.listenerCount('s-del')).toBe(0);
  });

  it('refuses unknown sessions and cursors beyond the head', async () => {
    const a = surface({ sessionId: 'nope' });
    await a.until((x) => x.ended);
    expect(a.error?.code).toBe(status.NOT_FOUND);
    await seed('s-range');
    const b = surface({ sessionId: 's-range', afterSeq: 7 });
    await b.until((x) => x.ended);
    expect(b.error?.code).toBe(status.OUT_OF_RANGE);
    expect(b.decoded?.reason).toBe('CURSOR_OUT_OF_RANGE');
    expect(t.server.app.feed.listenerCount('s-range')).toBe(0);
  });

  it('releases every listener when subscribers cancel', async () => {
    await seed('s-cancel');
    const tails = Array.from({ length: 5 }, (_, i) => surface({ sessionId: 's-cancel', afterSeq: i }));
    const ev = events({ sessionId: 's-cancel' });
    for (const x of [...tails, ev]) await x.until((y) => y.msgs.length > 0);
    expect(t.server.app.feed.listenerCount('s-cancel')).toBe(6);
    for (const x of [...tails, ev]) x.cancel();
    await eventually(() => t.server.app.feed.listenerCount('s-cancel') === 0, 5000, 'listeners released');
    await append('s-cancel', [userMessage('u9', 'after cancel')]);
    expect(t.server.app.feed.listenerCount('s-cancel')).toBe(0);
    expect(t.streams?.active.size).toBe(0);
  });
});

describe('SubscribeEvents', () => {
  it('delivers every event in order: catch-up, caught-up, live, resumable', async () => {
    await seed('e-all');
    const tail = events({ sessionId: 'e-all' });
    await tail.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
    expect(tail.msgs.map((m) => m.cursor)).toEqual([0, 1, 2, 3, 4, 5, 6, 6]);
    await append('e-all', [chunk('q'), input('turn/end', { turn: 1 })]);
    await tail.until((x) => x.msgs.length >= 10);
    const evs = tail.msgs.filter((m) => m.kind?.$case === 'event');
    expect(evs.map((m) => (m.kind?.$case === 'event' ? m.kind.value.seq : -1))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    tail.cancel();
    const resumed = events({ sessionId: 'e-all', afterSeq: 6 });
    await resumed.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
    expect(resumed.msgs.map((m) => `${m.kind?.$case}@${m.cursor}`)).toEqual(['event@7', 'event@8', 'caughtUp@8']);
    resumed.cancel();
  });
});

describe('shutdown', () => {
  it('ends open streams with UNAVAILABLE / SERVER_SHUTDOWN and the resume cursor', async () => {
    const own = await startTestServer();
    try {
      const c = own.client;
      await call(c.createSession.bind(c), { sessionId: 'x', labels: {}, strict: false });
      await call(c.appendEvents.bind(c), { sessionId: 'x', idempotencyKey: '', events: [userMessage('u', 'hi'), chunk('c')] });
      const s = new Tail(c.subscribeSurface(SubscribeSurfaceRequest.fromPartial({ sessionId: 'x' })));
      const e = new Tail(c.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: 'x' })));
      await s.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
      await e.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'));
      const stopping = own.server.shutdown();
      await s.until((x) => x.ended);
      await e.until((x) => x.ended);
      await stopping;
      for (const x of [s.decoded, e.decoded]) {
        expect(x?.code).toBe(status.UNAVAILABLE);
        expect(x?.reason).toBe('SERVER_SHUTDOWN');
        expect(x?.metadata.cursor).toBe('1');
      }
      expect(own.server.app.feed.listenerCount()).toBe(0);
    } finally {
      await own.stop();
    }
  });
});
