/**
 * Every SessionService RPC against a real server on 127.0.0.1:0 with the generated client: happy
 * paths, then every error reason's status code and decoded google.rpc details.
 */
import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, status, type ServiceError } from '@grpc/grpc-js';
import { startServer } from '../../src/main.js';
import { DomainError } from '../../src/domain/errors.js';
import { deriveMessages } from '../../src/domain/derive.js';
import { protoToEvent } from '../../src/server/convert.js';
import { Direction, DataFormat, ImportOptions, MessageView, SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { input, userMessage, assistantMessage, toolResult, replaceOp } from '../support/events.js';
import { FIXTURES, allEvents, api, failure, fixture, replay, until, type Api } from '../support/e2e.js';

let t: TestServer;
let a: Api;
beforeAll(async () => {
  t = await startTestServer({ limits: { maxBatchEvents: 50, maxEventBytes: 20_000, maxPageSize: 500, defaultPageSize: 100 } as never });
  a = api(t.client);
});
afterAll(async () => { await t.stop(); });

const APPEND = { $case: 'append', value: {} } as const;
const json = (e: { data?: { kind?: { $case: string; value: unknown } } }): unknown => {
  const k = e.data?.kind;
  if (k?.$case !== 'json') throw new Error(`expected json data, got ${k?.$case}`);
  return JSON.parse(k.value as string);
};

/** A balanced turn with a tool round: turn/start, user, step, assistant(tool call), tool/call, tool/result, step/end, turn/end. */
function toolTurn(turn: number, base: number): EventInput[] {
  return [
    input('turn/start', { turn }),
    userMessage(`u${turn}`, `question ${turn}`),
    input('step/start', { turn, step: 1 }),
    input('assistant/chunk', { turn, step: 1, chunk: { type: 'text-delta', index: 0, text: 'x' } }),
    assistantMessage(`a${turn}`, 'calling', [base + 3], [{ id: `c${turn}`, name: 'read' }], turn, 1),
    input('tool/call', { turn, step: 1, callId: `c${turn}`, name: 'read', arguments: '{}' }),
    toolResult(`r${turn}`, `c${turn}`, `result ${turn}`, base + 5, turn, 1),
    input('step/end', { turn, step: 1 }),
    input('turn/end', { turn, reason: { kind: 'stop' } }),
  ];
}

describe('sessions', () => {
  it('CreateSession with an id, labels and header fields; GetSession returns them with counts', async () => {
    const { session } = await a.createSession({ sessionId: 'hdr', labels: { team: 'x', env: 'test' }, cwd: '/w', origin: 'subagent', delegationDepth: 2, agentPreset: 'minimal', strict: true });
    expect(session).toMatchObject({ id: 'hdr', version: 0, cwd: '/w', origin: 'subagent', delegationDepth: 2, agentPreset: 'minimal', labels: { team: 'x', env: 'test' }, eventCount: 0, surfaceLength: 0, strict: true });
    expect(session?.headSeq).toBeUndefined();
    expect(session?.parentSession).toBeUndefined();
    expect(Math.abs((session?.createdAt ?? 0) - Date.now())).toBeLessThan(60_000);
    const got = await a.getSession({ sessionId: 'hdr' });
    // GetSession adds the token counts (issue #34): an empty session's are zero.
    expect(session?.usage).toBeUndefined();
    expect(got.session).toEqual({ ...session, surfaceTokens: 0, usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: undefined } });
    // The export header carries the same fields.
    const header = JSON.parse((await a.exportSession('hdr')).split('\n')[0]!);
    expect(header).toEqual({ type: 'session', version: 0, id: 'hdr', createdAt: session?.createdAt, cwd: '/w', origin: 'subagent', delegationDepth: 2, agentPreset: 'minimal' });
  });

  it('CreateSession without an id generates a UUID; optional header fields stay absent (delegationDepth defaults to 0)', async () => {
    const { session } = await a.createSession({});
    expect(session?.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(session?.cwd).toBeUndefined();
    expect(session?.origin).toBeUndefined();
    expect(session?.agentPreset).toBeUndefined();
    expect(session?.delegationDepth).toBe(0);
    const header = JSON.parse((await a.exportSession(session!.id)).split('\n')[0]!);
    expect(Object.keys(header).sort()).toEqual(['createdAt', 'delegationDepth', 'id', 'type', 'version']);
  });

  it('GetSession counts head_seq, event_count and surface_length', async () => {
    // This compaction (1..4) leaves the result at 6 without its call: only a session with the
    // tool-pairing guard off accepts it.
    await a.createSession({ sessionId: 'counts', pairingGuard: false });
    await a.appendEvents({ sessionId: 'counts', events: toolTurn(1, 0) });
    await a.appendEvents({ sessionId: 'counts', events: [input('user/message', { id: 's', role: 'user', content: [{ type: 'text', text: 'sum' }], source: { kind: 'plugin', plugin: 'compact' } }, { surfaceOp: replaceOp(1, 4), sourceEventSeqs: { seqs: [1, 4] } })] });
    const { session } = await a.getSession({ sessionId: 'counts' });
    expect(session).toMatchObject({ headSeq: 9, eventCount: 10, surfaceLength: 2 });
    const surf = await a.getSurface({ sessionId: 'counts' });
    expect(surf).toEqual({ seqs: [9, 6], replaceGeneration: 1, headSeq: 9 });
  });

  it('ListSessions: newest first, label selector, pages concatenated == all', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const id = `ls-${i}`;
      ids.push(id);
      await a.createSession({ sessionId: id, labels: { suite: 'ls', parity: i % 2 === 0 ? 'even' : 'odd' } });
      // createdAt has ms resolution: wait for the clock to move so the order is unambiguous.
      const t0 = Date.now();
      while (Date.now() === t0) { /* spin < 1 ms */ }
    }
    const all = await a.listSessions({ labelSelector: { suite: 'ls' }, pageSize: 100 });
    expect(all.sessions.map((s) => s.id)).toEqual([...ids].reverse());
    expect(all.nextPageToken).toBe('');
    const paged: string[] = [];
    let pageToken = '';
    let pages = 0;
    do {
      const p = await a.listSessions({ labelSelector: { suite: 'ls' }, pageSize: 3, pageToken });
      expect(p.sessions.length).toBeLessThanOrEqual(3);
      paged.push(...p.sessions.map((s) => s.id));
      pageToken = p.nextPageToken;
      pages++;
    } while (pageToken);
    expect(pages).toBe(3);
    expect(paged).toEqual([...ids].reverse());
    const odd = await a.listSessions({ labelSelector: { suite: 'ls', parity: 'odd' } });
    expect(odd.sessions.map((s) => s.id)).toEqual(['ls-5', 'ls-3', 'ls-1']);
    expect(odd.sessions.every((s) => s.labels.parity === 'odd' && s.surfaceLength === 0)).toBe(true);
    // Unfiltered listing contains them too, newest first overall.
    const everything = await a.listSessions({ pageSize: 500 });
    const created = everything.sessions.map((s) => s.createdAt);
    expect(created).toEqual([...created].sort((x, y) => y - x));
  });

  it('label selectors match exactly (no wildcards, quotes and unicode are plain characters)', async () => {
    const labels = [{ k: 'a%', q: "it's" }, { k: 'a_', q: 'x"y' }, { k: 'ab', q: 'ü€' }];
    for (const [i, l] of labels.entries()) await a.createSession({ sessionId: `lbl-${i}`, labels: { suite: 'lbl', [l.k]: l.q } });
    for (const [i, l] of labels.entries()) {
      const hit = await a.listSessions({ labelSelector: { suite: 'lbl', [l.k]: l.q } });
      expect(hit.sessions.map((x) => x.id)).toEqual([`lbl-${i}`]);
      expect(hit.sessions[0]?.labels).toEqual({ suite: 'lbl', [l.k]: l.q });
    }
    expect((await a.listSessions({ labelSelector: { suite: 'lbl', 'a%': '%' } })).sessions).toEqual([]);
    expect((await a.listSessions({ labelSelector: { suite: 'lbl', ab: '' } })).sessions).toEqual([]);
  });

  it('DeleteSession removes the session and its events', async () => {
    await a.createSession({ sessionId: 'del' });
    await a.appendEvents({ sessionId: 'del', events: [userMessage('u', 'x')] });
    expect(await a.deleteSession({ sessionId: 'del' })).toEqual({});
    expect((await failure(a.getSession({ sessionId: 'del' }))).reason).toBe('SESSION_NOT_FOUND');
    expect((await failure(a.listEvents({ sessionId: 'del' }))).reason).toBe('SESSION_NOT_FOUND');
    expect((await failure(a.deleteSession({ sessionId: 'del' }))).reason).toBe('SESSION_NOT_FOUND');
    // The id is free again, and the new session starts empty.
    await a.createSession({ sessionId: 'del' });
    expect((await a.getSession({ sessionId: 'del' })).session).toMatchObject({ eventCount: 0 });
  });
});

describe('AppendEvents', () => {
  it('typed data forms are stored as the reference JSON shape, and read back typed', async () => {
    await a.createSession({ sessionId: 'typed' });
    const msg = (id: string, role: string, content: unknown[], source: unknown) => ({ id, role, content, source }) as never;
    const res = await a.appendEvents({
      sessionId: 'typed', events: [
        { type: 'user/message', surfaceOp: APPEND, data: { kind: { $case: 'userMessage', value: msg('u1', 'user', [{ block: { $case: 'text', value: { text: 'hi' } } }], { kind: { $case: 'user', value: {} } }) } } },
        {
          type: 'assistant/message', surfaceOp: APPEND, sourceEventSeqs: { seqs: [] }, data: {
            kind: {
              $case: 'assistantMessage', value: {
                turn: 1, step: 1, interrupted: true,
                usage: { inputTokens: 10, outputTokens: 4, reasoningTokens: 2 },
                message: msg('a1', 'assistant', [
                  { block: { $case: 'reasoning', value: { text: 'think' } } },
                  { block: { $case: 'toolCall', value: { id: 'c1', name: 'read', arguments: '{"p":1}' } } },
                ], { kind: { $case: 'model', value: { provider: 'p', model: 'm', replayStateJson: '{"k":[1,2]}' } } }),
              },
            },
          },
        },
        {
          type: 'tool/result', surfaceOp: APPEND, data: {
            kind: {
              $case: 'toolResult', value: {
                turn: 1, step: 1, metaJson: '{"path":"/x"}', error: { name: 'E', code: 'C' },
                message: msg('r1', 'user', [{ block: { $case: 'toolResult', value: { toolCallId: 'c1', isError: true, content: [{ block: { $case: 'text', value: { text: 'boom' } } }] } } }], { kind: { $case: 'tool', value: { callId: 'c1' } } }),
              },
            },
          },
        },
      ],
    });
    expect(res).toEqual({ seqs: [0, 1, 2], replayed: false, surfaceLength: 3 });
    const { events } = await a.listEvents({ sessionId: 'typed' });
    expect(events.map(json)).toEqual([
      { id: 'u1', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } },
      {
        turn: 1, step: 1, interrupted: true, usage: { inputTokens: 10, outputTokens: 4, reasoningTokens: 2 },
        message: { id: 'a1', role: 'assistant', content: [{ type: 'reasoning', text: 'think' }, { type: 'tool-call', id: 'c1', name: 'read', arguments: '{"p":1}' }], source: { kind: 'model', provider: 'p', model: 'm', replayState: { k: [1, 2] } } },
      },
      {
        turn: 1, step: 1, meta: { path: '/x' }, error: { name: 'E', code: 'C' },
        message: { id: 'r1', role: 'user', content: [{ type: 'tool-result', toolCallId: 'c1', isError: true, content: [{ type: 'text', text: 'boom' }] }], source: { kind: 'tool', callId: 'c1' } },
      },
    ]);
    expect(events[1]?.sourceEventSeqs).toEqual({ seqs: [] });
    expect(events[0]?.sourceEventSeqs).toBeUndefined();
    const typed = await a.listEvents({ sessionId: 'typed', dataFormat: DataFormat.DATA_FORMAT_TYPED });
    expect(typed.events.map((e) => e.data?.kind?.$case)).toEqual(['userMessage', 'assistantMessage', 'toolResult']);
    const tr = typed.events[2]?.data?.kind;
    expect(tr?.$case === 'toolResult' && tr.value.metaJson).toBe('{"path":"/x"}');
  });

  it('DATA_FORMAT_TYPED falls back to json where the typed form would lose something', async () => {
    await a.createSession({ sessionId: 'typed-fallback' });
    // An extra key (`extra`) and a legacy unwrapped source are not representable in the typed form.
    await a.appendEvents({ sessionId: 'typed-fallback', events: [input('user/message', { id: 'u', role: 'user', content: [{ type: 'text', text: 'x' }], source: { kind: 'user' }, extra: 1 }, { surfaceOp: APPEND }), input('turn/start', { turn: 1 })] });
    const { events } = await a.listEvents({ sessionId: 'typed-fallback', dataFormat: DataFormat.DATA_FORMAT_TYPED });
    // turn/start has a typed form (exact), the user message with an extra key does not.
    expect(events.map((e) => e.data?.kind?.$case)).toEqual(['json', 'turnStart']);
    expect(json(events[0]!)).toMatchObject({ extra: 1 });
  });

  it('expected_last_seq (-1 on empty), explicit seq and explicit time', async () => {
    await a.createSession({ sessionId: 'cas' });
    const wrong = await failure(a.appendEvents({ sessionId: 'cas', expectedLastSeq: 0, events: [userMessage('u', 'x')] }));
    expect(wrong).toMatchObject({ code: status.FAILED_PRECONDITION, reason: 'HEAD_MISMATCH', metadata: { expected: '0', actual: '-1' } });
    expect(await a.appendEvents({ sessionId: 'cas', expectedLastSeq: -1, events: [userMessage('u', 'x')] })).toMatchObject({ seqs: [0] });
    expect(await a.appendEvents({ sessionId: 'cas', expectedLastSeq: 0, events: [input('turn/start', { turn: 1 }, { seq: 1, time: 1234 })] })).toMatchObject({ seqs: [1] });
    const e = await failure(a.appendEvents({ sessionId: 'cas', events: [input('turn/end', { turn: 1 }, { seq: 5 })] }));
    expect(e).toMatchObject({ code: status.FAILED_PRECONDITION, reason: 'SEQ_NOT_CONTIGUOUS', metadata: { index: '0' } });
    const { events } = await a.listEvents({ sessionId: 'cas' });
    expect(events.map((x) => [x.seq, x.type])).toEqual([[0, 'user/message'], [1, 'turn/start']]);
    expect(events[1]?.time).toBe(1234);
  });

  it('idempotency key: same response with replayed=true, also after a restart on the same db file; a different body is IDEMPOTENCY_KEY_REUSED', async () => {
    const s = await startTestServer();
    try {
      const c = api(s.client);
      await c.createSession({ sessionId: 'idem' });
      const req = { sessionId: 'idem', idempotencyKey: 'k1', events: [userMessage('u', 'x'), input('turn/start', { turn: 1 })] };
      const first = await c.appendEvents(req);
      expect(first).toEqual({ seqs: [0, 1], replayed: false, surfaceLength: 1 });
      await c.appendEvents({ sessionId: 'idem', events: [input('turn/end', { turn: 1 })] });
      expect(await c.appendEvents(req)).toEqual({ seqs: [0, 1], replayed: true, surfaceLength: 1 });
      const reused = await failure(c.appendEvents({ ...req, events: [userMessage('u', 'y')] }));
      expect(reused).toMatchObject({ code: status.FAILED_PRECONDITION, reason: 'IDEMPOTENCY_KEY_REUSED', domain: 'palimpsest.dev', metadata: { sessionId: 'idem', idempotencyKey: 'k1' } });
      expect(reused.preconditionFailure?.violations[0]?.type).toBe('IDEMPOTENCY_KEY_REUSED');
      // Restart on the same file: the key is durable.
      s.client.close();
      await s.server.shutdown();
      const again = await startServer({ listen: '127.0.0.1:0', logLevel: 'silent', db: s.dbPath });
      const client = new SessionServiceClient(again.address, credentials.createInsecure());
      try {
        const c2 = api(client);
        expect(await c2.appendEvents(req)).toEqual({ seqs: [0, 1], replayed: true, surfaceLength: 1 });
        expect((await failure(c2.appendEvents({ ...req, events: [userMessage('u', 'z')] }))).reason).toBe('IDEMPOTENCY_KEY_REUSED');
        expect((await c2.getSession({ sessionId: 'idem' })).session?.eventCount).toBe(3);
      } finally {
        client.close();
        await again.shutdown();
      }
    } finally {
      await s.stop().catch(() => undefined);
    }
  });

  it('concurrent retries of one idempotency key append once', async () => {
    await a.createSession({ sessionId: 'idem-race' });
    const req = { sessionId: 'idem-race', idempotencyKey: 'race', events: [userMessage('u', 'x')] };
    const results = await Promise.all(Array.from({ length: 8 }, () => a.appendEvents(req)));
    expect(new Set(results.map((r) => r.seqs.join()))).toEqual(new Set(['0']));
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
    expect((await a.getSession({ sessionId: 'idem-race' })).session?.eventCount).toBe(1);
  });
});

describe('ListEvents', () => {
  const id = 'log';
  beforeAll(async () => {
    await a.createSession({ sessionId: id });
    for (let turn = 1; turn <= 4; turn++) await a.appendEvents({ sessionId: id, events: toolTurn(turn, (turn - 1) * 9) });
  });

  it('forward and backward pages concatenated == the log, with from_seq', async () => {
    const whole = await a.listEvents({ sessionId: id, pageSize: 500 });
    expect(whole.events.map((e) => e.seq)).toEqual(Array.from({ length: 36 }, (_, i) => i));
    expect(whole.nextPageToken).toBe('');
    for (const pageSize of [1, 5, 7, 36]) {
      const fwd = await allEvents(a, id, pageSize);
      expect(fwd).toEqual(whole.events);
    }
    const back: number[] = [];
    let pageToken = '';
    do {
      const p = await a.listEvents({ sessionId: id, direction: Direction.DIRECTION_BACKWARD, pageSize: 8, pageToken });
      back.push(...p.events.map((e) => e.seq));
      pageToken = p.nextPageToken;
    } while (pageToken);
    expect(back).toEqual(Array.from({ length: 36 }, (_, i) => 35 - i));
    expect((await a.listEvents({ sessionId: id, fromSeq: 30, pageSize: 3 })).events.map((e) => e.seq)).toEqual([30, 31, 32]);
    expect((await a.listEvents({ sessionId: id, fromSeq: 2, direction: Direction.DIRECTION_BACKWARD })).events.map((e) => e.seq)).toEqual([2, 1, 0]);
    expect((await a.listEvents({ sessionId: id, fromSeq: 99 })).events).toEqual([]);
  });

  it('a page far over 64 KiB (written as prefix + payload, not copied) arrives whole, ASCII and non-ASCII texts exact', async () => {
    const big = 'big-page';
    await a.createSession({ sessionId: big });
    const texts = Array.from({ length: 120 }, (_, i) => (i % 2 === 0 ? `ascii ${i} `.repeat(120) : `ünïcödé ✓ ${i} 😀 `.repeat(60)));
    const events = texts.map((t, i) => input(i % 3 === 0 ? 'plugin/ascii' : 'plugin/ünï', { i, t, time: 1_760_000_000_000 + i }));
    for (let i = 0; i < events.length; i += 40) await a.appendEvents({ sessionId: big, events: events.slice(i, i + 40) });
    const page = await a.listEvents({ sessionId: big, pageSize: 200 });
    expect(page.events.map((e) => e.seq)).toEqual(texts.map((_, i) => i));
    expect(page.events.map((e) => (json(e) as { t: string }).t)).toEqual(texts);
    expect(page.events.map((e) => e.type)).toEqual(texts.map((_, i) => (i % 3 === 0 ? 'plugin/ascii' : 'plugin/ünï')));
    expect(page.nextPageToken).toBe('');
  });

  it('type filter, paged', async () => {
    const seqs: number[] = [];
    let pageToken = '';
    do {
      const p = await a.listEvents({ sessionId: id, types: ['tool/result', 'turn/start'], pageSize: 3, pageToken });
      expect(p.events.every((e) => e.type === 'tool/result' || e.type === 'turn/start')).toBe(true);
      seqs.push(...p.events.map((e) => e.seq));
      pageToken = p.nextPageToken;
    } while (pageToken);
    expect(seqs).toEqual([0, 6, 9, 15, 18, 24, 27, 33]);
  });

  it('GetSurface equals a replay of the listed log', async () => {
    const surf = await a.getSurface({ sessionId: id });
    expect(surf.seqs).toEqual(replay(await allEvents(a, id, 10)).surface);
    expect(surf.headSeq).toBe(35);
  });
});

describe('GetMessages', () => {
  it('model history vs transcript, after a replace (compaction) and a prune (tool/result rewrite)', async () => {
    const id = 'msgs';
    await a.createSession({ sessionId: id });
    await a.appendEvents({ sessionId: id, events: toolTurn(1, 0) });
    await a.appendEvents({ sessionId: id, events: toolTurn(2, 9) });
    // surface: 1 4 6 10 13 15
    const model0 = await a.getMessages({ sessionId: id, view: MessageView.MESSAGE_VIEW_MODEL_HISTORY });
    expect(model0.messages.map((m) => m.seq)).toEqual([1, 4, 6, 10, 13, 15]);
    // Prune: rewrite tool/result 15's content only.
    const pruned = {
      turn: 2, step: 1,
      message: { id: 'r2', role: 'user', content: [{ type: 'tool-result', toolCallId: 'c2', content: [{ type: 'text', text: '[pruned]' }] }], source: { kind: 'tool', callId: 'c2' } },
    };
    await a.appendEvents({ sessionId: id, events: [input('tool/result', pruned, { surfaceOp: replaceOp(15, 15), sourceEventSeqs: { seqs: [15] } })] });
    // Compaction: one summary replaces turn 1 (seqs 1..6).
    const summary = { id: 'sum', role: 'user', content: [{ type: 'text', text: 'summary' }], source: { kind: 'plugin', plugin: 'compact', compactionId: 'x' } };
    await a.appendEvents({ sessionId: id, events: [input('user/message', summary, { surfaceOp: replaceOp(1, 6), sourceEventSeqs: { seqs: [1, 4, 6] } })] });
    const model = await a.getMessages({ sessionId: id, view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, typed: true });
    expect(model.headSeq).toBe(19);
    expect(model.messages.map((m) => m.seq)).toEqual([19, 10, 13, 18]);
    expect(JSON.parse(model.messages[0]!.messageJson)).toEqual(summary);
    expect(JSON.parse(model.messages[3]!.messageJson)).toEqual(pruned.message);
    expect(model.messages[0]?.message?.source?.kind?.$case).toBe('plugin');
    const transcript = await a.getMessages({ sessionId: id, view: MessageView.MESSAGE_VIEW_TRANSCRIPT });
    expect(transcript.messages.map((m) => m.seq)).toEqual([1, 4, 6, 10, 13, 15]);
    expect(transcript.messages.every((m) => m.message === undefined)).toBe(true);
    expect(JSON.parse(transcript.messages[5]!.messageJson).content[0].content[0].text).toBe('result 2');
    // The surface agrees with a replay, and GetSession counts follow.
    expect((await a.getSurface({ sessionId: id })).seqs).toEqual(replay(await allEvents(a, id)).surface);
    expect((await a.getSession({ sessionId: id })).session).toMatchObject({ surfaceLength: 4, eventCount: 20, headSeq: 19 });
  });
});

describe('ForkSession', () => {
  const src = 'fork-src';
  beforeAll(async () => {
    await a.createSession({ sessionId: src, cwd: '/src' });
    await a.appendEvents({ sessionId: src, events: [...toolTurn(1, 0), input('turn/start', { turn: 2 }), userMessage('u2', 'open')] });
  });

  it('at a seq between turns: child has the prefix plus session/end-seed', async () => {
    const { session } = await a.forkSession({ sessionId: src, atSeq: 8, childSessionId: 'fork-at', labels: { k: 'v' } });
    expect(session).toMatchObject({ id: 'fork-at', parentSession: src, seedLength: 9, cwd: '/src', labels: { k: 'v' }, eventCount: 10, headSeq: 9 });
    const child = await allEvents(a, 'fork-at');
    const parent = await allEvents(a, src);
    expect(child.slice(0, 9)).toEqual(parent.slice(0, 9));
    expect(child[9]).toMatchObject({ seq: 9, type: 'session/end-seed' });
    expect(json(child[9]!)).toEqual({});
    expect((await a.getSurface({ sessionId: 'fork-at' })).seqs).toEqual([1, 4, 6]);
    // The child is independent: appending to it leaves the parent alone.
    await a.appendEvents({ sessionId: 'fork-at', events: [userMessage('c', 'child')] });
    expect((await a.getSession({ sessionId: src })).session?.eventCount).toBe(11);
  });

  it('whole log with a generated child id; OPEN_TURN inside a turn; INVALID_BOUNDARY; existing child id', async () => {
    // The whole log ends inside turn 2.
    const open = await failure(a.forkSession({ sessionId: src }));
    expect(open).toMatchObject({ code: status.FAILED_PRECONDITION, reason: 'OPEN_TURN', domain: 'palimpsest.dev' });
    expect(open.preconditionFailure?.violations).toHaveLength(1);
    expect((await failure(a.forkSession({ sessionId: src, atSeq: 4 }))).reason).toBe('OPEN_TURN');
    const beyond = await failure(a.forkSession({ sessionId: src, atSeq: 500 }));
    expect(beyond).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_BOUNDARY' });
    expect(beyond.badRequest?.fieldViolations).toHaveLength(1);
    const exists = await failure(a.forkSession({ sessionId: src, atSeq: 8, childSessionId: 'fork-at' }));
    expect(exists).toMatchObject({ code: status.ALREADY_EXISTS, reason: 'SESSION_ALREADY_EXISTS', metadata: { sessionId: 'fork-at' } });
    await a.appendEvents({ sessionId: src, events: [input('turn/end', { turn: 2 })] });
    const { session } = await a.forkSession({ sessionId: src });
    expect(session?.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(session).toMatchObject({ seedLength: 12, eventCount: 13, parentSession: src });
    // No failed fork left anything behind.
    const listed = await a.listSessions({ pageSize: 500 });
    expect(listed.sessions.filter((s) => s.parentSession === src).map((s) => s.id).sort()).toEqual(['fork-at', session!.id].sort());
  });
});

describe('RepairSession', () => {
  it('appends the closers exactly once; a second call adds nothing', async () => {
    const id = 'repair';
    await a.createSession({ sessionId: id });
    await a.appendEvents({
      sessionId: id, events: [
        input('turn/start', { turn: 1 }), userMessage('u', 'go'), input('step/start', { turn: 1, step: 1 }),
        assistantMessage('a', 'calling', [], [{ id: 'c1', name: 'read' }]),
        input('tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' }),
      ],
    });
    const { events } = await a.repairSession({ sessionId: id });
    expect(events.map((e) => [e.seq, e.type])).toEqual([[5, 'tool/result'], [6, 'step/end'], [7, 'turn/end']]);
    expect(events[0]?.sourceEventSeqs).toEqual({ seqs: [4] });
    expect(events[0]?.surfaceOp?.$case).toBe('append');
    expect(json(events[2]!)).toEqual({ turn: 1, reason: { kind: 'interrupted' } });
    const stored = await allEvents(a, id);
    expect(stored.slice(5)).toEqual(events);
    expect((await a.repairSession({ sessionId: id })).events).toEqual([]);
    expect((await a.getSession({ sessionId: id })).session?.eventCount).toBe(8);
    expect((await a.getSurface({ sessionId: id })).seqs).toEqual([1, 3, 5]);
    expect((await failure(a.repairSession({ sessionId: 'nope' }))).reason).toBe('SESSION_NOT_FOUND');
  });
});

describe('RepairSession under concurrency', () => {
  it('five concurrent repairs append the closers once', async () => {
    const id = 'repair-race';
    await a.createSession({ sessionId: id });
    await a.appendEvents({
      sessionId: id, events: [
        input('turn/start', { turn: 1 }), userMessage('u', 'go'), input('step/start', { turn: 1, step: 1 }),
        assistantMessage('a', 'calling', [], [{ id: 'c1', name: 'read' }, { id: 'c2', name: 'read' }]),
        input('tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' }),
      ],
    });
    const results = await Promise.all(Array.from({ length: 5 }, () => a.repairSession({ sessionId: id })));
    const nonEmpty = results.filter((r) => r.events.length > 0);
    expect(nonEmpty).toHaveLength(1);
    // c1 was recorded (outcome unknown), c2 never started: two results, then step/end and turn/end.
    expect(nonEmpty[0]?.events.map((e) => e.type)).toEqual(['tool/result', 'tool/result', 'step/end', 'turn/end']);
    expect((await a.getSession({ sessionId: id })).session?.eventCount).toBe(9);
  });
});

describe('ImportSession / ExportSession', () => {
  const files = readdirSync(FIXTURES).filter((f) => f.endsWith('.jsonl')).sort();

  it('imports all 36 reference fixtures; export reproduces every line (as JSON, and byte for byte); surface equals a replay', async () => {
    expect(files).toHaveLength(36);
    for (const [i, file] of files.entries()) {
      const bytes = fixture(file);
      const text = bytes.toString('utf8');
      const sessionId = `fx-${i}`;
      // cordis-tool-round is a UI snapshot with elided chunks: the one fixture that needs allow_seq_gaps.
      const { session } = await a.importSession({ sessionId, labels: { fixture: file }, allowSeqGaps: file === 'cordis-tool-round.jsonl' }, bytes, 1000 + i * 997);
      const lines = text.split('\n').filter((l) => l !== '');
      const header = JSON.parse(lines[0]!);
      expect(session, file).toMatchObject({ id: sessionId, labels: { fixture: file } });
      const all = (await a.exportSession(sessionId)).split('\n').filter((l) => l !== '');
      // The labels travel in the metadata trailer, the file's last event (issue #35): the rest is the file.
      const trailer = JSON.parse(all[all.length - 1]!) as Record<string, unknown>;
      expect(trailer, file).toMatchObject({ type: 'palimpsest/session-metadata', ignorable: true, data: { labels: { fixture: file }, pairingGuard: false } });
      const exported = all.slice(0, -1);
      expect(exported.length, file).toBe(lines.length);
      expect(JSON.parse(exported[0]!), file).toEqual({ ...header, id: sessionId });
      for (let l = 1; l < lines.length; l++) expect(JSON.parse(exported[l]!), `${file}:${l + 1}`).toEqual(JSON.parse(lines[l]!));
      // Stronger than JSON equality: every record line is byte-identical (key order, packing).
      expect(exported.slice(1), file).toEqual(lines.slice(1));
      const events = await allEvents(a, sessionId);
      expect(events.length).toBe(session?.eventCount);
      expect((await a.getSurface({ sessionId })).seqs, file).toEqual(replay(events, sessionId).surface);
      // Derivation: the served model history is, as JSON text, the domain's derivation of the served log.
      const bySeq = new Map(events.map((e) => [e.seq, protoToEvent(e)] as const));
      const derived = deriveMessages(replay(events, sessionId).surface, (s) => bySeq.get(s), sessionId).map((m) => JSON.stringify(m));
      const served = (await a.getMessages({ sessionId, view: MessageView.MESSAGE_VIEW_MODEL_HISTORY })).messages.map((m) => m.messageJson);
      expect(served, file).toEqual(derived);
    }
  });

  it('import without an id takes the header id; a second import of it is SESSION_ALREADY_EXISTS', async () => {
    const bytes = fixture('minimal-preset.jsonl');
    const headerId = JSON.parse(bytes.toString('utf8').split('\n')[0]!).id as string;
    const { session } = await a.importSession({}, bytes);
    expect(session?.id).toBe(headerId);
    expect(await a.exportSession(headerId)).toBe(bytes.toString('utf8'));
    const again = await failure(a.importSession({}, bytes));
    expect(again).toMatchObject({ code: status.ALREADY_EXISTS, reason: 'SESSION_ALREADY_EXISTS' });
  });

  it('a log with seq gaps (cordis-tool-round): pages in both directions, from_seq inside a gap, head, fork at a gap, append after', async () => {
    const sessionId = 'gaps';
    const refused = await failure(a.importSession({ sessionId }, fixture('cordis-tool-round.jsonl')));
    expect(refused).toMatchObject({ code: status.FAILED_PRECONDITION, reason: 'SEQ_NOT_CONTIGUOUS' });
    await a.importSession({ sessionId, allowSeqGaps: true }, fixture('cordis-tool-round.jsonl'));
    const all = await allEvents(a, sessionId);
    const seqs = all.map((e) => e.seq);
    expect(seqs).toHaveLength(60);
    expect(seqs[59]).toBe(262);
    const gap = seqs.findIndex((s, i) => i > 0 && s !== (seqs[i - 1] as number) + 1);
    expect(gap).toBeGreaterThan(0);
    const inGap = (seqs[gap - 1] as number) + 1;
    for (const pageSize of [1, 7]) {
      expect((await allEvents(a, sessionId, pageSize)).map((e) => e.seq)).toEqual(seqs);
      const back: number[] = [];
      let pageToken = '';
      do {
        const p = await a.listEvents({ sessionId, direction: Direction.DIRECTION_BACKWARD, pageSize, pageToken });
        back.push(...p.events.map((e) => e.seq));
        pageToken = p.nextPageToken;
      } while (pageToken);
      expect(back).toEqual([...seqs].reverse());
    }
    expect((await a.listEvents({ sessionId, fromSeq: inGap, pageSize: 1 })).events[0]?.seq).toBe(seqs[gap]);
    expect((await a.listEvents({ sessionId, fromSeq: inGap, pageSize: 1, direction: Direction.DIRECTION_BACKWARD })).events[0]?.seq).toBe(seqs[gap - 1]);
    expect((await a.getSession({ sessionId })).session).toMatchObject({ headSeq: 262, eventCount: 60 });
    expect((await failure(a.forkSession({ sessionId, atSeq: inGap }))).reason).toBe('INVALID_BOUNDARY');
    expect((await failure(a.appendEvents({ sessionId, expectedLastSeq: 59, events: [input('x/y', {})] }))).metadata).toMatchObject({ expected: '59', actual: '262' });
    expect((await a.appendEvents({ sessionId, expectedLastSeq: 262, events: [input('x/y', {})] })).seqs).toEqual([263]);
  });

  it('a file whose line 5 is invalid is rejected with its line and leaves no session behind', async () => {
    const lines = fixture('goal-multi-turn-actions.jsonl').toString('utf8').split('\n');
    const bad = JSON.parse(lines[4]!);
    bad.surfaceOp = 'append'; // not surface-eligible (or an extra marker on a surface event)
    bad.type = 'turn/start';
    const broken = [...lines.slice(0, 4), JSON.stringify(bad), ...lines.slice(5)].join('\n');
    const before = (await a.listSessions({ pageSize: 500 })).sessions.length;
    const e = await failure(a.importSession({ sessionId: 'broken' }, Buffer.from(broken), 50));
    expect(e.code).toBe(status.INVALID_ARGUMENT);
    expect(e.metadata.line).toBe('5');
    expect(e.reason).toBe('SURFACE_OP_FORBIDDEN');
    expect((await failure(a.getSession({ sessionId: 'broken' }))).reason).toBe('SESSION_NOT_FOUND');
    expect((await a.listSessions({ pageSize: 500 })).sessions.length).toBe(before);
    // The id is free: a valid import under it succeeds.
    await a.importSession({ sessionId: 'broken' }, fixture('goal-multi-turn-actions.jsonl'));
  });

  it('a client that cancels mid-upload leaves no session behind (a truncated file is never published)', async () => {
    const text = fixture('goal-multi-turn-actions.jsonl').toString('utf8');
    const cut = text.indexOf('\n', Math.floor(text.length / 2)) + 1;
    // Observe the server starting the import (the pending session is created) and ending it
    // (published or deleted), so that the check below cannot run before the server decided.
    const store = t.server.app.store;
    const original = { createSession: store.createSession, publishSession: store.publishSession, deletePending: store.deletePending };
    let started = false;
    let settled = false;
    store.createSession = async (rec, events, quota) => {
      const ok = await original.createSession.call(store, rec, events, quota);
      if (rec.header.id === 'half') started = true;
      return ok;
    };
    store.publishSession = async (id, owner) => {
      await original.publishSession.call(store, id, owner);
      if (id === 'half') settled = true;
    };
    // A failed import deletes only its own pending session (deletePending).
    store.deletePending = async (id, owner) => {
      const ok = await original.deletePending.call(store, id, owner);
      if (id === 'half') settled = ok;
      return ok;
    };
    try {
      let err: ServiceError | undefined;
      const s = t.client.importSession((e) => { err = e ?? undefined; });
      s.write({ part: { $case: 'options', value: ImportOptions.fromPartial({ sessionId: 'half' }) } });
      s.write({ part: { $case: 'chunk', value: Buffer.from(text.slice(0, cut)) } });
      await until(() => started, 'the import to start');
      s.cancel();
      await until(() => err !== undefined, 'the call to end');
      expect(err?.code).toBe(status.CANCELLED);
      await until(() => settled, 'the server to finish the cancelled import');
      expect((await failure(a.getSession({ sessionId: 'half' }))).reason).toBe('SESSION_NOT_FOUND');
    } finally {
      Object.assign(store, original);
    }
    // The id is usable.
    await a.importSession({ sessionId: 'half' }, Buffer.from(text));
  });

  it('rejects garbage, compressed data, an unsupported version and a stream without options', async () => {
    expect(await failure(a.importSession({ sessionId: 'imp-hdr' }, Buffer.from('not json\n')))).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'HEADER_INVALID' });
    expect(await failure(a.importSession({ sessionId: 'imp-garbage' }, Buffer.from('{"type":"session","version":0,"id":"g","createdAt":1}\nnot json\n')))).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'JSONL_INVALID' });
    // zstd (what the reference compresses with) is named; other binary data is not UTF-8 JSONL.
    expect(await failure(a.importSession({ sessionId: 'imp-gz' }, Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, 0, 0])))).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'JSONL_COMPRESSED_UNSUPPORTED' });
    expect(await failure(a.importSession({ sessionId: 'imp-gz' }, Buffer.from([0x1f, 0x8b, 8, 0, 0, 0])))).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'JSONL_INVALID' });
    // However the client chunks it (here one byte per message).
    expect(await failure(a.importSession({ sessionId: 'imp-gz' }, Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, 0, 0]), 1))).toMatchObject({ reason: 'JSONL_COMPRESSED_UNSUPPORTED' });
    // A file ending inside a UTF-8 character: an uncommitted tail (no newline), left out as the
    // reference loads it; invalid UTF-8 in a committed line is refused.
    const cutChar = Buffer.concat([Buffer.from('{"type":"session","version":0,"id":"u8","createdAt":1}\n'), Buffer.from('é').subarray(0, 1)]);
    expect(await a.importSession({ sessionId: 'imp-utf8' }, cutChar)).toMatchObject({ session: { eventCount: 0 }, uncommittedTailBytes: 1 });
    const badChar = Buffer.concat([Buffer.from('{"type":"session","version":0,"id":"u8","createdAt":1}\n'), Buffer.from('é').subarray(0, 1), Buffer.from('\n')]);
    expect(await failure(a.importSession({ sessionId: 'imp-utf8b' }, badChar))).toMatchObject({ reason: 'JSONL_INVALID', metadata: { line: '2' } });
    // And a valid file split into one-byte chunks imports.
    const tiny = fixture('web-search-round.jsonl');
    await a.importSession({ sessionId: 'imp-1byte' }, tiny, 1);
    expect(await a.exportSession('imp-1byte')).toBe(tiny.toString('utf8').replace(/"id":"[^"]+"/, '"id":"imp-1byte"'));
    expect(await failure(a.importSession({ sessionId: 'imp-v1' }, Buffer.from('{"type":"session","version":1,"id":"x","createdAt":1}\n')))).toMatchObject({ code: status.FAILED_PRECONDITION, reason: 'FORMAT_VERSION_UNSUPPORTED' });
    const noOptions = await failure(new Promise((resolve, reject) => {
      const s = t.client.importSession((err, res) => (err ? reject(err) : resolve(res)));
      s.write({ part: { $case: 'chunk', value: Buffer.from('{}') } });
      s.end();
    }));
    expect(noOptions).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_ARGUMENT', metadata: { field: 'options' } });
    for (const id of ['imp-garbage', 'imp-gz', 'imp-v1', 'imp-utf8b']) expect((await failure(a.getSession({ sessionId: id }))).reason).toBe('SESSION_NOT_FOUND');
  });
});

// ---- every error reason: code + decoded details -------------------------------------------

type Detail = 'bad-request' | 'precondition' | 'quota' | 'none';
interface ErrorCase {
  readonly reason: string;
  readonly code: status;
  readonly detail: Detail;
  readonly run: (a: Api) => Promise<unknown>;
  readonly metadata?: Record<string, string>;
}

const um = (id: string, extra: Partial<EventInput> = {}): EventInput => ({ ...userMessage(id, 'x'), ...extra });
const append = (sessionId: string, ...events: EventInput[]) => (c: Api) => c.appendEvents({ sessionId, events });

const CASES: ErrorCase[] = [
  { reason: 'SESSION_NOT_FOUND', code: status.NOT_FOUND, detail: 'none', run: (c) => c.getSession({ sessionId: 'missing' }), metadata: { sessionId: 'missing' } },
  { reason: 'SESSION_ALREADY_EXISTS', code: status.ALREADY_EXISTS, detail: 'none', run: (c) => c.createSession({ sessionId: 'err' }), metadata: { sessionId: 'err' } },
  { reason: 'INVALID_SESSION_ID', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.createSession({ sessionId: 'bad id!' }), metadata: { field: 'session_id' } },
  { reason: 'HEADER_INVALID', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.createSession({ sessionId: 'hdr-bad', cwd: 'relative' }), metadata: { field: 'cwd' } },
  { reason: 'INVALID_ARGUMENT', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.getSession({ sessionId: '' }), metadata: { field: 'session_id' } },
  { reason: 'INVALID_PAGE_TOKEN', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.listEvents({ sessionId: 'err', pageToken: 'garbage' }), metadata: { field: 'page_token' } },
  { reason: 'INVALID_PAGE_TOKEN', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.listSessions({ pageToken: 'garbage' }) },
  { reason: 'PAGE_SIZE_TOO_LARGE', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.listSessions({ pageSize: 501 }), metadata: { field: 'page_size', limit: '500', actual: '501' } },
  { reason: 'PAGE_SIZE_TOO_LARGE', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.listEvents({ sessionId: 'err', pageSize: 501 }) },
  { reason: 'VIEW_UNSPECIFIED', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.getMessages({ sessionId: 'err' }), metadata: { field: 'view' } },
  { reason: 'BATCH_EMPTY', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err') },
  { reason: 'BATCH_TOO_LARGE', code: status.RESOURCE_EXHAUSTED, detail: 'quota', run: append('err', ...Array.from({ length: 51 }, () => input('x/y', {}))), metadata: { limit: '50', actual: '51', limitName: 'max_batch_events' } },
  { reason: 'EVENT_TOO_LARGE', code: status.RESOURCE_EXHAUSTED, detail: 'quota', run: append('err', input('x/y', {}), input('x/y', 'a'.repeat(20_000))), metadata: { index: '1', limit: '20000', actual: '20002' } },
  { reason: 'DATA_TOO_DEEP', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err', { ...input('x/y', null), data: { kind: { $case: 'json', value: '['.repeat(201) + ']'.repeat(201) } } }), metadata: { index: '0', field: 'events[0].data.json' } },
  { reason: 'NOT_JSON', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err', input('x/y', {}), { ...input('x/y', null), data: { kind: { $case: 'json', value: '{nope' } } }), metadata: { index: '1', field: 'events[1].data.json' } },
  { reason: 'HEAD_MISMATCH', code: status.FAILED_PRECONDITION, detail: 'precondition', run: (c) => c.appendEvents({ sessionId: 'err', expectedLastSeq: 7, events: [input('x/y', {})] }), metadata: { expected: '7', actual: '1' } },
  { reason: 'SEQ_NOT_CONTIGUOUS', code: status.FAILED_PRECONDITION, detail: 'precondition', run: append('err', input('x/y', {}, { seq: 9 })), metadata: { index: '0' } },
  { reason: 'SURFACE_OP_REQUIRED', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err', um('u', { surfaceOp: undefined })), metadata: { index: '0' } },
  { reason: 'SURFACE_OP_FORBIDDEN', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err', input('turn/start', { turn: 1 }, { surfaceOp: APPEND })) },
  { reason: 'SOURCES_FORBIDDEN', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err', input('turn/start', { turn: 1 }, { sourceEventSeqs: { seqs: [0] } })) },
  { reason: 'SOURCES_EMPTY', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err', um('u', { sourceEventSeqs: { seqs: [] } })) },
  { reason: 'SOURCES_DUPLICATE', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err', um('u', { sourceEventSeqs: { seqs: [0, 0] } })) },
  { reason: 'SOURCES_NOT_EARLIER', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err', um('u', { sourceEventSeqs: { seqs: [5] } })) },
  { reason: 'REPLACE_START_NOT_ON_SURFACE', code: status.FAILED_PRECONDITION, detail: 'precondition', run: append('err', um('u', { surfaceOp: replaceOp(1, 0), sourceEventSeqs: { seqs: [0, 1] } })) },
  { reason: 'REPLACE_END_NOT_ON_SURFACE', code: status.FAILED_PRECONDITION, detail: 'precondition', run: append('err', um('u', { surfaceOp: replaceOp(0, 1), sourceEventSeqs: { seqs: [0, 1] } })) },
  { reason: 'REPLACE_SOURCES_INCOMPLETE', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: append('err', input('x/y', {}), input('x/y', {}), um('u2'), um('u', { surfaceOp: replaceOp(0, 4), sourceEventSeqs: { seqs: [0] } })), metadata: { index: '3' } },
  { reason: 'INV_TURN_NOT_OPEN', code: status.FAILED_PRECONDITION, detail: 'precondition', run: append('err-strict', input('step/start', { turn: 2, step: 1 })) },
  { reason: 'INVALID_BOUNDARY', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.forkSession({ sessionId: 'err', atSeq: 99 }) },
  { reason: 'OPEN_TURN', code: status.FAILED_PRECONDITION, detail: 'precondition', run: (c) => c.forkSession({ sessionId: 'err-strict', atSeq: 0 }) },
  { reason: 'JSONL_INVALID', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.importSession({ sessionId: 'j' }, Buffer.from('{"type":"session","version":0,"id":"j","createdAt":1}\n{"type":"x/y","seq":0,\n')) },
  { reason: 'TURN_SHAPE', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.importSession({ sessionId: 'j' }, Buffer.from('{"type":"session","version":0,"id":"j","createdAt":1}\n{"type":"turn/end","seq":0,"time":1,"data":{"turn":1}}\n')), metadata: { line: '2', type: 'turn/end' } },
  { reason: 'JSONL_COMPRESSED_UNSUPPORTED', code: status.INVALID_ARGUMENT, detail: 'bad-request', run: (c) => c.importSession({ sessionId: 'j' }, Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0])) },
  { reason: 'FORMAT_VERSION_UNSUPPORTED', code: status.FAILED_PRECONDITION, detail: 'precondition', run: (c) => c.importSession({ sessionId: 'j' }, Buffer.from('{"type":"session","version":3,"id":"j","createdAt":1}\n')) },
];

describe('errors: code and decoded details for every reason', () => {
  beforeAll(async () => {
    await a.createSession({ sessionId: 'err' });
    await a.appendEvents({ sessionId: 'err', events: [userMessage('u0', 'x'), input('x/y', {})] });
    await a.createSession({ sessionId: 'err-strict', strict: true });
    await a.appendEvents({ sessionId: 'err-strict', events: [input('turn/start', { turn: 1 })] });
  });

  it.each(CASES.map((c, i) => [`${c.reason}#${i}`, c] as const))('%s', async (_name, c) => {
    const before = await a.exportSession('err');
    const e = await failure(c.run(a));
    expect(e.reason).toBe(c.reason);
    expect(e.code).toBe(c.code);
    expect(e.domain).toBe('palimpsest.dev');
    expect(e.message.length).toBeGreaterThan(10);
    if (c.metadata) expect(e.metadata).toMatchObject(c.metadata);
    expect(e.badRequest !== undefined).toBe(c.detail === 'bad-request');
    expect(e.preconditionFailure !== undefined).toBe(c.detail === 'precondition');
    expect(e.quotaFailure !== undefined).toBe(c.detail === 'quota');
    if (c.detail === 'bad-request') {
      expect(e.badRequest?.fieldViolations).toHaveLength(1);
      expect(e.badRequest?.fieldViolations[0]?.description).toBe(e.message);
      const field = e.metadata.field ?? (e.metadata.index !== undefined ? `events[${e.metadata.index}]` : '');
      expect(e.badRequest?.fieldViolations[0]?.field).toBe(field);
    }
    if (c.detail === 'precondition') expect(e.preconditionFailure?.violations[0]?.type).toBe(c.reason);
    if (c.detail === 'quota') expect(e.quotaFailure?.violations[0]?.subject).toBe(e.metadata.limitName ?? c.reason);
    // A rejected request changes nothing.
    expect(await a.exportSession('err')).toBe(before);
  });

  it('QUOTA_EXCEEDED (tenant session quota), with QuotaFailure', async () => {
    const s = await startTestServer({ limits: { tenantMaxSessions: 1 } as never });
    try {
      const c = api(s.client);
      await c.createSession({ sessionId: 'one' });
      const e = await failure(c.createSession({ sessionId: 'two' }));
      expect(e).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'QUOTA_EXCEEDED', metadata: { limit: '1', actual: '1', limitName: 'tenant_max_sessions' } });
      expect(e.quotaFailure?.violations[0]?.subject).toBe('tenant_max_sessions');
    } finally {
      await s.stop();
    }
  });

  it('UNAUTHENTICATED, PERMISSION_DENIED and INTERNAL (fixed message) from the caller resolver', async () => {
    const s = await startTestServer({}, {
      resolver: (call) => {
        const tok = call.header('authorization');
        if (tok === undefined) throw new DomainError('UNAUTHENTICATED', 'send a bearer token', {});
        if (tok === 'crash') throw new Error('secret internal detail');
        throw new DomainError('PERMISSION_DENIED', 'not allowed', {});
      },
    });
    try {
      const { Metadata } = await import('@grpc/grpc-js');
      const with_ = (tok: string | undefined) => new Promise((resolve, reject) => {
        const md = new Metadata();
        if (tok !== undefined) md.set('authorization', tok);
        s.client.getSession({ sessionId: 'x' }, md, (err, res) => (err ? reject(err) : resolve(res)));
      });
      expect(await failure(with_(undefined))).toMatchObject({ code: status.UNAUTHENTICATED, reason: 'UNAUTHENTICATED', domain: 'palimpsest.dev' });
      expect(await failure(with_('x'))).toMatchObject({ code: status.PERMISSION_DENIED, reason: 'PERMISSION_DENIED' });
      const internal = await failure(with_('crash'));
      expect(internal).toMatchObject({ code: status.INTERNAL, reason: 'INTERNAL', message: 'internal error; the server logged the cause' });
      expect(JSON.stringify(internal)).not.toContain('secret');
    } finally {
      await s.stop();
    }
  });
});
