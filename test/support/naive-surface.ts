/**
 * The reference algorithm, written naively (one array, indexOf, full rebuild): the oracle the
 * incremental engine is compared against. Assumes the events were accepted.
 */
import type { SessionEvent } from '../../src/domain/event.js';
import { SURFACE_TYPES } from '../../src/domain/event.js';

/** Folds accepted events into the surface the reference would compute. */
export function naiveFold(events: readonly SessionEvent[]): { surface: number[]; replaceGeneration: number } {
  const surface: number[] = [];
  let replaceGeneration = 0;
  for (const e of events) {
    if (!SURFACE_TYPES.has(e.type) || e.surfaceOp === undefined) continue;
    if (e.surfaceOp === 'append') {
      surface.push(e.seq);
      continue;
    }
    const i = surface.indexOf(e.surfaceOp.start);
    const j = surface.indexOf(e.surfaceOp.end);
    if (i < 0 || j < 0 || i > j) throw new Error(`naive fold: bad replace at ${e.seq}`);
    surface.splice(i, j - i + 1, e.seq);
    replaceGeneration++;
  }
  return { surface, replaceGeneration };
}
