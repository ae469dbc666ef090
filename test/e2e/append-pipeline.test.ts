/**
 * The pipelined write path: batches planned on top of batches not yet committed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, callError, startTestServer, type TestServer } from '../support/test-server.js';
import { input, replaceOp, toolResult, userMessage } from '../support/events.js';

let t: TestServer;
beforeAll(async () => { t = await startTestServer(); });
afterAll(async () => { await t.stop(); });

const append = (req: Parameters<TestServer['client']['appendEvents']>[0]) => call(t.client.appendEvents.bind(t.client), req);

describe('pipelined appends', () => {
  it('accepts a prune sent before the tool/result it rewrites was acknowledged', async () => {
    const c = t.client;
    // Bare tool results (no call): the tool-pairing guard would refuse them (TOOL_RESULT_ORPHANED).
    await call(c.createSession.bind(c), { sessionId: 'pipe-prune', labels: {}, strict: false, pairingGuard: false });
    const result = toolResult('r1', 'call-1', 'a very long tool output '.repeat(20), undefined);
    const pruned = toolResult('r1', 'call-1', '[pruned]', undefined);
    const [a, b] = await Promise.all([
      append({ sessionId: 'pipe-prune', idempotencyKey: '', events: [result] }),
      append({ sessionId: 'pipe-prune', idempotencyKey: '', events: [
        input('compaction/prune', { shadowedRange: { start: 0, end: 0 }, shadowedSeqs: [0], shadowedTokenCount: 100 }),
        { ...pruned, surfaceOp: replaceOp(0, 0), sourceEventSeqs: { seqs: [0] } },
      ] }),
    ]);
    expect(a.seqs).toEqual([0]);
    expect(b.seqs).toEqual([1, 2]);
    expect((await call(c.getSurface.bind(c), { sessionId: 'pipe-prune' })).seqs).toEqual([2]);
  });

  it('answers each pipelined batch with its own surface length, and a replay with the original one', async () => {
    const c = t.client;
    await call(c.createSession.bind(c), { sessionId: 'pipe-len', labels: {}, strict: false });
    const results = await Promise.all([0, 1, 2, 3, 4].map((i) => append({ sessionId: 'pipe-len', idempotencyKey: `k${i}`, events: [userMessage(`m${i}`, 'x')] })));
    // Batch with seq s leaves s + 1 nodes on the surface.
    for (const r of results) expect(r.surfaceLength).toBe((r.seqs[0] as number) + 1);
    const replay = await append({ sessionId: 'pipe-len', idempotencyKey: 'k0', events: [userMessage('m0', 'x')] });
    expect(replay).toMatchObject({ replayed: true, seqs: results[0]!.seqs, surfaceLength: results[0]!.surfaceLength });
  });

  it('detects an idempotency key reused with a different surface op, but not with reordered data keys', async () => {
    const c = t.client;
    await call(c.createSession.bind(c), { sessionId: 'pipe-idem', labels: {}, strict: false });
    await append({ sessionId: 'pipe-idem', idempotencyKey: '', events: [userMessage('a', '1'), userMessage('b', '2'), userMessage('c', '3')] });
    const summary = (start: number, end: number) => input('user/message', { id: 's', role: 'user', content: [{ type: 'text', text: 'sum' }], source: { kind: 'plugin', plugin: 'compact' } },
      { surfaceOp: replaceOp(start, end), sourceEventSeqs: { seqs: [0, 1, 2] } });
    await append({ sessionId: 'pipe-idem', idempotencyKey: 'k', events: [summary(0, 0)] });
    const reused = await callError(c.appendEvents.bind(c), { sessionId: 'pipe-idem', idempotencyKey: 'k', events: [summary(1, 2)] });
    expect(reused.reason).toBe('IDEMPOTENCY_KEY_REUSED');
    const reordered = input('user/message', { source: { kind: 'plugin', plugin: 'compact' }, content: [{ text: 'sum', type: 'text' }], role: 'user', id: 's' },
      { surfaceOp: replaceOp(0, 0), sourceEventSeqs: { seqs: [0, 1, 2] } });
    expect(await append({ sessionId: 'pipe-idem', idempotencyKey: 'k', events: [reordered] })).toMatchObject({ replayed: true, seqs: [3] });
  });
});
