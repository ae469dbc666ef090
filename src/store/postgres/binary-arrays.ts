/**
 * The write functions' event columns as PostgreSQL binary arrays (issue #37). node-postgres sends
 * a JS array as a text literal (`{"…","…"}`: every element converted to a string, escaped and
 * quoted, then parsed back by PostgreSQL's array_in); a Buffer parameter goes in the binary format
 * instead, which array_recv reads as it is: a header, then each element as its length and bytes
 * (UTF-8 for text, 8 bytes big-endian for bigint). For 100-event batches the text literals were
 * the server's largest single cost per event (bench/history/issue-37-pg-batch.md).
 *
 * The format (PostgreSQL's array_send): int32 ndim, int32 has-nulls flag, int32 element type
 * OID, per dimension int32 length and int32 lower bound (1), then per element int32 byte length
 * (-1 for NULL) and the bytes. The element type must be the parameter's (array_recv refuses
 * another): the write functions' arguments are bigint[], text[] and boolean[] (schema.ts).
 */
import type { EventArrays } from './row-codec.js';

const INT8_OID = 20;
const TEXT_OID = 25;
const BOOL_OID = 16;
const TWO_32 = 4294967296;
const TWO_63 = 2 ** 63;

/** The array header: one dimension of `n` elements (none for an empty array, as array_send writes it). */
function header(b: Buffer, n: number, nulls: boolean, oid: number): number {
  if (n === 0) {
    b.writeInt32BE(0, 0);
    b.writeInt32BE(0, 4);
    b.writeInt32BE(oid, 8);
    return 12;
  }
  b.writeInt32BE(1, 0);
  b.writeInt32BE(nulls ? 1 : 0, 4);
  b.writeInt32BE(oid, 8);
  b.writeInt32BE(n, 12);
  b.writeInt32BE(1, 16);
  return 20;
}

const headerBytes = (n: number): number => (n === 0 ? 12 : 20);

/**
 * A bigint[] parameter: integers within bigint's range, exactly as they are (a time past 2^53
 * as well: the double is an integer, split exactly at 2^32); anything else is refused, as
 * PostgreSQL refused its text.
 */
export function int8ArrayParam(xs: readonly number[]): Buffer {
  const b = Buffer.allocUnsafe(headerBytes(xs.length) + 12 * xs.length);
  let o = header(b, xs.length, false, INT8_OID);
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i]!;
    if (!Number.isInteger(x) || x >= TWO_63 || x < -TWO_63) throw new TypeError(`not a bigint: ${String(x)}`);
    const hi = Math.floor(x / TWO_32);
    b.writeInt32BE(8, o);
    b.writeInt32BE(hi, o + 4);
    b.writeUInt32BE(x - hi * TWO_32, o + 8);
    o += 12;
  }
  return b;
}

/**
 * A text[] parameter; null when every element is NULL (or there are none): the write functions
 * unnest the event columns together, which pads a NULL column with NULLs, so it is the same rows.
 */
export function textArrayParam(xs: readonly (string | null)[]): Buffer | null {
  let bytes = 0;
  let nulls = false;
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i]!;
    if (x === null) nulls = true;
    else bytes += Buffer.byteLength(x);
  }
  if (bytes === 0 && nulls) return null;
  const b = Buffer.allocUnsafe(headerBytes(xs.length) + 4 * xs.length + bytes);
  let o = header(b, xs.length, nulls, TEXT_OID);
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i]!;
    if (x === null) {
      b.writeInt32BE(-1, o);
      o += 4;
      continue;
    }
    const n = b.write(x, o + 4);
    b.writeInt32BE(n, o);
    o += 4 + n;
  }
  return b;
}

/** A boolean[] parameter (null elements allowed); null when every element is NULL. */
export function boolArrayParam(xs: readonly (boolean | null)[]): Buffer | null {
  let set = 0;
  for (let i = 0; i < xs.length; i++) if (xs[i] !== null) set++;
  if (set === 0 && xs.length > 0) return null;
  const b = Buffer.allocUnsafe(headerBytes(xs.length) + 4 * xs.length + set);
  let o = header(b, xs.length, set < xs.length, BOOL_OID);
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i]!;
    if (x === null) {
      b.writeInt32BE(-1, o);
      o += 4;
      continue;
    }
    b.writeInt32BE(1, o);
    b[o + 4] = x ? 1 : 0;
    o += 5;
  }
  return b;
}

/** The seven event columns (EVENT_ARGS of schema.ts) as parameters. */
export function eventArrayParams(a: EventArrays): [Buffer, Buffer | null, Buffer, Buffer | null, Buffer | null, Buffer | null, Buffer | null] {
  return [int8ArrayParam(a[0]), textArrayParam(a[1]), int8ArrayParam(a[2]), textArrayParam(a[3]), textArrayParam(a[4]), textArrayParam(a[5]), boolArrayParam(a[6])];
}
