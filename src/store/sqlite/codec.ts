/**
 * Column codecs of the SQLite store.
 *
 * Seq lists (`sourceEventSeqs`, idempotency seqs) are stored as the reference's compact BLOB:
 * the first seq as an unsigned LEB128 varint, then each difference to the previous seq as a
 * zigzag varint. Typical citation lists (a few nearby seqs) take one or two bytes per seq. An
 * empty list is a zero-length BLOB and an absent list is NULL, so `[]` stays distinct from absent.
 * Arithmetic is done with numbers, not 32-bit operators, so every safe integer round-trips.
 */
import type { SurfaceOp } from '../../domain/event.js';

/** Encodes a list of non-negative safe integers. */
export function encodeSeqs(seqs: readonly number[]): Buffer {
  const bytes: number[] = [];
  let previous = 0;
  for (let i = 0; i < seqs.length; i++) {
    const seq = seqs[i]!;
    if (i === 0) {
      writeVarint(bytes, seq);
    } else {
      // zigzag(delta) = 2 * half + sign, written without forming the (possibly > 2^53) product.
      const delta = seq - previous;
      if (delta >= 0) writeZigzag(bytes, delta, 0);
      else writeZigzag(bytes, -delta - 1, 1);
    }
    previous = seq;
  }
  return Buffer.from(bytes);
}

/** Decodes {@link encodeSeqs}; throws on a truncated BLOB. */
export function decodeSeqs(blob: ArrayLike<number>): number[] {
  const out: number[] = [];
  let pos = 0;
  let previous = 0;
  const end = blob.length;
  while (pos < end) {
    const first = blob[pos++]!;
    if (out.length === 0) {
      // Fast path: one-byte varints are the common case.
      let value = first & 0x7f;
      if (first >= 0x80) {
        let scale = 128;
        for (;;) {
          if (pos >= end) throw new Error('corrupt seq list: truncated varint');
          const byte = blob[pos++]!;
          value += (byte & 0x7f) * scale;
          if (byte < 0x80) break;
          scale *= 128;
        }
      }
      previous = value;
    } else {
      const sign = first & 1;
      let half = (first & 0x7f) >>> 1;
      if (first >= 0x80) {
        let scale = 64;
        for (;;) {
          if (pos >= end) throw new Error('corrupt seq list: truncated varint');
          const byte = blob[pos++]!;
          half += (byte & 0x7f) * scale;
          if (byte < 0x80) break;
          scale *= 128;
        }
      }
      previous += sign === 0 ? half : -half - 1;
    }
    out.push(previous);
  }
  return out;
}

/** Unsigned LEB128 of `value`. */
function writeVarint(bytes: number[], value: number): void {
  while (value >= 0x80) {
    bytes.push((value % 128) | 0x80);
    value = Math.floor(value / 128);
  }
  bytes.push(value);
}

/** Unsigned LEB128 of 2 * half + sign, for half up to 2^53 - 1. */
function writeZigzag(bytes: number[], half: number, sign: 0 | 1): void {
  const low = (half % 64) * 2 + sign;
  const rest = Math.floor(half / 64);
  if (rest === 0) {
    bytes.push(low);
    return;
  }
  bytes.push(low | 0x80);
  writeVarint(bytes, rest);
}

/** Decodes {@link encodeSeqs} from the hex text SQLite's `hex()` makes of the BLOB. */
export function decodeSeqsHex(hex: string): number[] {
  const bytes = new Array<number>(hex.length >>> 1);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (hexValue(hex.charCodeAt(2 * i)) << 4) | hexValue(hex.charCodeAt(2 * i + 1));
  return decodeSeqs(bytes);
}

function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 65 && code <= 70) return code - 55;
  throw new Error('corrupt seq list: bad hex digit');
}

/** `surface_op` column value: NULL, the bare text `append`, or the replace object's JSON. */
export function encodeSurfaceOp(op: SurfaceOp | undefined): string | null {
  if (op === undefined) return null;
  if (op === 'append') return 'append';
  return JSON.stringify({ op: 'replace', start: op.start, end: op.end });
}

/** Decodes a non-NULL `surface_op` column value; `append` needs no JSON parse. */
export function decodeSurfaceOp(text: string): SurfaceOp {
  if (text === 'append') return 'append';
  const parsed = JSON.parse(text) as { start: number; end: number };
  return { op: 'replace', start: parsed.start, end: parsed.end };
}
