/**
 * A call's event rows as they cross to the writer thread (append-thread-wire.ts): by column, not
 * as an array per row. A structured clone writes every value of every row array on its own (the
 * session id and the type once per row, and twelve values per row); it was the largest cost of the
 * event loop on 100-event batches (18% of its busy time, postMessage, bench/history). By column a
 * call is a handful of values whatever its size: the numbers in one Float64Array, the data texts
 * in one string (copied once by the clone), the types as a table of the distinct ones, and the
 * rarely set columns only when some row sets them.
 *
 * The checksums are not carried: the writer thread computes them (addChecksums, or its INSERTs with
 * the checksum extension: sql-checksums.ts).
 */
import type { EventRow } from './row-codec.js';

/**
 * The rows of one call by column: count, numbers (per row: seq, time, tokens or NaN for NULL, and
 * the length of its data text; one array, one allocation), the data texts joined, the distinct
 * types and each row's index in them (undefined: all of the first type), and the sparse columns
 * (source_event_seqs, surface_op, ignorable, usage) as the rows that set any of them: [row index,
 * seqs, op, ignorable, usage].
 */
export type PackedRows = readonly [
  count: number,
  numbers: Float64Array,
  data: string,
  types: readonly string[],
  typeIndex: Uint16Array | undefined,
  sparse: readonly (readonly [number, Uint8Array | null, string | null, 1 | null, string | null])[] | undefined,
];

/** Numbers per row in PackedRows. */
const WIDTH = 4;

/** More distinct types than a Uint16Array indexes: packed by row instead (never seen in practice). */
const MAX_TYPES = 0xffff;

/** The rows of a call to `sessionId`, by column (see PackedRows); undefined when they cannot be (then sent as rows). */
export function packRows(sessionId: string, rows: readonly EventRow[]): PackedRows | undefined {
  const n = rows.length;
  const numbers = new Float64Array(n * WIDTH);
  const texts = new Array<string>(n);
  const types: string[] = [];
  let typeIndex: Uint16Array | undefined;
  let lastType = '';
  let lastIndex = -1;
  let sparse: [number, Uint8Array | null, string | null, 1 | null, string | null][] | undefined;
  for (let i = 0; i < n; i++) {
    const r = rows[i]!;
    if (r[0] !== sessionId) return undefined;
    const at = i * WIDTH;
    numbers[at] = r[1];
    numbers[at + 1] = r[3];
    numbers[at + 2] = r[10] === null ? NaN : r[10];
    const data = r[4];
    texts[i] = data;
    numbers[at + 3] = data.length;
    const type = r[2];
    if (type !== lastType || lastIndex < 0) {
      lastIndex = types.indexOf(type);
      if (lastIndex < 0) {
        if (types.length === MAX_TYPES) return undefined;
        lastIndex = types.push(type) - 1;
      }
      lastType = type;
    }
    if (lastIndex > 0) typeIndex ??= new Uint16Array(n);
    if (typeIndex !== undefined) typeIndex[i] = lastIndex;
    if (r[5] !== null || r[6] !== null || r[7] !== null || r[11] !== null) (sparse ??= []).push([i, r[5], r[6], r[7], r[11]]);
  }
  return [n, numbers, texts.join(''), types, typeIndex, sparse];
}

/** The rows again (checksums 0: the writer thread fills them in, or SQLite does). */
export function unpackRows(sessionId: string, p: PackedRows): EventRow[] {
  const [n, numbers, data, types, typeIndex, sparse] = p;
  const rows = new Array<EventRow>(n);
  const type0 = types[0]!;
  let start = 0;
  for (let i = 0; i < n; i++) {
    const at = i * WIDTH;
    const end = start + numbers[at + 3]!;
    const tokens = numbers[at + 2]!;
    rows[i] = [
      sessionId, numbers[at]!, typeIndex === undefined ? type0 : types[typeIndex[i]!]!, numbers[at + 1]!,
      data.slice(start, end), null, null, null, 0, 0, Number.isNaN(tokens) ? null : tokens, null,
    ];
    start = end;
  }
  if (sparse !== undefined) {
    for (const [i, seqs, op, ignorable, usage] of sparse) {
      const row = rows[i]!;
      // A Buffer crosses as a plain Uint8Array: addChecksums views it as a Buffer again (better-sqlite3 binds either as a BLOB).
      row[5] = seqs as Buffer | null;
      row[6] = op;
      row[7] = ignorable;
      row[11] = usage;
    }
  }
  return rows;
}
