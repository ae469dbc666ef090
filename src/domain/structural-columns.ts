/**
 * A whole log's structure in columns (issue #37, cold open): what `SessionEngine.loadStructural`
 * reads, without an object per event. The SQLite store fills it straight from one value its
 * extension writes (src/store/sqlite/structure-columns.ts); rows read any other way go through
 * `columnsOfRows`.
 */
import type { StructuralRow } from './event.js';

/** Row kinds (`kinds[i]`). */
export const KIND_PLAIN = 0;
/** surfaceOp 'append', no cited seqs, not ignorable. */
export const KIND_APPEND = 1;
/** Anything else: the row is `general.get(i)`. */
export const KIND_GENERAL = 2;

export interface StructuralColumns {
  readonly length: number;
  /** Seq of each row, ascending as stored (the engine checks that they increase). */
  readonly seqs: Float64Array;
  /** Index into `types` of each row's type. */
  readonly typeIds: Uint32Array;
  readonly types: readonly string[];
  /** KIND_PLAIN (no surfaceOp, no cited seqs), KIND_APPEND, or KIND_GENERAL. */
  readonly kinds: Uint8Array;
  /** The KIND_GENERAL rows by row index. */
  readonly general: ReadonlyMap<number, StructuralRow>;
}

/** The columns of `rows`. */
export function columnsOfRows(rows: readonly StructuralRow[]): StructuralColumns {
  const n = rows.length;
  const seqs = new Float64Array(n);
  const typeIds = new Uint32Array(n);
  const kinds = new Uint8Array(n);
  const types: string[] = [];
  const ids = new Map<string, number>();
  const general = new Map<number, StructuralRow>();
  let lastType: string | undefined;
  let id = 0;
  for (let i = 0; i < n; i++) {
    const r = rows[i]!;
    seqs[i] = r.seq;
    if (r.type !== lastType) {
      lastType = r.type;
      const known = ids.get(r.type);
      if (known !== undefined) id = known;
      else {
        id = types.length;
        types.push(r.type);
        ids.set(r.type, id);
      }
    }
    typeIds[i] = id;
    if (r.sourceEventSeqs !== undefined || r.ignorable !== undefined || (r.surfaceOp !== undefined && r.surfaceOp !== 'append')) {
      kinds[i] = KIND_GENERAL;
      general.set(i, r);
    } else kinds[i] = r.surfaceOp === 'append' ? KIND_APPEND : KIND_PLAIN;
  }
  return { length: n, seqs, typeIds, types, kinds, general };
}
