/**
 * The cold open's structural load in columns (issue #37): one value for a whole log, written by
 * the checksum extension's `palimpsest_structure` aggregate (sqlite-ext/sqlite-checksums.c), which
 * checks every row's structural checksum and chains the session digest in SQLite; decoded here into
 * typed arrays (domain/structural-columns.ts) without a JS value per row. Without the extension,
 * or when the aggregate declines ('F'), the rows are read and checked in JavaScript
 * (structure-reads.ts) and put in columns.
 */
import type Database from 'better-sqlite3';
import { KIND_GENERAL, type StructuralColumns } from '../../domain/structural-columns.js';
import type { StructuralRow, SurfaceOp } from '../../domain/event.js';
import { decodeSeqs, decodeSurfaceOp } from './codec.js';
import { rowCorrupted } from './integrity.js';

/**
 * The aggregate over a whole log, in the covering index's order (seq ascending). No ORDER BY
 * subquery (it cost a quarter more, measured): the aggregate answers 'F' for rows out of order,
 * and the rows are then read with ORDER BY.
 */
export const SELECT_STRUCTURE_COLUMNS =
  `SELECT palimpsest_structure(seq, type, source_event_seqs, surface_op, ignorable, scrc, dcrc)
     FROM events INDEXED BY events_structure WHERE session_id = ? AND seq >= 0`;

/** Bytes of the 'S' result's head (the C STRUCTURE_HEAD). */
const HEAD = 24;

/** A decoded result: the columns and the digest of the rows, or undefined when the caller must read the rows. */
export interface NativeStructure {
  readonly columns: StructuralColumns;
  readonly digest: number;
}

/** The prepared aggregate (the extension loaded). */
export function prepareStructureColumns(db: Database.Database): Database.Statement {
  return db.prepare(SELECT_STRUCTURE_COLUMNS).pluck();
}

/**
 * Decodes the aggregate's value for session `sessionId`; undefined for 'F' (read the rows instead).
 * @throws DataCorruptedError for a row that failed its structural checksum
 */
export function decodeStructureColumns(sessionId: string, value: Buffer): NativeStructure | undefined {
  const tag = value[0];
  if (tag === 0x46 /* F */) return undefined;
  if (tag === 0x44 /* D */) throw rowCorrupted(sessionId, Number(value.readBigInt64LE(2)), 'structural');
  if (tag !== 0x53 /* S */ || value.length < HEAD) throw new Error(`palimpsest_structure returned an unknown value (tag ${tag})`);
  const count = value.readUInt32LE(8);
  const digest = value.readUInt32LE(12);
  const ntypes = value.readUInt32LE(16);
  const ngeneral = value.readUInt32LE(20);
  let pos = value.byteOffset + HEAD;
  // Typed arrays over the value's memory need aligned offsets: copy a column when it is not.
  const column = <T>(make: new (b: ArrayBuffer, o: number, n: number) => T, size: number): T => {
    const bytes = count * size;
    const at = pos;
    pos += bytes;
    if (at % size === 0) return new make(value.buffer as ArrayBuffer, at, count);
    return new make(value.buffer.slice(at, at + bytes) as ArrayBuffer, 0, count);
  };
  const seqs = column(Float64Array, 8);
  const typeIds = column(Uint32Array, 4);
  const kinds = new Uint8Array(value.buffer, pos, count);
  pos += count;
  let off = pos - value.byteOffset;
  const types: string[] = [];
  for (let i = 0; i < ntypes; i++) {
    const n = value.readUInt32LE(off);
    types.push(value.toString('utf8', off + 4, off + 4 + n));
    off += 4 + n;
  }
  const general = new Map<number, StructuralRow>();
  for (let i = 0; i < ngeneral; i++) {
    const index = value.readUInt32LE(off);
    const opBytes = value.readInt32LE(off + 4);
    off += 8;
    let surfaceOp: SurfaceOp | undefined;
    if (opBytes >= 0) {
      surfaceOp = decodeSurfaceOp(value.toString('utf8', off, off + opBytes));
      off += opBytes;
    }
    const seqsBytes = value.readInt32LE(off);
    off += 4;
    let sourceEventSeqs: number[] | undefined;
    if (seqsBytes >= 0) {
      sourceEventSeqs = decodeSeqs(value.subarray(off, off + seqsBytes));
      off += seqsBytes;
    }
    const ignorable = value[off++] === 1;
    if (index >= count || kinds[index] !== KIND_GENERAL) throw new Error(`palimpsest_structure: general row ${index} is not a general row`);
    general.set(index, {
      seq: seqs[index]!, type: types[typeIds[index]!]!,
      ...(surfaceOp !== undefined ? { surfaceOp } : {}), ...(sourceEventSeqs !== undefined ? { sourceEventSeqs } : {}), ...(ignorable ? { ignorable: true as const } : {}),
    });
  }
  if (off !== value.length) throw new Error(`palimpsest_structure: ${value.length - off} bytes left over`);
  return { columns: { length: count, seqs, typeIds, types, kinds, general }, digest };
}
