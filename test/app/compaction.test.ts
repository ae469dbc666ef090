/**
 * PlanCompaction, Compact and PruneToolResults through the app layer (memory store). The compaction
 * the reference wrote in fixture compaction-recovery is reproduced event for event: the log up to
 * the compaction is imported, planned and compacted with the fixture's ids and summary, and the
 * four appended events equal the fixture's lines (times aside).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import { CompactionService } from '../../src/app/compaction.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent, SessionEvent } from '../../src/domain/event.js';
import { PRUNE_MARKER } from '../../src/domain/prune.js';
import { logEvent, toolResult, user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
const FIXTURE = new URL('../fixtures/reference-sessions/compaction-recovery.jsonl', import.meta.url);

function bytesOf(text: string): AsyncGenerator<Uint8Array> {
  return (async function* () {
    yield new TextEncoder().encode(text);
  })();
}

function ids(...list: string[]): () => string {
  let i = 0;
  return () => list[i++] ?? `id-${i}`;
}

async function events(app: SessionService, id: string, from: number): Promise<SessionEvent[]> {
  const out: SessionEvent[] = [];
  for await (const b of app.scan(ctx, id, from)) out.push(...b);
  return out;
}

function withoutTime(e: SessionEvent | Record<string, unknown>): Record<string, unknown> {
  const { time: _t, ...rest } = e as Record<string, unknown>;
  return rest;
}

async function expectReason(p: Promise<unknown>, reason: string): Promise<DomainError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(DomainError);
  expect((err as DomainError).reason, (err as DomainError).message).toBe(reason);
  return err as DomainError;
}

describe('Compact reproduces the reference compaction of compaction-recovery exactly', () => {
  const lines = readFileSync(FIXTURE, 'utf8').split('\n').filter((l) => l !== '');
  // Header + seqs 0..18: the state right before the reference compacted.
  const prefix = lines.slice(0, 20).join('\n') + '\n';
  const reference = lines.slice(20, 24).map((l) => JSON.parse(l) as Record<string, unknown>);

  it('plans the same range and token count, then appends the same four events', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1_786_123_401_725);
    await app.importJsonl(ctx, bytesOf(prefix), { id: 'fa2be216-eab0-440a-b5c4-3b4aae4a650e' });
    const id = 'fa2be216-eab0-440a-b5c4-3b4aae4a650e';
    const svc = new CompactionService(app, ids('338e88fa-e78b-4d49-bd38-8f919e85f5e1', '3668b957-07a2-4cb7-96b1-98a23ac8cdb8'));
    expect((await app.getSurface(ctx, id)).seqs).toEqual([4, 13, 15]);
    // A budget that keeps only the last result would cut between the call (13) and its result
    // (15): the plan keeps the pair and shadows the user message alone, as the reference did.
    const plan = await svc.plan(ctx, id, { keepTokens: 1 });
    expect(plan).toMatchObject({ start: 4, end: 4, shadowedSeqs: [4], expectedLastSeq: 18, shadowedTokenCount: 266, blockers: [] });
    expect(plan.messages.map((m) => m.seq)).toEqual([4]);
    const summary = [{ type: 'text', text: 'The request established a durable compaction premise.' }];
    const res = await svc.compact(ctx, id, {
      start: 4, end: 4, expectedLastSeq: plan.expectedLastSeq, summary, rawOutput: summary, llmStreamCall: true,
      provider: 'deepseek-official', model: 'deepseek-v4-flash', maxTokens: 32, usage: { inputTokens: 20, outputTokens: 4 },
    });
    expect(res).toMatchObject({ seqs: [19, 20, 21, 22], compactionId: '338e88fa-e78b-4d49-bd38-8f919e85f5e1', shadowedTokenCount: 266, replayed: false });
    const appended = await events(app, id, 19);
    // Same keys in the same order, same values (JSON text equality), times aside.
    expect(appended.map((e) => JSON.stringify(withoutTime(e)))).toEqual(reference.map((e) => JSON.stringify(withoutTime(e))));
    expect((await app.getSurface(ctx, id)).seqs).toEqual([21, 13, 15]);
  });

  it('refuses a moved head (HEAD_MISMATCH), a range not anchored at the surface start, and a second compaction while one is open, leaving the log untouched', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    const id = 'cr';
    await app.importJsonl(ctx, bytesOf(prefix), { id });
    const svc = new CompactionService(app);
    const base = { summary: [{ type: 'text', text: 's' }], provider: 'p', model: 'm' };
    await expectReason(svc.compact(ctx, id, { ...base, start: 4, end: 4, expectedLastSeq: 17 }), 'HEAD_MISMATCH');
    await expectReason(svc.compact(ctx, id, { ...base, start: 13, end: 15, expectedLastSeq: 18 }), 'COMPACTION_RANGE_INVALID');
    await expectReason(svc.compact(ctx, id, { ...base, start: 4, end: 99, expectedLastSeq: 18 }), 'COMPACTION_RANGE_INVALID');
    await expectReason(svc.compact(ctx, id, { ...base, summary: [], start: 4, end: 4, expectedLastSeq: 18 }), 'INVALID_ARGUMENT');
    // A compaction that splits the pair is refused by the guard (even though imports have it off).
    await expectReason(svc.compact(ctx, id, { ...base, start: 4, end: 13, expectedLastSeq: 18 }), 'TOOL_PAIRING_BROKEN');
    // An open compaction/start blocks planning and compacting.
    await app.append(ctx, id, [logEvent('compaction/start', { compactionId: 'open', turn: 1 })]);
    const plan = await svc.plan(ctx, id, { keepTokens: 1 });
    expect(plan.blockers.map((b) => [b.reason, b.seqs])).toEqual([['COMPACTION_IN_PROGRESS', [19]]]);
    const err = await expectReason(svc.compact(ctx, id, { ...base, start: 4, end: 4, expectedLastSeq: 19 }), 'COMPACTION_BLOCKED');
    expect(err.metadata['blocker']).toBe('COMPACTION_IN_PROGRESS');
    expect((await app.getSession(ctx, id)).headSeq).toBe(19);
    // Once it ended, it goes through.
    await app.append(ctx, id, [logEvent('compaction/end', { compactionId: 'open', turn: 1 })]);
    await svc.compact(ctx, id, { ...base, start: 4, end: 4, expectedLastSeq: 20 });
  });

  it('is idempotent with a key: the retry returns the original result and appends nothing', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    const id = 'cr';
    await app.importJsonl(ctx, bytesOf(prefix), { id });
    const svc = new CompactionService(app);
    const req = { start: 4, end: 4, expectedLastSeq: 18, summary: [{ type: 'text', text: 's' }], provider: 'p', model: 'm', idempotencyKey: 'k1' };
    const first = await svc.compact(ctx, id, req);
    const again = await svc.compact(ctx, id, req);
    expect(again).toEqual({ ...first, replayed: true });
    expect((await app.getSession(ctx, id)).headSeq).toBe(22);
  });

  it('refuses the key reused with another request body (IDEMPOTENCY_KEY_REUSED, log untouched)', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    const id = 'cr';
    await app.importJsonl(ctx, bytesOf(prefix), { id });
    const svc = new CompactionService(app);
    const req = { start: 4, end: 4, expectedLastSeq: 18, summary: [{ type: 'text', text: 's' }], provider: 'p', model: 'm', idempotencyKey: 'k1' };
    const first = await svc.compact(ctx, id, req);
    const before = await app.listEvents(ctx, id, { fromSeq: 0, direction: 'forward', pageSize: 100 });
    await expectReason(svc.compact(ctx, id, { ...req, summary: [{ type: 'text', text: 'another summary' }] }), 'IDEMPOTENCY_KEY_REUSED');
    await expectReason(svc.compact(ctx, id, { ...req, end: 6 }), 'IDEMPOTENCY_KEY_REUSED');
    expect(await app.listEvents(ctx, id, { fromSeq: 0, direction: 'forward', pageSize: 100 })).toEqual(before);
    // The same body still replays.
    expect(await svc.compact(ctx, id, req)).toEqual({ ...first, replayed: true });
  });

  it('keeps open tool calls out of the range: the balanced prefix before them is planned, a range into them is blocked', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    // Guard off: a guarded session refuses the user message after the open call (TOOL_RESULT_MISSING);
    // Compact checks its own batch either way.
    await app.createSession(ctx, { id: 'o', pairingGuard: false });
    await app.append(ctx, 'o', [
      user('a'),
      { type: 'assistant/message', data: { turn: 1, step: 1, message: { id: 'm', role: 'assistant', content: [{ type: 'tool-call', id: 'k', name: 'read', arguments: '{}' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append' },
      user('b'),
    ]);
    const svc = new CompactionService(app);
    const plan = await svc.plan(ctx, 'o', { upToSeq: 2 });
    expect(plan.shadowedSeqs).toEqual([0]);
    // The reference compacts the balanced prefix (issue #32 item 4): no blocker.
    expect(plan.blockers).toEqual([]);
    const err = await expectReason(svc.compact(ctx, 'o', { start: 0, end: 1, expectedLastSeq: 2, summary: [{ type: 'text', text: 's' }], provider: 'p', model: 'm' }), 'COMPACTION_BLOCKED');
    expect(err.metadata['blocker']).toBe('TOOL_CALLS_OPEN');
    expect(err.metadata['callIds']).toBe('k');
  });
});

describe('PlanCompaction over a session that keeps moving (incremental planner nodes)', () => {
  it('equals a plan by a fresh service (no cache) after appends, a compaction and a prune', async () => {
    const store = new MemorySessionStore();
    const app = new SessionService(store, undefined, () => 1);
    const svc = new CompactionService(app);
    await app.createSession(ctx, { id: 'm' });
    const fresh = async (): Promise<unknown> => new CompactionService(new SessionService(store, undefined, () => 1)).plan(ctx, 'm', { keepTokens: 30 });
    const round = (i: number): CandidateEvent[] => [
      user(`q${i} ${'x'.repeat(40)}`),
      { type: 'assistant/message', data: { turn: 1, step: 1, message: { id: `a${i}`, role: 'assistant', content: [{ type: 'tool-call', id: `k${i}`, name: 'read', arguments: '{}' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append' },
      toolResult(`k${i}`, 'y'.repeat(12_000)),
    ];
    for (let i = 0; i < 6; i++) {
      await app.append(ctx, 'm', round(i));
      expect(await svc.plan(ctx, 'm', { keepTokens: 30 })).toEqual(await fresh());
    }
    // Prunes results in the middle of the surface (the last one is kept): the surface's tail is unchanged.
    expect((await svc.prune(ctx, 'm', { minBytes: 100, keepRecent: 1 })).pruned.length).toBe(5);
    expect(await svc.plan(ctx, 'm', { keepTokens: 30 })).toEqual(await fresh());
    const p = await svc.plan(ctx, 'm', { keepTokens: 30 });
    await svc.compact(ctx, 'm', { start: p.start!, end: p.end!, expectedLastSeq: p.expectedLastSeq, summary: [{ type: 'text', text: 's' }], provider: 'p', model: 'm' });
    expect(await svc.plan(ctx, 'm', { keepTokens: 30 })).toEqual(await fresh());
    await app.append(ctx, 'm', round(9));
    expect(await svc.plan(ctx, 'm', { keepTokens: 30 })).toEqual(await fresh());
  });
});

describe('PruneToolResults writes the reference pruner\'s two events per result', () => {
  async function setup(): Promise<{ app: SessionService; svc: CompactionService }> {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    await app.createSession(ctx, { id: 'p' });
    const call = (callId: string, name: string): CandidateEvent => ({
      type: 'assistant/message',
      data: { turn: 1, step: 1, message: { id: `a-${callId}`, role: 'assistant', content: [{ type: 'tool-call', id: callId, name, arguments: '{}' }], source: { kind: 'model', provider: 'p', model: 'm' } } },
      surfaceOp: 'append',
    });
    const big = 'x'.repeat(6000) + 'MIDDLE' + 'y'.repeat(6000);
    await app.append(ctx, 'p', [
      user('go'), // 0
      call('c1', 'read'), logEvent('tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' }), toolResult('c1', big, { sourceEventSeqs: [2] }, { isError: false }), // 1 2 3
      call('c2', 'bash'), toolResult('c2', big), // 4 5
      call('c3', 'read'), toolResult('c3', 'small'), // 6 7
      call('c4', 'read'), toolResult('c4', big), // 8 9
    ]);
    return { app, svc: new CompactionService(app) };
  }

  it('by policy: over min_bytes, except the most recent K and excluded tools; copies differ only in the inner content', async () => {
    const { app, svc } = await setup();
    const res = await svc.prune(ctx, 'p', { minBytes: 8192, keepRecent: 1, excludeTools: ['bash'] });
    expect(res.pruned.map((p) => [p.originalSeq, p.pruneSeq, p.replacementSeq, p.callId])).toEqual([[3, 10, 11, 'c1']]);
    expect(res.pruned[0]).toMatchObject({ bytesBefore: 12006 });
    expect(res.bytesSaved).toBe(12006 - res.pruned[0]!.bytesAfter);
    const [prune, copy] = await events(app, 'p', 10);
    expect(prune).toEqual({ type: 'compaction/prune', seq: 10, time: 1, data: { shadowedRange: { start: 3, end: 3 }, shadowedSeqs: [3], shadowedTokenCount: prune!.data && (prune!.data as { shadowedTokenCount: number }).shadowedTokenCount } });
    expect(Object.keys(prune!.data as object)).toEqual(['shadowedRange', 'shadowedSeqs', 'shadowedTokenCount']);
    const original = (await events(app, 'p', 3))[0]!;
    const want = JSON.parse(JSON.stringify(original.data)) as { message: { content: { content: unknown }[] } };
    want.message.content[0]!.content = [{ type: 'text', text: 'x'.repeat(4096) + PRUNE_MARKER + 'y'.repeat(1024) }];
    expect(JSON.stringify(copy!.data)).toBe(JSON.stringify(want));
    expect(copy).toMatchObject({ type: 'tool/result', surfaceOp: { op: 'replace', start: 3, end: 3 }, sourceEventSeqs: [3] });
    expect((await app.getSurface(ctx, 'p')).seqs).toEqual([0, 1, 11, 4, 5, 6, 7, 8, 9]);
    // Pruning the pruned copy again: nothing left to remove with the defaults; smaller head/tail do.
    expect((await svc.prune(ctx, 'p', { seqs: [11] })).skipped).toEqual([11]);
    const again = await svc.prune(ctx, 'p', { seqs: [11], headChars: 10, tailChars: 10 });
    expect(again.pruned.map((p) => p.originalSeq)).toEqual([11]);
  });

  it('by seq; refuses a seq that is not a surface tool/result (log untouched); needs seqs or min_bytes', async () => {
    const { app, svc } = await setup();
    await expectReason(svc.prune(ctx, 'p', { seqs: [1] }), 'PRUNE_TARGET_INVALID');
    await expectReason(svc.prune(ctx, 'p', { seqs: [42] }), 'PRUNE_TARGET_INVALID');
    await expectReason(svc.prune(ctx, 'p', {}), 'INVALID_ARGUMENT');
    await expectReason(svc.prune(ctx, 'p', { seqs: [5], expectedLastSeq: 3 }), 'HEAD_MISMATCH');
    expect((await app.getSession(ctx, 'p')).headSeq).toBe(9);
    const res = await svc.prune(ctx, 'p', { seqs: [9, 5], idempotencyKey: 'pk' });
    expect(res.pruned.map((p) => p.originalSeq)).toEqual([5, 9]);
    const replay = await svc.prune(ctx, 'p', { seqs: [9, 5], idempotencyKey: 'pk' });
    expect(replay).toEqual({ ...res, replayed: true, skipped: [] });
    expect((await app.getSession(ctx, 'p')).headSeq).toBe(13);
    // The key reused with another body: refused, nothing appended.
    await expectReason(svc.prune(ctx, 'p', { seqs: [9], idempotencyKey: 'pk' }), 'IDEMPOTENCY_KEY_REUSED');
    await expectReason(svc.prune(ctx, 'p', { minBytes: 1, idempotencyKey: 'pk' }), 'IDEMPOTENCY_KEY_REUSED');
    expect((await app.getSession(ctx, 'p')).headSeq).toBe(13);
  });
});
