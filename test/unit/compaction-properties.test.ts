/**
 * Compaction planning, the compaction batch and pruning over random agent sessions (tool calls,
 * open calls, nested compactions, prunes of pruned results), with the engine as the judge:
 *
 * - a plan's range never separates a tool call from a result of it;
 * - the compaction and prune batches are always accepted, with the tool-pairing guard on (so the
 *   reference's own rules REPLACE_SOURCES_INCOMPLETE and TOOL_RESULT_REPLACE_NON_CONTENT, and
 *   every other rule, never fire);
 * - the model history after them has no orphan tool result (every result follows its call).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { CandidateEvent, Json, SessionEvent } from '../../src/domain/event.js';
import { projectMessage } from '../../src/domain/derive.js';
import { compactionBatch, openToolCalls, planCompaction, type PlanNode } from '../../src/domain/compaction-plan.js';
import { estimateMessageTokens } from '../../src/domain/token-estimate.js';
import { PRUNE_MARKER, pruneBatch, pruneContent, pruneMarker, toolResultContent } from '../../src/domain/prune.js';
import { PairingIndex, pairingInfoOfMessage, NO_PAIRING } from '../../src/domain/tool-pairing.js';
import { Harness, logEvent } from '../support/engine-harness.js';
import { rng } from '../support/rng.js';

const SID = 'sess-1';

/** A harness whose plans are checked by the tool-pairing guard. */
class GuardedHarness extends Harness {
  readonly index = new PairingIndex(SID);
  constructor() {
    super();
    this.index.hydrate([], 0);
  }
  override plan(candidates: readonly CandidateEvent[]) {
    return this.engine.plan(candidates, { ...this.ctx(), pairing: this.index.lookup });
  }
  override commit(plan: ReturnType<Harness['plan']>) {
    super.commit(plan);
    expect(this.index.apply(plan)).toBe(true);
    return plan;
  }
}

function nodesOf(h: Harness): PlanNode[] {
  return h.engine.surface().map((seq) => {
    const m = projectMessage(h.events.get(seq) as SessionEvent, SID);
    return { seq, tokens: estimateMessageTokens(m), pairing: m === undefined ? NO_PAIRING : pairingInfoOfMessage(m) };
  });
}

/** Orphans of the model history: results whose call id no earlier message holds. */
function orphans(h: Harness): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const seq of h.engine.surface()) {
    const p = pairingInfoOfMessage(projectMessage(h.events.get(seq) as SessionEvent, SID));
    for (const r of p.results) if (!seen.has(r)) out.push(`${r}@${seq}`);
    for (const c of p.calls) seen.add(c);
  }
  return out;
}

function text(r: () => number, min: number, max: number): string {
  const n = min + Math.floor(r() * (max - min));
  let s = '';
  while (s.length < n) s += 'lorem ipsum dolor sit amet ✓ '.slice(0, 1 + Math.floor(r() * 28));
  return s.slice(0, n);
}

function assistantWith(calls: string[], t: string): CandidateEvent {
  return {
    type: 'assistant/message',
    data: { turn: 1, step: 1, message: { id: `a-${t.length}-${calls.join('.')}`, role: 'assistant', content: [{ type: 'text', text: t }, ...calls.map((id) => ({ type: 'tool-call', id, name: id.endsWith('x') ? 'bash' : 'read', arguments: `{"q":"${id}"}` }))], source: { kind: 'model', provider: 'p', model: 'm' } } },
    surfaceOp: 'append',
  };
}

function resultFor(callId: string, body: string, callSeq: number | undefined): CandidateEvent {
  const c: Record<string, unknown> = {
    type: 'tool/result',
    data: { turn: 1, step: 1, message: { id: `r-${callId}`, role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: body }], isError: false }] } },
    surfaceOp: 'append',
  };
  if (callSeq !== undefined) c['sourceEventSeqs'] = [callSeq];
  return c as CandidateEvent;
}

/** Runs one random session of `steps` operations; returns what it did. */
function runSession(seed: number, steps: number): { compactions: number; prunes: number } {
  const r = rng(seed);
  const h = new GuardedHarness();
  const open: { callId: string; callSeq: number }[] = [];
  let nextCall = 0;
  let compactions = 0;
  let prunes = 0;
  for (let step = 0; step < steps; step++) {
    const x = r();
    if (x < 0.2) {
      h.add({ type: 'user/message', data: { id: `u${step}`, role: 'user', content: [{ type: 'text', text: text(r, 5, 400) }], source: { kind: 'user' } }, surfaceOp: 'append' });
    } else if (x < 0.5) {
      // An assistant message with 0-3 calls; each gets a tool/call and (mostly) a result, maybe later.
      const k = Math.floor(r() * 4);
      const calls = Array.from({ length: k }, () => `c${nextCall++}${r() < 0.3 ? 'x' : ''}`);
      h.add(assistantWith(calls, text(r, 1, 200)));
      for (const callId of calls) {
        const callSeq = h.seqOf(logEvent('tool/call', { turn: 1, step: 1, callId, name: 'read', arguments: '{}' }));
        if (r() < 0.75) h.add(resultFor(callId, text(r, 10, r() < 0.3 ? 12_000 : 600), callSeq));
        else open.push({ callId, callSeq });
      }
    } else if (x < 0.6 && open.length > 0) {
      const o = open.splice(Math.floor(r() * open.length), 1)[0]!;
      h.add(resultFor(o.callId, text(r, 10, 9_000), o.callSeq));
    } else if (x < 0.8) {
      const nodes = nodesOf(h);
      const total = nodes.reduce((a, n) => a + n.tokens, 0);
      const plan = planCompaction(nodes, { keepTokens: Math.floor(r() * total) });
      // The range never separates a call from its results.
      const inRange = new Set(nodes.slice(0, plan.cut).map((n) => n.seq));
      const where = new Map<string, boolean[]>();
      for (const n of nodes) for (const id of [...n.pairing.calls, ...n.pairing.results]) (where.get(id) ?? where.set(id, []).get(id)!).push(inRange.has(n.seq));
      for (const [id, sides] of where) expect(new Set(sides).size, `pair ${id} split by cut ${plan.cut}`).toBe(1);
      expect(plan.cut).toBeLessThanOrEqual(plan.budgetCut);
      if (plan.cut === 0) continue;
      const shadowed = nodes.slice(0, plan.cut).map((n) => n.seq);
      const batch = compactionBatch({
        compactionId: `cmp-${step}`, messageId: `msg-${step}`, turn: 1, firstSeq: h.engine.nextSeq,
        start: shadowed[0]!, end: shadowed[shadowed.length - 1]!, shadowedSeqs: shadowed, shadowedTokenCount: plan.shadowedTokens,
        summary: [{ type: 'text', text: `summary ${step}` }], provider: 'p', model: 'm',
      });
      h.add(batch as unknown as CandidateEvent[]);
      compactions++;
    } else {
      const results = h.engine.surface().filter((s) => h.engine.typeOf(s) === 'tool/result');
      const picked = results.filter(() => r() < 0.5).map((s) => h.events.get(s) as SessionEvent);
      const head = 20 + Math.floor(r() * 3000);
      const tail = Math.floor(r() * 1500);
      const b = pruneBatch(picked, SID, { headChars: head, tailChars: tail });
      if (b.events.length === 0) continue;
      const plan = h.add(b.events as unknown as CandidateEvent[]);
      // Each copy equals its original except the inner content.
      for (const e of b.entries) {
        const copy = plan.events[e.index + 1] as SessionEvent;
        const original = h.events.get(e.originalSeq) as SessionEvent;
        const strip = (d: Json): string => JSON.stringify(d, (k, v: unknown) => (k === 'content' && Array.isArray(v) && v.every((y) => typeof y === 'object' && y !== null && (y as { type?: string }).type === 'text') ? '<inner>' : v));
        expect(strip(copy.data)).toBe(strip(original.data));
        expect(Object.keys(copy.data as object)).toEqual(Object.keys(original.data as object));
      }
      prunes += b.entries.length;
    }
    expect(orphans(h)).toEqual([]);
  }
  return { compactions, prunes };
}

describe('compaction and pruning over random sessions', () => {
  it('plans never split a pair; Compact and Prune batches are accepted with the guard on; no orphan after (fast-check)', () => {
    let compactions = 0;
    let prunes = 0;
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 31 - 1 }), (seed) => {
        const out = runSession(seed, 60);
        compactions += out.compactions;
        prunes += out.prunes;
      }),
      { numRuns: 60, seed: 1414 },
    );
    // The generator really exercises both (nested compactions, prunes of pruned results).
    expect(compactions).toBeGreaterThan(100);
    expect(prunes).toBeGreaterThan(100);
  });
});

describe('planCompaction', () => {
  const node = (seq: number, tokens: number, calls: string[] = [], results: string[] = []): PlanNode => ({ seq, tokens, pairing: { calls, names: calls.map(() => 'read'), results } });

  it('keeps the most recent nodes that fit the budget (at least one), anchored at the start', () => {
    const nodes = [node(0, 10), node(1, 10), node(2, 10), node(3, 10)];
    expect(planCompaction(nodes, { keepTokens: 25 })).toMatchObject({ cut: 2, budgetCut: 2, shadowedTokens: 20, keptTokens: 20 });
    expect(planCompaction(nodes, { keepTokens: 0 })).toMatchObject({ cut: 3 });
    expect(planCompaction(nodes, { keepTokens: 1000 })).toMatchObject({ cut: 0 });
    expect(planCompaction(nodes, { upToSeq: 1 })).toMatchObject({ cut: 2 });
    expect(() => planCompaction(nodes, { upToSeq: 9 })).toThrow(RangeError);
  });

  it('moves the cut before a call whose result would be kept, and before an open call (reported)', () => {
    const nodes = [node(0, 10), node(1, 10, ['a']), node(2, 10, [], ['a']), node(3, 10)];
    expect(planCompaction(nodes, { keepTokens: 25 })).toMatchObject({ cut: 1, budgetCut: 2 }); // would cut between 1 and 2
    expect(planCompaction(nodes, { keepTokens: 5 })).toMatchObject({ cut: 3 }); // pair inside the range: fine
    const open = [node(0, 10), node(1, 10, ['b']), node(2, 10), node(3, 10)];
    const p = planCompaction(open, { keepTokens: 5 });
    expect(p).toMatchObject({ cut: 1 });
    expect(openToolCalls(open)).toEqual([{ callId: 'b', seq: 1 }]);
    // A call answered anywhere on the surface is not open; one answered by another id is.
    expect(openToolCalls([node(0, 1, ['x', 'y']), node(1, 1, [], ['y']), node(2, 1, [], ['z'])])).toEqual([{ callId: 'x', seq: 0 }]);
  });
});

describe('pruneContent (the reference pruner)', () => {
  it('keeps head and tail code points around a marker naming the removed count (option with-count), across text blocks', () => {
    const blocks: Json[] = [{ type: 'text', text: 'a'.repeat(100) }, { type: 'image', attachment: { id: 'i' } }, { type: 'text', text: 'b'.repeat(100) }];
    const out = pruneContent(blocks, { headChars: 10, tailChars: 5, marker: 'with-count' });
    expect(out?.removed).toBe(185);
    expect(out?.content).toEqual([{ type: 'text', text: 'a'.repeat(10) + pruneMarker(185) }, { type: 'image', attachment: { id: 'i' } }, { type: 'text', text: 'b'.repeat(5) }]);
    expect(pruneMarker(185)).toBe('\n\n[... tool result middle pruned: 185 characters ...]\n\n');
    // Not over the threshold (head + marker + tail = 54 by default): left alone.
    expect(pruneContent([{ type: 'text', text: 'x'.repeat(54) }], { headChars: 10, tailChars: 5 })).toBeNull();
    expect(pruneContent([{ type: 'text', text: 'x'.repeat(55) }], { headChars: 10, tailChars: 5 })?.content).toEqual([{ type: 'text', text: 'x'.repeat(10) + PRUNE_MARKER + 'x'.repeat(5) }]);
  });

  it('slices by code point (no split surrogate pair)', () => {
    const s = '😀'.repeat(200);
    const out = pruneContent([{ type: 'text', text: s }], { headChars: 3, tailChars: 2 });
    const t = (out?.content[0] as { text: string }).text;
    expect(t.startsWith('😀😀😀\n\n[...')).toBe(true);
    expect(t.endsWith('...]\n\n😀😀')).toBe(true);
  });

  it('reads the inner content of canonical and legacy tool results', () => {
    const canonical = { type: 'tool/result', seq: 1, time: 0, data: { turn: 1, step: 1, message: { id: 'r', role: 'user', source: { kind: 'tool', callId: 'c' }, content: [{ type: 'tool-result', toolCallId: 'c', content: [{ type: 'text', text: 'x' }] }] } } } as SessionEvent;
    const legacy = { type: 'tool/result', seq: 1, time: 0, data: { turn: 1, step: 1, callId: 'c', content: [{ type: 'text', text: 'y' }], isError: false } } as SessionEvent;
    expect(toolResultContent(canonical)).toEqual([{ type: 'text', text: 'x' }]);
    expect(toolResultContent(legacy)).toEqual([{ type: 'text', text: 'y' }]);
  });
});
