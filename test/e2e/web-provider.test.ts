/**
 * Issue #14's RPCs through the web port (the bridge serves whatever the handler table holds):
 * PlanCompaction, Compact and PruneToolResults over Connect (binary and JSON) and gRPC-Web, with
 * the gRPC port's errors; Session.pairing_guard and as_of_seq before and after a compaction.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Code } from '@connectrpc/connect';
import { MessageView } from '../../gen/es/palimpsest/v1/service_pb.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { assistantMessage, input, toolResult, userMessage } from '../support/events.js';
import { esEvent, webClient, webFailure, WEB_PROTOCOLS } from '../support/web-client.js';

let t: TestServer;
let base: string;
beforeAll(async () => {
  t = await startTestServer({ webListen: '127.0.0.1:0' });
  base = `http://127.0.0.1:${t.server.webPort}`;
});
afterAll(async () => {
  await t.stop();
});

/** 0 user, 1 assistant(call k), 2 tool/call, 3 tool/result(k, big), 4 user. */
const SEED = [
  userMessage('u0', 'question'),
  assistantMessage('a1', 'calling', [], [{ id: 'k', name: 'read' }]),
  input('tool/call', { turn: 1, step: 1, callId: 'k', name: 'read', arguments: '{}' }),
  toolResult('r3', 'k', 'z'.repeat(9000), 2),
  userMessage('u4', 'next'),
].map(esEvent);

describe.each(WEB_PROTOCOLS)('provider-safe RPCs on the web port over $protocol (json: $json)', ({ protocol, httpVersion, json }) => {
  const c = () => webClient(base, protocol, httpVersion, undefined, undefined, json);
  const tag = `${protocol}-${json ? 'json' : 'bin'}`;

  it('reports pairing_guard; plans, compacts with the plan, and reads before and after with as_of_seq', async () => {
    const id = `c-${tag}`;
    expect((await c().createSession({ sessionId: id })).session?.pairingGuard).toBe(true);
    expect((await c().createSession({ sessionId: `off-${tag}`, pairingGuard: false })).session?.pairingGuard).toBe(false);
    await c().appendEvents({ sessionId: id, events: SEED });
    const plan = await c().planCompaction({ sessionId: id, budget: { case: 'keepTokens', value: 1n } });
    expect(plan).toMatchObject({ start: 0n, end: 3n, shadowedSeqs: [0n, 1n, 3n], expectedLastSeq: 4n, blockers: [] });
    expect(plan.messages.map((m) => m.seq)).toEqual([0n, 1n, 3n]);
    const res = await c().compact({
      sessionId: id, start: plan.start!, end: plan.end!, expectedLastSeq: plan.expectedLastSeq,
      summary: { case: 'summaryText', value: 'asked, read k' }, provider: 'p', model: 'm',
    });
    expect(res).toMatchObject({ seqs: [5n, 6n, 7n, 8n], surfaceLength: 2n, replayed: false });
    expect((await c().getSurface({ sessionId: id })).seqs).toEqual([7n, 4n]);
    expect((await c().getSurface({ sessionId: id, asOfSeq: 4n })).seqs).toEqual([0n, 1n, 3n, 4n]);
    const before = await c().getMessages({ sessionId: id, view: MessageView.MODEL_HISTORY, asOfSeq: 4n });
    expect(before.messages.map((m) => m.seq)).toEqual([0n, 1n, 3n, 4n]);
    // The gRPC port's errors, with their details; the log is untouched.
    const moved = await webFailure(c().compact({ sessionId: id, start: 7n, end: 7n, expectedLastSeq: 4n, summary: { case: 'summaryText', value: 's' }, provider: 'p', model: 'm' }));
    expect(moved).toMatchObject({ code: Code.FailedPrecondition, reason: 'HEAD_MISMATCH' });
    const late = await webFailure(c().getSurface({ sessionId: id, asOfSeq: 99n }));
    expect(late).toMatchObject({ code: Code.OutOfRange, reason: 'AS_OF_SEQ_AFTER_HEAD', metadata: { headSeq: '8' } });
    expect((await c().getSession({ sessionId: id })).session?.headSeq).toBe(8n);
  });

  it('prunes by policy; a bad seq is PRUNE_TARGET_INVALID and stores nothing', async () => {
    const id = `p-${tag}`;
    await c().createSession({ sessionId: id });
    await c().appendEvents({ sessionId: id, events: SEED });
    const bad = await webFailure(c().pruneToolResults({ sessionId: id, seqs: [0n] }));
    expect(bad).toMatchObject({ code: Code.FailedPrecondition, reason: 'PRUNE_TARGET_INVALID', metadata: { seq: '0' } });
    expect((await c().getSession({ sessionId: id })).session?.headSeq).toBe(4n);
    const res = await c().pruneToolResults({ sessionId: id, minBytes: 8192n });
    expect(res.pruned.map((p) => [p.originalSeq, p.pruneSeq, p.replacementSeq, p.callId, p.bytesBefore])).toEqual([[3n, 5n, 6n, 'k', 9000n]]);
  });
});
