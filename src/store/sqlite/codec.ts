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
      const delta = seq - previous;
      writeVarint(bytes, delta >= 0 ? delta * 2 : -delta * 2 - 1);
    }
    previous = seq;
  }
  return Buffer.from(bytes);
}

/** Decodes {@link encodeSeqs}; throws on a truncated BLOB. */
export function decodeSeqs(blob: Uint8Array): number[] {
  const out: number[] = [];
  let pos = 0;
  let previous = 0;
  while (pos < blob.length) {
    let value = 0;
    let scale = 1;
    for (;;) {
      if (pos >= blob.length) throw new Error('corrupt seq list: truncated varint');
      const byte = blob[pos++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) break;
      scale *= 128;
    }
    if (out.length === 0) {
      previous = value;
    } else {
      previous += value % 2 === 0 ? value / 2 : -(value + 1) / 2;
    }
    out.push(previous);
  }
  return out;
}

function writeVarint(bytes: number[], value: number): void {
  while (value >= 0x80) {
    bytes.push((value % 128) | 0x80);
    value = Math.floor(value / 128);
  }
  bytes.push(value);
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
