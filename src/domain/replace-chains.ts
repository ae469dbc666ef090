/**
 * The committed events a plan or a model-history projection needs beyond what the engine holds:
 * the chains of tool/result replacements (rule 2.4; dsh-semantics 1.5), read from the engine's
 * structure so the caller can fetch their data before planning or projecting.
 */
import type { CandidateEvent, SurfaceOp } from './event.js';
import { isSafeSeq, type SessionEngine } from './session-engine.js';

/**
 * The committed seqs whose full data `engine.plan(candidates, …)` may need through `ctx.lookup`:
 * the targets of tool/result replacements (rule 2.4) and, for legacy message ids, the chain of
 * earlier tool/result replacements they replaced. Ascending, without duplicates.
 */
export function dataDependencies(engine: SessionEngine, candidates: readonly CandidateEvent[]): number[] {
  const out = new Set<number>();
  const batchStarts = new Map<number, number>();
  let next = engine.nextSeq;
  for (const c of candidates) {
    const seq = isSafeSeq(c.seq) ? c.seq : next;
    next = seq + 1;
    const op = c.surfaceOp as SurfaceOp | undefined;
    if (c.type !== 'tool/result' || op === null || typeof op !== 'object' || !isSafeSeq((op as { start?: unknown }).start)) continue;
    batchStarts.set(seq, op.start);
    let s: number | undefined = op.start;
    const guard = new Set<number>();
    while (s !== undefined && !guard.has(s)) {
      guard.add(s);
      if (s < engine.nextSeq) {
        out.add(s);
        s = engine.toolReplaceStart(s);
      } else {
        s = batchStarts.get(s);
      }
    }
  }
  return [...out].sort((x, y) => x - y);
}

/**
 * The committed seqs a model-history projection of `surface` needs besides the surface events:
 * for every tool/result replacement on it, the chain of events it replaced (its `start`, that
 * event's `start` when it is a tool/result replacement too, and so on). A legacy (unwrapped)
 * replacement takes the message id of the event it replaces, so its id is only known from the
 * chain back to the original (dsh-semantics 1.5). Ascending, without duplicates; usually empty.
 */
export function replacementChainSeqs(engine: SessionEngine, surface: readonly number[]): number[] {
  const out = new Set<number>();
  for (const seq of surface) {
    let s = engine.toolReplaceStart(seq);
    while (s !== undefined && !out.has(s)) {
      out.add(s);
      s = engine.toolReplaceStart(s);
    }
  }
  return [...out].sort((x, y) => x - y);
}
