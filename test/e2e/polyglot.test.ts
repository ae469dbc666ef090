/**
 * Polyglot clients (issue #8): the Python agent-backend example (on the clients/python package:
 * palimpsest.client, palimpsest.events and its committed stubs) and the Go surface observer
 * (stubs generated from proto/ by clients/run.sh with Debian's local plugins), run against a real server.
 * Their JSON summaries are checked against the server's own GetSurface/GetMessages/ListEvents.
 *
 * Toolchains come from .ci/system-deps. Under CI=true a missing toolchain fails the test; outside
 * CI the test is skipped with a message naming what is missing.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { missingGo, missingPython, run, toolchainIt, type Run } from '../support/toolchains.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { api, allEvents, replay, type Api } from '../support/e2e.js';
import { input, replaceOp } from '../support/events.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import { MessageView } from '../../gen/palimpsest/v1/service.js';

const ROOT = join(import.meta.dirname, '..', '..');
const RUN = join(ROOT, 'clients', 'run.sh');
/** Starts `clients/run.sh ...`; `onStderr` sees stderr as it arrives. */
function runClient(args: string[], onStderr?: (all: string) => void, timeoutMs = 100_000): Promise<Run> {
  return run(RUN, args, { cwd: ROOT, onStderr, timeoutMs });
}

function lastJson(run: Run): Record<string, any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  expect(run.code, `client failed (exit ${run.code}):\n${run.stderr}`).toBe(0);
  const line = run.stdout.trim().split('\n').pop() ?? '';
  return JSON.parse(line) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

describe('polyglot clients generated from proto/', () => {
  let ts: TestServer;
  let a: Api;
  beforeAll(async () => {
    ts = await startTestServer();
    a = api(ts.client);
  });
  afterAll(async () => { await ts?.stop(); });

  it('buf curl (the README commands): health, reflection, one append', async () => {
    const buf = join(ROOT, 'node_modules', '.bin', 'buf');
    const url = `http://${ts.server.address}`;
    const curl = (...args: string[]): Promise<Run> => new Promise((resolve, reject) => {
      const child = spawn(buf, ['curl', '--protocol', 'grpc', '--http2-prior-knowledge', ...args], { cwd: ROOT });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
      child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    const ok = (r: Run): string => { expect(r.code, r.stderr).toBe(0); return r.stdout; };
    expect(JSON.parse(ok(await curl(`${url}/grpc.health.v1.Health/Check`)))).toEqual({ status: 'SERVING' });
    expect(ok(await curl('--list-services', url)).split('\n')).toContain('palimpsest.v1.SessionService');
    ok(await curl('-d', '{"sessionId":"curl-demo"}', `${url}/palimpsest.v1.SessionService/CreateSession`));
    const append = JSON.parse(ok(await curl('-d', JSON.stringify({
      sessionId: 'curl-demo', expectedLastSeq: '-1',
      events: [{ type: 'user/message', append: {}, data: { userMessage: { id: 'm1', role: 'user', content: [{ text: { text: 'hello' } }], source: { user: {} } } } }],
    }), `${url}/palimpsest.v1.SessionService/AppendEvents`)));
    expect(append).toEqual({ seqs: ['0'], surfaceLength: '1' });
    const history = await a.getMessages({ sessionId: 'curl-demo', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY });
    expect(JSON.parse(history.messages[0]!.messageJson)).toEqual({ id: 'm1', role: 'user', content: [{ type: 'text', text: 'hello' }], source: { kind: 'user' } });
    // A conflict: non-zero exit, FAILED_PRECONDITION with the google.rpc details on stderr.
    const conflict = await curl('-d', '{"sessionId":"curl-demo","expectedLastSeq":"5","events":[{"type":"turn/start","data":{"json":"{\\"turn\\":1}"}}]}',
      `${url}/palimpsest.v1.SessionService/AppendEvents`);
    expect(conflict.code).not.toBe(0);
    expect(conflict.stderr).toContain('failed_precondition');
    expect(conflict.stderr).toContain('google.rpc.ErrorInfo');
  });

  // Found by the Python client: a projection hydrated after a replace listed messages by seq.
  it('model history follows the surface order when first read after a replace', async () => {
    const id = 'history-order';
    await a.createSession({ sessionId: id });
    const user = (n: number, extra: Partial<EventInput>): EventInput =>
      input('user/message', { id: `u${n}`, role: 'user', content: [{ type: 'text', text: `m${n}` }], source: { kind: 'user' } }, extra);
    const app = { surfaceOp: { $case: 'append' as const, value: {} } };
    await a.appendEvents({ sessionId: id, events: [user(0, app), user(1, app), user(2, app), user(3, { surfaceOp: replaceOp(0, 1), sourceEventSeqs: { seqs: [0, 1] } })] });
    const surface = await a.getSurface({ sessionId: id });
    expect(surface.seqs).toEqual([3, 2]);
    const history = await a.getMessages({ sessionId: id, view: MessageView.MESSAGE_VIEW_MODEL_HISTORY });
    expect(history.messages.map((m) => m.seq)).toEqual([3, 2]);
  });

  toolchainIt('python', missingPython(), 'Python agent backend: typed turns, compaction, prune, HEAD_MISMATCH retry, model history', async () => {
    const out = lastJson(await runClient(['python', ts.server.address]));
    const id = out.sessionId as string;

    // The surface and model history it printed are the server's.
    const surface = await a.getSurface({ sessionId: id });
    expect(out.surface).toEqual(surface.seqs);
    expect(out.replaceGeneration).toBe(2);
    expect(out.headSeq).toBe(surface.headSeq);
    const history = await a.getMessages({ sessionId: id, view: MessageView.MESSAGE_VIEW_MODEL_HISTORY });
    expect(out.messageCount).toBe(history.messages.length);
    expect(out.messages.map((m: { seq: number }) => m.seq)).toEqual(history.messages.map((m) => m.seq));
    // Model history walks the surface: the compaction summary comes first, where turn 1 was.
    expect(history.messages.map((m) => m.seq)).toEqual(surface.seqs);
    expect(surface.seqs[0]).toBe(out.compaction.replacementSeq);
    expect(out.messages[0]).toMatchObject({ role: 'user', source: 'plugin', typed: true });
    for (const s of out.compaction.shadowed as number[]) expect(surface.seqs).not.toContain(s);
    expect(out.compaction.shadowed).toEqual([out.turns[0].user, out.turns[0].assistant, out.turns[0].tool]);

    // The prune kept the message id and changed only the inner tool-result content.
    const target = out.prune.target as number;
    expect(surface.seqs).not.toContain(target);
    expect(surface.seqs.at(-1)).toBe(out.prune.replacementSeq);
    const pruned = JSON.parse(history.messages.at(-1)!.messageJson);
    expect(pruned).toEqual({
      id: 'r2', role: 'user', source: { kind: 'tool', callId: 'call-2' },
      content: [{ type: 'tool-result', toolCallId: 'call-2', content: [{ type: 'text', text: out.prune.prunedText }] }],
    });
    expect(out.messages.at(-1).blocks[0].text).toBe(out.prune.prunedText);

    // The conflict: FAILED_PRECONDITION HEAD_MISMATCH decoded from grpc-status-details-bin, then a retry.
    expect(out.prune.attempts).toBe(2);
    expect(out.conflict).toMatchObject({
      code: 'FAILED_PRECONDITION', reason: 'HEAD_MISMATCH', domain: 'palimpsest.dev',
      metadata: { expected: String(out.conflict.headBeforeRetry), actual: String(out.conflict.headAfterReread) },
      preconditionFailure: [{ type: 'HEAD_MISMATCH' }],
    });
    expect(out.conflict.headAfterReread).toBe(out.conflict.headBeforeRetry + 1);
    expect(out.badRequest).toMatchObject({
      code: 'INVALID_ARGUMENT', reason: 'SURFACE_OP_FORBIDDEN', domain: 'palimpsest.dev', badRequest: [{ field: 'events[0]' }],
    });

    // The typed forms were stored as the reference JSON, and the log replays to the same surface.
    const events = await allEvents(a, id);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    const data = (seq: number): unknown => { const k = events[seq]!.data!.kind; return k?.$case === 'json' ? JSON.parse(k.value) : undefined; };
    expect(data(out.turns[0].user)).toEqual({ id: 'u1', role: 'user', content: [{ type: 'text', text: 'What is in this repo?' }], source: { kind: 'user' } });
    expect(data(out.turns[0].assistant)).toMatchObject({
      turn: 1, step: 1, usage: { inputTokens: 100, outputTokens: 20 },
      message: { id: 'a1', role: 'assistant', source: { kind: 'model', provider: 'deepseek', model: 'deepseek-chat' } },
    });
    const assistant = events[out.turns[0].assistant]!;
    const chunkSeqs = events.filter((e) => e.type === 'assistant/chunk' && e.seq < assistant.seq).map((e) => e.seq);
    expect(assistant.sourceEventSeqs?.seqs).toEqual(chunkSeqs);
    expect(events[out.turns[0].tool]!.sourceEventSeqs?.seqs).toEqual([out.turns[0]['tool/call']]);
    expect(events.map((e) => e.type)).toContain('compaction/summary');
    const summarySeq = out.compaction.summarySeq as number;
    expect(events[summarySeq]!.type).toBe('compaction/summary');
    expect(events[out.compaction.replacementSeq]!.sourceEventSeqs?.seqs).toEqual([summarySeq - 1, summarySeq, ...out.compaction.shadowed]);
    expect(events[out.prune.replacementSeq - 1]!.type).toBe('compaction/prune');
    // Both were written by the server (Compact / PruneToolResults), in the reference's conventions.
    const checkpoint = data(out.compaction.replacementSeq) as { role: string; source: unknown; content: { text: string }[] };
    expect(checkpoint).toMatchObject({ role: 'user', source: { kind: 'plugin', plugin: 'compact' } });
    expect(checkpoint.content.map((b) => b.text)).toEqual([expect.stringContaining('<compacted-summary>'), expect.stringContaining('Summary of 3 messages'), '</compacted-summary>']);
    expect(out.prune.prunedText).toContain('\n\n[... tool result middle pruned ...]\n\n');
    expect(replay(events, id).surface).toEqual(surface.seqs);
  }, 60_000);

  toolchainIt('go', missingGo(), 'Go observer: applies surface deltas, resumes from its cursor, ends equal to GetSurface', async () => {
    const id = 'go-observer';
    // Its random compactions may split tool pairs: this test is about surface deltas, not the guard.
    await a.createSession({ sessionId: id, pairingGuard: false });
    // The writer side: a known sequence of guarded batches, so the final seq is known up front.
    let next = 0;
    const batches: EventInput[][] = [];
    const replaces: number[] = [];
    const add = (events: EventInput[]): number[] => { batches.push(events); const seqs = events.map((_, i) => next + i); next += events.length; return seqs; };
    const app = { surfaceOp: { $case: 'append' as const, value: {} } };
    const turn = (n: number): { user: number; assistant: number; result: number } => {
      const [, user, chunk, assistant, call, result] = add([
        input('turn/start', { turn: n }),
        input('user/message', { id: `u${n}`, role: 'user', content: [{ type: 'text', text: `question ${n}` }], source: { kind: 'user' } }, app),
        input('assistant/chunk', { turn: n, step: 1, chunk: { type: 'text-delta', index: 0, text: `answer ${n}` } }),
        input('assistant/message', { turn: n, step: 1, message: { id: `a${n}`, role: 'assistant', content: [{ type: 'text', text: `answer ${n}` }, { type: 'tool-call', id: `c${n}`, name: 'grep', arguments: '{}' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, { ...app, sourceEventSeqs: { seqs: [next + 2] } }),
        input('tool/call', { turn: n, step: 1, callId: `c${n}`, name: 'grep', arguments: '{}' }),
        input('tool/result', toolData(n, `result ${n} `.repeat(50)), { ...app, sourceEventSeqs: { seqs: [next + 4] } }),
        input('turn/end', { turn: n, reason: { kind: 'completed' } }),
      ]);
      void chunk; void call;
      return { user: user!, assistant: assistant!, result: result! };
    };
    const toolData = (n: number, text: string) => ({
      turn: n, step: 1,
      message: { id: `r${n}`, role: 'user', content: [{ type: 'tool-result', toolCallId: `c${n}`, content: [{ type: 'text', text }] }], source: { kind: 'tool', callId: `c${n}` } },
    });
    const compact = (start: number, end: number, shadowed: number[], name: string): number => {
      const [, summary, replacement] = add([
        input('compaction/start', { compactionId: name, turn: null }),
        input('compaction/summary', { compactionId: name, summary: [{ type: 'text', text: name }], shadowedRange: { start, end }, shadowedSeqs: shadowed, shadowedTokenCount: 10, provider: 'p', model: 'm' }),
        input('user/message', { id: name, role: 'user', content: [{ type: 'text', text: `summary ${name}` }], source: { kind: 'plugin', plugin: 'compact', compactionId: name } },
          { surfaceOp: replaceOp(start, end), sourceEventSeqs: { seqs: [next, next + 1, ...shadowed] } }),
        input('compaction/end', { compactionId: name, turn: null }),
      ]);
      void summary;
      replaces.push(replacement!);
      return replacement!;
    };
    const prune = (n: number, target: number): number => {
      const [, replacement] = add([
        input('compaction/prune', { shadowedRange: { start: target, end: target }, shadowedSeqs: [target], shadowedTokenCount: 100 }),
        input('tool/result', toolData(n, '[pruned]'), { surfaceOp: replaceOp(target, target), sourceEventSeqs: { seqs: [target] } }),
      ]);
      replaces.push(replacement!);
      return replacement!;
    };

    // Before the observer starts: two turns (its catch-up).
    const t1 = turn(1);
    const t2 = turn(2);
    const initial = batches.length;
    // While it runs: more turns, a compaction of turns 1-2, a prune, log-only events, then a
    // nested compaction whose start (the first summary) is numerically greater than its end.
    const t3 = turn(3);
    const s1 = compact(t1.user, t2.result, [t1.user, t1.assistant, t1.result, t2.user, t2.assistant, t2.result], 'cmp-1');
    const t4 = turn(4);
    add([input('session/title', { title: 'observed' }), input('todo/write', { todos: [] })]);
    prune(4, t4.result);
    compact(s1, t3.assistant, [s1, t3.user, t3.assistant], 'cmp-2');
    turn(5);
    const finalSeq = next - 1;

    for (const b of batches.slice(0, initial)) await a.appendEvents({ sessionId: id, events: b });
    let head = batches.slice(0, initial).reduce((n, b) => n + b.length, 0) - 1;
    let subscribed!: () => void;
    const ready = new Promise<void>((r) => { subscribed = r; });
    const observer = runClient(['go', ts.server.address, '-session', id, '-until-seq', String(finalSeq), '-drop-after', '4'],
      (err) => { if (err.includes('subscribed')) subscribed(); });
    // Append concurrently once it has caught up (or gave up, e.g. a compile error).
    await Promise.race([ready, observer]);
    for (const b of batches.slice(initial)) {
      const res = await a.appendEvents({ sessionId: id, events: b, expectedLastSeq: head });
      head = res.seqs.at(-1)!;
      await new Promise((r) => setTimeout(r, 15));
    }
    const out = lastJson(await observer);

    const surface = await a.getSurface({ sessionId: id });
    expect(out.sessionId).toBe(id);
    expect(out.equal).toBe(true);
    expect(out.surface).toEqual(surface.seqs);
    expect(out.serverSurface).toEqual(surface.seqs);
    expect(out.cursor).toBe(finalSeq);
    expect(surface.headSeq).toBe(finalSeq);
    expect(out.replaceGeneration).toBe(3);
    expect(out.replaces).toBe(3);
    expect(out.replacedSeqs).toEqual(replaces);
    // It really dropped and resumed from its cursor, more than once.
    expect(out.subscriptions).toBeGreaterThan(2);
    expect(out.resumedFrom.length).toBe(out.subscriptions - 1);
    expect(out.resumedFrom).toEqual([...out.resumedFrom].sort((x: number, y: number) => x - y));
    expect(out.caughtUps).toBeGreaterThanOrEqual(1);
    // Every surface event was delivered exactly once across the resumptions.
    const events = await allEvents(a, id);
    const surfaceEvents = events.filter((e) => e.surfaceOp !== undefined);
    expect(out.appends + out.replaces).toBe(surfaceEvents.length);
    expect(replay(events, id).surface).toEqual(surface.seqs);
    void t3;
  }, 120_000);
});
