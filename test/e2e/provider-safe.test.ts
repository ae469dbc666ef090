/**
 * Issue #14 end to end (real server, generated client, and the CLI): the tool-pairing guard's
 * status and details, PlanCompaction / Compact / PruneToolResults, as_of_seq, and the commands
 * plan-compaction, compact, prune, surface --as-of, messages --as-of, create --no-pairing-guard,
 * import --pairing-guard.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { MessageView } from '../../gen/palimpsest/v1/service.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { cliFor, cliWithInput, jsonLines, type CliResult } from '../support/cli.js';
import { input, userMessage, assistantMessage, toolResult, replaceOp } from '../support/events.js';
import { api, failure, fixture, type Api } from '../support/e2e.js';

let t: TestServer;
let a: Api;
let cli: (...args: string[]) => Promise<CliResult>;
let cliIn: (input: string, ...args: string[]) => Promise<CliResult>;
beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
  a = api(t.client);
  cli = cliFor(t.server.address);
  cliIn = cliWithInput(t.server.address);
});
afterAll(async () => { await t.stop(); });

/** 0 user, 1 assistant(call k), 2 tool/call, 3 tool/result(k, big), 4 user. */
async function seed(id: string, body = 'z'.repeat(9000)): Promise<void> {
  await a.appendEvents({
    sessionId: id,
    events: [
      userMessage('u0', 'question'),
      assistantMessage('a1', 'calling', [], [{ id: 'k', name: 'read' }]),
      input('tool/call', { turn: 1, step: 1, callId: 'k', name: 'read', arguments: '{}' }),
      toolResult('r3', 'k', body, 2),
      userMessage('u4', 'next'),
    ],
  });
}

describe('tool-pairing guard over gRPC', () => {
  it('CreateSession reports it (on unless turned off); a split is FAILED_PRECONDITION TOOL_PAIRING_BROKEN with PreconditionFailure and the pair in metadata', async () => {
    const { session } = await a.createSession({ sessionId: 'g1' });
    expect(session?.pairingGuard).toBe(true);
    await seed('g1');
    const err = await failure(a.appendEvents({ sessionId: 'g1', events: [input('user/message', { id: 's', role: 'user', content: [{ type: 'text', text: 'sum' }], source: { kind: 'plugin', plugin: 'compact' } }, { surfaceOp: replaceOp(0, 1), sourceEventSeqs: { seqs: [0, 1] } })] }));
    expect(err.code).toBe(status.FAILED_PRECONDITION);
    expect(err.reason).toBe('TOOL_PAIRING_BROKEN');
    expect(err.metadata).toMatchObject({ callId: 'k', callSeq: '1', resultSeq: '3', index: '0' });
    expect(err.preconditionFailure?.violations[0]?.type).toBe('TOOL_PAIRING_BROKEN');
    expect((await a.getSession({ sessionId: 'g1' })).session?.headSeq).toBe(4);
    const off = await a.createSession({ sessionId: 'g2', pairingGuard: false });
    expect(off.session?.pairingGuard).toBe(false);
  });

  it('ImportSession: off by default, on with pairing_guard', async () => {
    const { session } = await a.importSession({ sessionId: 'imp-cr' }, fixture('compaction-recovery.jsonl'));
    expect(session?.pairingGuard).toBe(false);
    const on = await a.importSession({ sessionId: 'imp-cr-g', pairingGuard: true }, fixture('compaction-recovery.jsonl'));
    expect(on.session?.pairingGuard).toBe(true);
  });
});

describe('PlanCompaction, Compact, PruneToolResults over gRPC', () => {
  it('plans (keeping the pair together), compacts with the plan, and reads the history before and after with as_of_seq', async () => {
    await a.createSession({ sessionId: 'c1' });
    await seed('c1');
    const plan = await a.planCompaction({ sessionId: 'c1', budget: { $case: 'keepTokens', value: 1 } });
    // Keeping only the last node (4) is fine: the pair 1/3 is inside the range.
    expect(plan).toMatchObject({ start: 0, end: 3, shadowedSeqs: [0, 1, 3], expectedLastSeq: 4, blockers: [] });
    expect(plan.messages.map((m) => m.seq)).toEqual([0, 1, 3]);
    expect(JSON.parse(plan.messages[0]!.messageJson)).toMatchObject({ id: 'u0' });
    const upTo = await a.planCompaction({ sessionId: 'c1', budget: { $case: 'upToSeq', value: 1 }, tokenCounts: { 0: 7, 1: 5 } });
    expect(upTo).toMatchObject({ shadowedSeqs: [0], shadowedTokenCount: 7 }); // moved before the call
    const res = await a.compact({ sessionId: 'c1', start: 0, end: 3, expectedLastSeq: 4, summary: { $case: 'summaryText', value: 'asked, read k' }, provider: 'p', model: 'm', usage: { inputTokens: 3, outputTokens: 2 } });
    expect(res).toMatchObject({ seqs: [5, 6, 7, 8], surfaceLength: 2, replayed: false });
    expect((await a.getSurface({ sessionId: 'c1' })).seqs).toEqual([7, 4]);
    expect(await a.getSurface({ sessionId: 'c1', asOfSeq: 4 })).toEqual({ seqs: [0, 1, 3, 4], replaceGeneration: 0, headSeq: 4 });
    const before = await a.getMessages({ sessionId: 'c1', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, asOfSeq: 4 });
    expect(before.messages.map((m) => m.seq)).toEqual([0, 1, 3, 4]);
    const moved = await failure(a.compact({ sessionId: 'c1', start: 7, end: 7, expectedLastSeq: 4, summary: { $case: 'summaryText', value: 's' }, provider: 'p', model: 'm' }));
    expect([moved.code, moved.reason]).toEqual([status.FAILED_PRECONDITION, 'HEAD_MISMATCH']);
    const late = await failure(a.getSurface({ sessionId: 'c1', asOfSeq: 99 }));
    expect([late.code, late.reason, late.metadata['headSeq']]).toEqual([status.OUT_OF_RANGE, 'AS_OF_SEQ_AFTER_HEAD', '8']);
    const noBudget = await failure(a.planCompaction({ sessionId: 'c1' }));
    expect([noBudget.code, noBudget.reason]).toEqual([status.INVALID_ARGUMENT, 'INVALID_ARGUMENT']);
  });

  it('prunes by policy and by seq; a bad seq is PRUNE_TARGET_INVALID', async () => {
    await a.createSession({ sessionId: 'p1' });
    await seed('p1');
    const res = await a.pruneToolResults({ sessionId: 'p1', minBytes: 8192 });
    expect(res.pruned.map((p) => [p.originalSeq, p.pruneSeq, p.replacementSeq, p.callId, p.bytesBefore])).toEqual([[3, 5, 6, 'k', 9000]]);
    expect(res.bytesSaved).toBe(9000 - res.pruned[0]!.bytesAfter);
    const bad = await failure(a.pruneToolResults({ sessionId: 'p1', seqs: [0] }));
    expect([bad.code, bad.reason, bad.metadata['seq']]).toEqual([status.FAILED_PRECONDITION, 'PRUNE_TARGET_INVALID', '0']);
  });
});

describe('CLI', () => {
  it('create --no-pairing-guard, import --pairing-guard', async () => {
    const off = await cli('create', '--id', 'cli-off', '--no-pairing-guard', '--json');
    expect(off.code, off.stderr).toBe(0);
    const got = await cli('get', 'cli-off', '--json');
    expect(JSON.parse(got.stdout)).toMatchObject({ pairingGuard: false });
    await cli('create', '--id', 'cli-on');
    expect(JSON.parse((await cli('get', 'cli-on', '--json')).stdout)).toMatchObject({ pairingGuard: true });
    const imp = await cliIn(fixture('agent-instructions.jsonl').toString('utf8'), 'import', '-', '--id', 'cli-imp', '--pairing-guard', '--json');
    expect(imp.code, imp.stderr).toBe(0);
    expect(JSON.parse((await cli('get', 'cli-imp', '--json')).stdout)).toMatchObject({ pairingGuard: true });
  });

  it('plan-compaction, compact, prune, surface --as-of, messages --as-of', async () => {
    await a.createSession({ sessionId: 'cli-c' });
    await seed('cli-c');
    const plan = await cli('plan-compaction', 'cli-c', '--keep-tokens', '1', '--json');
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout)).toMatchObject({ start: 0, end: 3, shadowedSeqs: [0, 1, 3], expectedLastSeq: 4, blockers: [] });
    expect(Object.keys(JSON.parse(plan.stdout))).toEqual(expect.arrayContaining(['start', 'end', 'shadowedSeqs', 'expectedLastSeq', 'shadowedTokenCount', 'blockers']));
    const human = await cli('plan-compaction', 'cli-c', '--keep-tokens', '1');
    expect(human.stdout).toContain('seqs 0..3');
    const pr = await cli('prune', 'cli-c', '--seq', '3', '--json');
    expect(pr.code, pr.stderr).toBe(0);
    expect(JSON.parse(pr.stdout)).toMatchObject({ pruned: [{ originalSeq: 3, pruneSeq: 5, replacementSeq: 6, callId: 'k' }] });
    const usage = await cli('prune', 'cli-c');
    expect(usage.code).toBe(2);
    const c = await cli('compact', 'cli-c', '--summary', 'the gist', '--keep-tokens', '1', '--provider', 'p', '--model', 'm', '--json');
    expect(c.code, c.stderr).toBe(0);
    expect(JSON.parse(c.stdout)).toMatchObject({ seqs: [7, 8, 9, 10], shadowedSeqs: [0, 1, 6] });
    expect(JSON.parse((await cli('surface', 'cli-c')).stdout)).toEqual([9, 4]);
    expect(JSON.parse((await cli('surface', 'cli-c', '--as-of', '4')).stdout)).toEqual([0, 1, 3, 4]);
    const then = jsonLines((await cli('messages', 'cli-c', '--as-of', '6', '--json')).stdout)[0] as { id: string }[];
    expect(then.map((m) => m.id)).toEqual(['u0', 'a1', 'r3', 'u4']);
    const bad = await cli('compact', 'cli-c', '--keep-tokens', '1');
    expect(bad.code).toBe(2);
  });
});
