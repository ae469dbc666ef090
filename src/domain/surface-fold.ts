/**
 * Folding stored (already validated, trusted) structural rows into a surface: the one rebuild
 * used by the engine's cold open (`SessionEngine.loadStructural`) and by subscription catch-up
 * ({@link SurfaceTracker}, which also reports what each row did, for replace deltas with
 * server-computed shadowed seqs).
 */
import type { StructuralRow } from './event.js';
import { SeqTable } from './seq-table.js';
import { ChunkedSurface, SurfaceDraft } from './surface.js';

/** What one accepted event did to the surface. */
export type SurfaceDelta =
  | { readonly kind: 'append'; readonly seq: number }
  | {
      readonly kind: 'replace';
      readonly seq: number;
      readonly start: number;
      readonly end: number;
      /** The seqs that left the surface, in surface order. */
      readonly shadowed: readonly number[];
      /** Surface index of the first shadowed node (where the new event now sits). */
      readonly index: number;
    }
  | { readonly kind: 'none'; readonly seq: number };

/**
 * Applies a stored replace of `start..end` by `seq` to `surf`. Returns the shadowed seqs (and,
 * with `withIndex`, the surface index of `start`), or undefined when `start..end` is not a
 * surface range (a corrupt store; `surf` is then unchanged).
 */
export function foldStoredReplace(surf: ChunkedSurface, seq: number, start: number, end: number, withIndex: boolean): { shadowed: number[]; index: number } | undefined {
  const draft = new SurfaceDraft(surf);
  const a = draft.locate(start);
  const b = draft.locate(end);
  if (a === undefined || b === undefined || draft.compare(a, b) > 0) return undefined;
  const shadowed = draft.range(a, b);
  const index = withIndex ? draft.indexOf(a) : -1;
  draft.replace(a, b, shadowed, seq);
  surf.adopt(draft);
  return { shadowed, index };
}

/**
 * The surface as of a cursor, rebuilt from structural rows, reporting what each row did to it
 * (the fold of `SessionEngine.loadStructural`, with the deltas kept).
 */
export class SurfaceTracker {
  readonly #table = new SeqTable();
  readonly #surf = new ChunkedSurface(this.#table);

  /** Applies one stored row (trusted: it was validated when appended) and returns its delta. */
  apply(row: StructuralRow): SurfaceDelta {
    const seq = row.seq;
    this.#table.push(seq, 0);
    const op = row.surfaceOp;
    if (op === undefined) return { kind: 'none', seq };
    if (op === 'append') {
      this.#surf.append(seq);
      return { kind: 'append', seq };
    }
    const r = foldStoredReplace(this.#surf, seq, op.start, op.end, true);
    if (r === undefined) throw new Error(`stored row ${seq}: replace ${op.start}..${op.end} is not a surface range`);
    return { kind: 'replace', seq, start: op.start, end: op.end, shadowed: r.shadowed, index: r.index };
  }

  /** The surface in order. */
  surface(): number[] {
    return this.#surf.toArray();
  }
}
