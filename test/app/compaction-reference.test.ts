/**
 * Issue #32: PlanCompaction and Compact follow the reference's compaction-basic plugin
 * (toninfo/deepseek-harness). Each test names the reference file and function it follows.
 */
import { describe, expect, it } from 'vitest';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import { CompactionService } from '../../src/app/compaction.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent, SessionEvent } from '../../src/domain/event.js';
import { CHECKPOINT_PREAMBLE, SUMMARY_CLOSE, SUMMARY_OPEN } from '../../src/domain/compaction-plan.js';
import { estimateMessageTokens } from '../../src/domain/token-estimate.js';
import { logEvent, toolResult, user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
const BIG = 'w'.repeat(4000); // 1,000 tokens + framing: bigger than any framed summary here

function call(id: string, ...callIds: string[]): CandidateEvent {
  return {
    type: 'assistant/message',
    data: { turn: 1, step: 1, message: { id, role: 'assistant', content: callIds.map((c) => ({ type: 'tool-call', id: c, name: 'read', arguments: '{}' })), source: { kind: 'model', provider: 'p', model: 'm' } } },
    surfaceOp: 'append',
  };
}

async function setup(events: CandidateEvent[], id = 's'): Promise<{ app: SessionService; svc: CompactionService; id: string }> {
  const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
  // The guard off: these sessions carry orphan results and open calls on purpose (the guard now
  // refuses them at append, issue #34), as logs written before it or imported do.
  await app.createSession(ctx, { id, pairingGuard: false });
  await app.append(ctx, id, events);
  return { app, svc: new CompactionService(app, (() => { let i = 0; return () => `id-${++i}`; })()), id };
}

async function all(app: SessionService, id: string, from = 0): Promise<SessionEvent[]> {
  const out: SessionEvent[] = [];
  for await (const b of app.scan(ctx, id, from)) out.push(...b);
  return out;
}

async function refused(p: Promise<unknown>, reason: string): Promise<DomainError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(DomainError);
  expect((err as DomainError).reason, (err as DomainError).message).toBe(reason);
  return err as DomainError;
}

const base = { summary: [{ type: 'text', text: 'short summary' }], provider: 'p', model: 'm' };

describe('retain_tokens (compaction-basic region.ts selectCompactableRange)', () => {
  // Surface token costs: each user(BIG-ish) message; computed with the one estimator.
  const texts = ['a'.repeat(40), 'b'.repeat(40), 'c'.repeat(40), 'd'.repeat(40)];
  const cost = estimateMessageTokens({ role: 'user', content: [{ type: 'text', text: texts[0]! }] }); // 18

  it('keeps the shortest tail of at least N tokens (keep_tokens keeps the longest of at most N)', async () => {
    const { svc, id } = await setup(texts.map((t) => user(t)));
    // N = cost + 1: the reference accumulates from the tail until >= N: two nodes kept.
    expect((await svc.plan(ctx, id, { retainTokens: cost + 1 })).shadowedSeqs).toEqual([0, 1]);
    // keep_tokens = cost + 1 keeps at most that: one node.
    expect((await svc.plan(ctx, id, { keepTokens: cost + 1 })).shadowedSeqs).toEqual([0, 1, 2]);
    // Exactly N = cost: one node is enough.
    expect((await svc.plan(ctx, id, { retainTokens: cost })).shadowedSeqs).toEqual([0, 1, 2]);
    // 0 still keeps the last node (the reference's loop takes one before it checks).
    expect((await svc.plan(ctx, id, { retainTokens: 0 })).shadowedSeqs).toEqual([0, 1, 2]);
    // More than the whole surface: nothing to compact (the reference returns null).
    const none = await svc.plan(ctx, id, { retainTokens: 4 * cost + 1 });
    expect(none.shadowedSeqs).toEqual([]);
    expect(none.start).toBeUndefined();
  });

  it('then moves the cut earlier to a balanced boundary', async () => {
    const { svc, id } = await setup([user('x'.repeat(40)), call('a1', 'k1'), toolResult('k1', 'r'), user('y')]);
    // The tail [3] costs less than N; [2,3] reaches it, but the cut before 2 splits k1: moved to before 1.
    const n = estimateMessageTokens({ role: 'user', content: [{ type: 'text', text: 'y' }] }) + 1;
    expect((await svc.plan(ctx, id, { retainTokens: n })).shadowedSeqs).toEqual([0]);
  });
});

describe('orphan and duplicate tool results (compaction tool-pairing.ts extendCache)', () => {
  it('an orphan result on the surface is a blocker naming its seq; Compact refuses and the log is untouched', async () => {
    const { app, svc, id } = await setup([user(BIG), toolResult('nowhere', 'r'), user(BIG), user('z')]);
    const plan = await svc.plan(ctx, id, { retainTokens: 1 });
    expect(plan.blockers.map((b) => [b.reason, b.seqs])).toEqual([['TOOL_RESULT_UNMATCHED', [1]]]);
    expect(plan.blockers[0]!.description).toMatch(/seq 1 has no matching tool-call/);
    expect(plan.shadowedSeqs).toEqual([]);
    const before = await all(app, id);
    const err = await refused(svc.compact(ctx, id, { ...base, start: 0, end: 0, expectedLastSeq: 3 }), 'COMPACTION_BLOCKED');
    expect(err.metadata['blocker']).toBe('TOOL_RESULT_UNMATCHED');
    expect(err.metadata['seqs']).toBe('1');
    expect(await all(app, id)).toEqual(before);
  });

  it('a duplicate result (two results for one call) is refused the same way', async () => {
    const { svc, id } = await setup([user(BIG), call('a1', 'k1'), toolResult('k1', 'r'), toolResult('k1', 'again'), user('z')]);
    const plan = await svc.plan(ctx, id, { retainTokens: 1 });
    expect(plan.blockers.map((b) => [b.reason, b.seqs])).toEqual([['TOOL_RESULT_UNMATCHED', [3]]]);
  });

  it('counts by event type as the reference does: a user/message holding a tool-result block is not a result', async () => {
    const odd: CandidateEvent = { type: 'user/message', data: { id: 'u-odd', role: 'user', content: [{ type: 'tool-result', toolCallId: 'nowhere', content: [{ type: 'text', text: 'pasted' }] }], source: { kind: 'user' } }, surfaceOp: 'append' };
    const { svc, id } = await setup([user(BIG), odd, user(BIG), user('z')]);
    const plan = await svc.plan(ctx, id, { retainTokens: 1 });
    expect(plan.blockers).toEqual([]);
    expect(plan.shadowedSeqs).toEqual([0, 1, 2]);
  });

  it('a balanced surface has no such blocker and compacts', async () => {
    const { svc, id } = await setup([user(BIG), call('a1', 'k1'), toolResult('k1', 'r'), user('z')]);
    const plan = await svc.plan(ctx, id, { retainTokens: 1 });
    expect(plan.blockers).toEqual([]);
    expect(plan.shadowedSeqs).toEqual([0, 1, 2]);
  });
});

describe('open tool calls (compaction-basic region.ts selectCompactableRange + validateSurfaceRegion)', () => {
  it('compacts the balanced prefix before an unanswered call', async () => {
    const { app, svc, id } = await setup([user(BIG), user(BIG), call('a1', 'k1'), user('after')]);
    const plan = await svc.plan(ctx, id, { upToSeq: 3 });
    expect(plan.shadowedSeqs).toEqual([0, 1]);
    expect(plan.blockers).toEqual([]);
    const res = await svc.compact(ctx, id, { ...base, start: 0, end: 1, expectedLastSeq: plan.expectedLastSeq });
    expect(res.error).toBeUndefined();
    expect(res.seqs).toEqual([4, 5, 6, 7]);
    expect((await app.getSurface(ctx, id)).seqs).toEqual([6, 2, 3]);
  });

  it('refuses (TOOL_CALLS_OPEN) only where no balanced prefix exists, and a range ending inside the open step', async () => {
    const { app, svc, id } = await setup([call('a1', 'k1'), user(BIG), user(BIG)]);
    const plan = await svc.plan(ctx, id, { upToSeq: 1 });
    expect(plan.shadowedSeqs).toEqual([]);
    expect(plan.blockers.map((b) => [b.reason, b.callIds, b.seqs])).toEqual([['TOOL_CALLS_OPEN', ['k1'], [0]]]);
    const before = await all(app, id);
    const err = await refused(svc.compact(ctx, id, { ...base, start: 0, end: 1, expectedLastSeq: 2 }), 'COMPACTION_BLOCKED');
    expect(err.metadata['blocker']).toBe('TOOL_CALLS_OPEN');
    expect(await all(app, id)).toEqual(before);
  });
});

describe('a summary that is not smaller (compaction-basic region.ts summarizeCompaction)', () => {
  it('writes compaction/start and compaction/end {error} only, and says so in the response', async () => {
    const { app, svc, id } = await setup([user('tiny'), user('z')]);
    const plan = await svc.plan(ctx, id, { upToSeq: 0 });
    const res = await svc.compact(ctx, id, { ...base, start: 0, end: 0, expectedLastSeq: plan.expectedLastSeq });
    const framed = estimateMessageTokens({ role: 'user', content: [{ type: 'text', text: `${CHECKPOINT_PREAMBLE}\n\n${SUMMARY_OPEN}` }, ...base.summary, { type: 'text', text: SUMMARY_CLOSE }] });
    const shadowed = estimateMessageTokens({ role: 'user', content: [{ type: 'text', text: 'tiny' }] });
    const error = `summary is not smaller than the shadowed content (${framed} estimated framed tokens >= ${shadowed})`;
    // Nothing was recorded: shadowed_token_count is 0 (the numbers are in the error).
    expect(res).toMatchObject({ seqs: [2, 3], compactionId: 'id-1', error, shadowedTokenCount: 0 });
    const written = await all(app, id, 2);
    expect(written.map((e) => [e.type, e.data])).toEqual([
      ['compaction/start', { compactionId: 'id-1', turn: null }],
      ['compaction/end', { compactionId: 'id-1', turn: null, error }],
    ]);
    expect((await app.getSurface(ctx, id)).seqs).toEqual([0, 1]);
    // The bracket is closed: the next compaction is not blocked.
    expect((await svc.plan(ctx, id, { upToSeq: 0 })).blockers).toEqual([]);
  });

  it('a summary cheaper than the range writes the four events', async () => {
    const { svc, id } = await setup([user(BIG), user('z')]);
    const res = await svc.compact(ctx, id, { ...base, start: 0, end: 0, expectedLastSeq: 1 });
    expect(res.error).toBeUndefined();
    expect(res.seqs).toEqual([2, 3, 4, 5]);
  });

  it('an idempotent retry of a refused summary returns the same answer and appends nothing', async () => {
    const { app, svc, id } = await setup([user('tiny'), user('z')]);
    const req = { ...base, start: 0, end: 0, expectedLastSeq: 1, idempotencyKey: 'k' };
    const first = await svc.compact(ctx, id, req);
    expect(first.error).toMatch(/not smaller/);
    expect(await svc.compact(ctx, id, req)).toEqual({ ...first, replayed: true });
    expect((await app.getSession(ctx, id)).headSeq).toBe(3);
  });
});

describe('source_command_id (compaction-basic region.ts compactSurfaceRegion + commitCompactionBody, compaction checkpoint.ts)', () => {
  it('is carried in start, summary, end and the checkpoint source, right after compactionId', async () => {
    const { app, svc, id } = await setup([user(BIG), user('z')]);
    await svc.compact(ctx, id, { ...base, start: 0, end: 0, expectedLastSeq: 1, sourceCommandId: 'cmd-7' });
    const [start, summary, message, end] = await all(app, id, 2);
    expect(Object.entries(start!.data as object).slice(0, 3)).toEqual([['compactionId', 'id-1'], ['sourceCommandId', 'cmd-7'], ['turn', null]]);
    expect(Object.keys(summary!.data as object).slice(0, 3)).toEqual(['compactionId', 'sourceCommandId', 'summary']);
    expect((summary!.data as { sourceCommandId: string }).sourceCommandId).toBe('cmd-7');
    expect((message!.data as { source: unknown }).source).toEqual({ kind: 'plugin', plugin: 'compact', compactionId: 'id-1', sourceCommandId: 'cmd-7' });
    expect(JSON.stringify(end!.data)).toBe('{"compactionId":"id-1","sourceCommandId":"cmd-7","turn":null}');
  });

  it('is absent when not given (the keys are not written)', async () => {
    const { app, svc, id } = await setup([user(BIG), user('z')]);
    await svc.compact(ctx, id, { ...base, start: 0, end: 0, expectedLastSeq: 1 });
    const written = await all(app, id, 2);
    expect(written.some((e) => JSON.stringify(e.data).includes('sourceCommandId'))).toBe(false);
  });
});

describe('the compaction lock (compaction-basic region.ts inspectCompactionEntryState + assertCompactionInactive)', () => {
  it('looks only at the latest compaction/start or compaction/end: an end of another id unlocks', async () => {
    const { svc, id } = await setup([user(BIG), user('z'), logEvent('compaction/start', { compactionId: 'a', turn: null }), logEvent('compaction/end', { compactionId: 'b', turn: null })]);
    expect((await svc.plan(ctx, id, { upToSeq: 0 })).blockers).toEqual([]);
    const res = await svc.compact(ctx, id, { ...base, start: 0, end: 0, expectedLastSeq: 3 });
    expect(res.seqs).toEqual([4, 5, 6, 7]);
  });

  it('a latest compaction/start is open even when an earlier start of the same id ended', async () => {
    const { app, svc, id } = await setup([user(BIG), user('z'), logEvent('compaction/start', { compactionId: 'a', turn: null }), logEvent('compaction/end', { compactionId: 'a', turn: null }), logEvent('compaction/start', { compactionId: 'a', turn: null })]);
    expect((await svc.plan(ctx, id, { upToSeq: 0 })).blockers.map((b) => [b.reason, b.seqs])).toEqual([['COMPACTION_IN_PROGRESS', [4]]]);
    await refused(svc.compact(ctx, id, { ...base, start: 0, end: 0, expectedLastSeq: 4 }), 'COMPACTION_BLOCKED');
    expect((await app.getSession(ctx, id)).headSeq).toBe(4);
  });

  it('a session/end-seed after the latest start releases it; one before it does not', async () => {
    const later = await setup([user(BIG), user('z'), logEvent('compaction/start', { compactionId: 'a', turn: null }), logEvent('session/end-seed', {})]);
    expect((await later.svc.plan(ctx, later.id, { upToSeq: 0 })).blockers).toEqual([]);
    const earlier = await setup([user(BIG), user('z'), logEvent('session/end-seed', {}), logEvent('compaction/start', { compactionId: 'a', turn: null })]);
    expect((await earlier.svc.plan(ctx, earlier.id, { upToSeq: 0 })).blockers.map((b) => b.reason)).toEqual(['COMPACTION_IN_PROGRESS']);
  });
});
