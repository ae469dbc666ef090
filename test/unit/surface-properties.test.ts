/**
 * Properties over random valid histories (appends, nested replaces, compaction summaries,
 * tool-result prunes), committed in random batches:
 *  - the incremental chunked surface equals the naive reference fold (array + indexOf);
 *  - the incremental message projection equals deriving from the folded surface;
 *  - a cold load from structural rows gives the same state;
 *  - a random rejected candidate changes nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deriveMessages, MessageProjection } from '../../src/domain/derive.js';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent, SessionEvent } from '../../src/domain/event.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import { Harness, assistant, logEvent, rep, snapshot, toolResultData, user } from '../support/engine-harness.js';
import { naiveFold } from '../support/naive-surface.js';

type Cmd = { kind: number; a: number; b: number; batchBreak: boolean };

const cmdArb = fc.record({ kind: fc.nat(99), a: fc.nat(), b: fc.nat(), batchBreak: fc.boolean() });

/**
 * Interprets commands into valid candidates, tracking a naive model (surface array, data by seq).
 * Candidates carry no seq; the model assigns seqs as append mode would.
 */
function buildHistory(cmds: readonly Cmd[]): { batches: CandidateEvent[][] } {
  const surface: number[] = [];
  const tool = new Map<number, Record<string, unknown>>(); // surface tool/results by seq -> data
  const batches: CandidateEvent[][] = [[]];
  let seq = 0;
  const emit = (c: CandidateEvent): number => {
    (batches[batches.length - 1] as CandidateEvent[]).push(c);
    return seq++;
  };
  for (const { kind, a, b, batchBreak } of cmds) {
    if (kind < 20) {
      surface.push(emit(user(`u${seq}`)));
    } else if (kind < 35) {
      const text = kind % 5 === 0 ? '' : `a${seq}`;
      surface.push(emit(assistant(text, { sourceEventSeqs: seq > 0 ? [a % seq] : [] })));
    } else if (kind < 45) {
      const callId = `c${seq}`;
      const callSeq = emit(logEvent('tool/call', { turn: 1, step: 1, callId, name: 'bash', arguments: '{}' }));
      const data = { ...toolResultData(callId, `output ${a}`, { isError: a % 2 === 0 }), ...(b % 3 === 0 ? { meta: { n: b } } : {}) };
      const s = emit({ type: 'tool/result', data, surfaceOp: 'append', sourceEventSeqs: [callSeq] });
      surface.push(s);
      tool.set(s, data);
    } else if (kind < 55) {
      emit(logEvent('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'x' } }));
    } else if (kind < 75 && surface.length > 0) {
      // Compaction: a user/message summary replaces a surface range (positions i..j).
      const i = a % surface.length;
      const j = i + (b % Math.min(surface.length - i, kind % 2 === 0 ? 40 : 700));
      const shadowed = surface.slice(i, j + 1);
      const summarySeq = emit(logEvent('compaction/summary', { compactionId: `k${seq}`, summary: [], shadowedRange: { start: surface[i], end: surface[j] }, shadowedSeqs: shadowed, shadowedTokenCount: 1, provider: 'p', model: 'm' }));
      const s = emit(user(`summary${seq}`, rep(surface[i] as number, surface[j] as number), { sourceEventSeqs: [summarySeq, ...shadowed] }));
      surface.splice(i, j - i + 1, s);
      for (const x of shadowed) tool.delete(x);
    } else if (kind < 95 && tool.size > 0) {
      // Prune: a tool/result copy replaces one current tool/result, only the inner content changes.
      const targets = [...tool.keys()];
      const t = targets[a % targets.length] as number;
      const old = tool.get(t) as { message: { content: Record<string, unknown>[] } };
      const data = { ...old, message: { ...old.message, content: [{ ...old.message.content[0], content: b % 2 === 0 ? [] : [{ type: 'text', text: `pruned ${b}` }] }] } };
      emit(logEvent('compaction/prune', { shadowedRange: { start: t, end: t }, shadowedSeqs: [t], shadowedTokenCount: 1 }));
      const s = emit({ type: 'tool/result', data, surfaceOp: rep(t, t), sourceEventSeqs: [t] });
      surface.splice(surface.indexOf(t), 1, s);
      tool.delete(t);
      tool.set(s, data);
    } else {
      emit(logEvent('note', { a }));
    }
    if (batchBreak) batches.push([]);
  }
  return { batches: batches.filter((x) => x.length > 0) };
}

/** A candidate that must be rejected against the current state (several rule families). */
function badCandidate(k: number, h: Harness, prefix: number): CandidateEvent {
  const surf = h.engine.surface();
  const next = h.engine.nextSeq;
  const off = [...Array(next).keys()].find((s) => !h.engine.isOnSurface(s)) ?? next + 5;
  switch (k % 9) {
    case 0:
      return user('x', rep(off, off), { sourceEventSeqs: off < next ? [off] : [0] });
    case 1:
      return surf.length >= 2 ? user('x', rep(surf[1] as number, surf[0] as number), { sourceEventSeqs: surf.slice(0, 2) }) : user('x', rep(next, next));
    case 2:
      return surf.length >= 1 ? user('x', rep(surf[0] as number, surf[0] as number)) : { type: 'user/message', data: {}, surfaceOp: 'append' };
    case 3:
      return { ...user('x'), surfaceOp: undefined };
    case 4:
      return logEvent('note', { bad: Number.NaN });
    case 5:
      return user('x', 'append', { sourceEventSeqs: [next + prefix] });
    case 6:
      return logEvent('turn/start', { turn: 1 }, { surfaceOp: 'append' });
    case 7: {
      const t = surf.find((s) => h.engine.typeOf(s) === 'tool/result');
      if (t === undefined) return user('x', 'append', { sourceEventSeqs: [] });
      const old = h.events.get(t) as SessionEvent;
      return { type: 'tool/result', data: { ...(old.data as object), turn: 99 }, surfaceOp: rep(t, t), sourceEventSeqs: [t] };
    }
    default:
      return logEvent('mode/set', {});
  }
}

function check(h: Harness, projection: MessageProjection): void {
  const naive = naiveFold(h.log);
  expect(h.engine.surface()).toEqual(naive.surface);
  expect(h.engine.surfaceLength).toBe(naive.surface.length);
  expect(h.engine.replaceGeneration).toBe(naive.replaceGeneration);
  for (const s of naive.surface) expect(h.engine.isOnSurface(s)).toBe(true);
  expect(projection.history()).toEqual(deriveMessages(naive.surface, (s) => h.events.get(s), 'sess-1'));
}

describe('surface properties', () => {
  it('incremental surface == naive fold, projection == derive(fold), cold load == live state', () => {
    fc.assert(
      fc.property(fc.array(cmdArb, { minLength: 1, maxLength: 400 }), (cmds) => {
        const { batches } = buildHistory(cmds);
        const h = new Harness();
        const projection = new MessageProjection('sess-1');
        projection.hydrate([], 0);
        for (const batch of batches) {
          const plan = h.add(batch);
          expect(projection.apply(plan)).toBe(true);
        }
        check(h, projection);
        const cold = SessionEngine.create();
        cold.loadStructural(h.log);
        expect(snapshot(cold)).toEqual(snapshot(h.engine));
        // Hydrating from the surface events gives the same history as the incremental one.
        const hydrated = new MessageProjection('sess-1');
        hydrated.hydrate(h.engine.surface().map((s) => h.events.get(s) as SessionEvent), h.engine.nextSeq, (s) => h.events.get(s));
        expect(hydrated.history()).toEqual(projection.history());
      }),
      { numRuns: 150 },
    );
  });

  it('big histories cross many blocks (block-spanning replaces, merges)', () => {
    fc.assert(
      fc.property(fc.array(cmdArb, { minLength: 1500, maxLength: 3000 }), (cmds) => {
        const { batches } = buildHistory(cmds);
        const h = new Harness();
        const projection = new MessageProjection('sess-1');
        projection.hydrate([], 0);
        for (const batch of batches) projection.apply(h.add(batch));
        check(h, projection);
      }),
      { numRuns: 15 },
    );
  });

  it('a random rejected candidate (alone or after valid ones in its batch) changes nothing', () => {
    fc.assert(
      fc.property(fc.array(cmdArb, { minLength: 1, maxLength: 150 }), fc.nat(), fc.nat(3), (cmds, k, prefix) => {
        const { batches } = buildHistory(cmds);
        const h = new Harness();
        for (const batch of batches) h.add(batch);
        const before = snapshot(h.engine);
        const valid = Array.from({ length: prefix }, (_, i) => logEvent('note', { i }));
        let err: unknown;
        try {
          h.plan([...valid, badCandidate(k, h, prefix)]);
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(DomainError);
        expect((err as DomainError).index).toBe(prefix);
        expect(snapshot(h.engine)).toEqual(before);
        // The engine still accepts a valid continuation exactly as the naive fold expects.
        h.add(user('after'));
        expect(h.engine.surface()).toEqual(naiveFold(h.log).surface);
      }),
      { numRuns: 200 },
    );
  });
});
