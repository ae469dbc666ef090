/**
 * The structural reads of the SQLite store, each one read transaction over the compact structure
 * lines (row-codec.ts decodeStructureLine, the row checksums checked): a log's structure from a
 * seq (a whole log's rows must chain to the session's recorded digest) and a surface replay's rows
 * up to a seq with the head at or before it.
 */
import type Database from 'better-sqlite3';
import type { StructuralRow, SurfaceStructure } from '../../app/store-port.js';
import { DataCorruptedError } from '../../app/storage-error.js';
import { TypeTable, decodeStructureLine } from './row-codec.js';
import type { Statements } from './statements.js';
import { columnsOfRows, type StructuralColumns } from '../../domain/structural-columns.js';
import { decodeStructureColumns, prepareStructureColumns } from './structure-columns.js';

/** Rows per structural-scan chunk. */
const STRUCTURE_CHUNK = 4096;

/** The error of a whole log whose rows do not chain to the session's recorded digest. */
function digestMismatch(sessionId: string): DataCorruptedError {
  return new DataCorruptedError(sessionId, undefined,
    `session ${sessionId}: its stored events do not match the session's digest (rows missing, moved or rewritten on disk); ` +
    'the session is not served; restore it from a backup (palimpsest verify reports the details)');
}

/** The transactions (read-only: call them directly); `native`: the checksum extension is loaded. */
export function structureReads(db: Database.Database, st: Statements, native: boolean) {
  const structure = db.transaction((sessionId: string, fromSeq: number, limit: number): StructuralRow[] => {
    const types = new TypeTable();
    const scan = { sessionId, digest: 0 };
    const out: StructuralRow[] = [];
    let next = fromSeq;
    for (;;) {
      const want = Math.min(STRUCTURE_CHUNK, limit - out.length);
      const lines = st.selectStructure.all(sessionId, next, want) as string[];
      for (let i = 0; i < lines.length; i++) out.push(decodeStructureLine(lines[i]!, types, scan));
      if (lines.length < want && fromSeq === 0) {
        // A whole log (the cold open): its rows must chain to the session's recorded digest.
        const stored = st.selectDigest.get(sessionId) as [number, number, number] | undefined;
        if (stored !== undefined && stored[0] !== scan.digest) throw digestMismatch(sessionId);
      }
      if (lines.length < want || out.length >= limit) return out;
      next = out[out.length - 1]!.seq + 1;
    }
  });

  const surfaceStructure = db.transaction((sessionId: string, toSeq: number): SurfaceStructure => {
    const types = new TypeTable();
    // The digest of a subset of rows means nothing: only the row checksums are checked here.
    const scan = { sessionId, digest: 0 };
    const lines = st.selectSurfaceStructure.all(sessionId, toSeq) as string[];
    const rows = new Array<StructuralRow>(lines.length);
    for (let i = 0; i < lines.length; i++) {
      // Checked with every column, answered as the port says: a surface replay needs no citations.
      const r = decodeStructureLine(lines[i]!, types, scan);
      rows[i] = r.sourceEventSeqs === undefined && r.ignorable === undefined ? r : { seq: r.seq, type: r.type, surfaceOp: r.surfaceOp! };
    }
    const head = st.selectHeadAtOrBefore.get(sessionId, toSeq) as number | null;
    return { rows, headSeq: head ?? undefined };
  });
  // Issue #37, the cold open: a whole log in columns, checked as `structure(id, 0)` checks it
  // (every row's structural checksum, the digest of the whole log), in SQLite when it can.
  const nativeColumns = native ? prepareStructureColumns(db) : undefined;
  const columns = db.transaction((sessionId: string): StructuralColumns => {
    if (st.selectVisible.get(sessionId) === undefined) return columnsOfRows([]);
    const decoded = nativeColumns === undefined ? undefined : decodeStructureColumns(sessionId, nativeColumns.get(sessionId) as Buffer);
    if (decoded === undefined) return columnsOfRows(structure(sessionId, 0, Number.MAX_SAFE_INTEGER));
    const stored = st.selectDigest.get(sessionId) as [number, number, number] | undefined;
    if (stored !== undefined && stored[0] !== decoded.digest) throw digestMismatch(sessionId);
    return decoded.columns;
  });
  return { structure, surfaceStructure, columns };
}

export type StructureReads = ReturnType<typeof structureReads>;
