/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) over the UTF-8 bytes of JS strings:
 * short ranges byte by byte with the UTF-8 encoding done inline, ranges of 48+ characters encoded
 * into a scratch buffer and fed 8 bytes per step (slicing-by-8, crcEncoded); no Buffer is
 * allocated per call. Used for the per-row checksums and the per-session digest of the SQLite store
 * (integrity.ts): SQLite has no page checksums, so a flipped byte on disk would otherwise be
 * served as-is. CRC-32C detects every burst error up to 32 bits and all 1-3 bit errors at these
 * lengths; it is a corruption check, not a defence against an adversary who can write the file.
 */

const TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c;
  }
  return t;
})();

/** Slicing-by-8 tables, concatenated: entry 256k + b is the state after byte b and then k zero bytes. */
const SLICES = (() => {
  const t = new Int32Array(256 * 8);
  t.set(TABLE);
  for (let k = 1; k < 8; k++) {
    for (let n = 0; n < 256; n++) {
      const p = t[(k - 1) * 256 + n]!;
      t[k * 256 + n] = (p >>> 8) ^ TABLE[p & 0xff]!;
    }
  }
  return t;
})();

/**
 * Long strings are encoded to UTF-8 into this scratch buffer by one native call and then fed 8
 * bytes at a time (two 32-bit little-endian words per step): 2-3x faster than the character loop
 * from ~50 characters on. Chunks of at most SCRATCH_CHARS characters (3 UTF-8 bytes each at most).
 */
const SCRATCH_CHARS = 16_384;
const LONG = 48;
const scratch = Buffer.allocUnsafeSlow(SCRATCH_CHARS * 3 + 8) as Buffer & { utf8Write(s: string, offset: number): number };
const words = new Int32Array(scratch.buffer, scratch.byteOffset, scratch.length >> 2);
// Little-endian words, and Buffer#utf8Write (undocumented, what Buffer#write calls): else the byte loop only.
const encodedPath = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 && typeof scratch.utf8Write === 'function';

/** Feeds the UTF-8 of s[from, to) by way of the scratch buffer. */
function crcEncoded(crc: number, s: string, from: number, to: number): number {
  const t = SLICES;
  while (from < to) {
    let end = Math.min(to, from + SCRATCH_CHARS);
    // A surrogate pair is never split between two chunks (each half alone would encode as U+FFFD).
    if (end < to) {
      const last = s.charCodeAt(end - 1);
      if (last >= 0xd800 && last < 0xdc00) end--;
    }
    const n = scratch.utf8Write(from === 0 && end === s.length ? s : s.slice(from, end), 0);
    let i = 0;
    for (let w = 0; i + 8 <= n; i += 8, w += 2) {
      const lo = crc ^ words[w]!;
      const hi = words[w + 1]!;
      crc = t[1792 + (lo & 0xff)]! ^ t[1536 + ((lo >>> 8) & 0xff)]! ^ t[1280 + ((lo >>> 16) & 0xff)]! ^ t[1024 + (lo >>> 24)]! ^
        t[768 + (hi & 0xff)]! ^ t[512 + ((hi >>> 8) & 0xff)]! ^ t[256 + ((hi >>> 16) & 0xff)]! ^ t[hi >>> 24]!;
    }
    for (; i < n; i++) crc = t[(crc ^ scratch[i]!) & 0xff]! ^ (crc >>> 8);
    from = end;
  }
  return crc;
}

/** The initial (pre-inverted) CRC state. */
export const CRC_INIT = -1;

/** Feeds the UTF-8 encoding of `s` into the running (pre-inverted) state `crc`. */
export function crcString(crc: number, s: string, from = 0, to = s.length): number {
  if (to - from >= LONG && encodedPath) return crcEncoded(crc, s, from, to);
  const t = TABLE;
  for (let i = from; i < to; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      crc = t[(crc ^ c) & 0xff]! ^ (crc >>> 8);
      continue;
    }
    if (c < 0x800) {
      crc = t[(crc ^ (0xc0 | (c >> 6))) & 0xff]! ^ (crc >>> 8);
    } else {
      if (c >= 0xd800 && c < 0xdc00 && i + 1 < to) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d < 0xe000) {
          i++;
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          crc = t[(crc ^ (0xf0 | (c >> 18))) & 0xff]! ^ (crc >>> 8);
          crc = t[(crc ^ (0x80 | ((c >> 12) & 0x3f))) & 0xff]! ^ (crc >>> 8);
          crc = t[(crc ^ (0x80 | ((c >> 6) & 0x3f))) & 0xff]! ^ (crc >>> 8);
          crc = t[(crc ^ (0x80 | (c & 0x3f))) & 0xff]! ^ (crc >>> 8);
          continue;
        }
      }
      // A lone surrogate is hashed as U+FFFD. (better-sqlite3 stores its 3-byte CESU form, which
      // reads back as U+FFFD characters, so such a row would fail its check: the domain refuses
      // lone surrogates in every stored string, and JSON text escapes them.)
      if (c >= 0xd800 && c < 0xe000) c = 0xfffd;
      crc = t[(crc ^ (0xe0 | (c >> 12))) & 0xff]! ^ (crc >>> 8);
      crc = t[(crc ^ (0x80 | ((c >> 6) & 0x3f))) & 0xff]! ^ (crc >>> 8);
    }
    crc = t[(crc ^ (0x80 | (c & 0x3f))) & 0xff]! ^ (crc >>> 8);
  }
  return crc;
}

/** Feeds one byte. */
export function crcByte(crc: number, b: number): number {
  return TABLE[(crc ^ b) & 0xff]! ^ (crc >>> 8);
}

/** Feeds the 4 bytes of an unsigned 32-bit value (little-endian). */
export function crcWord(crc: number, w: number): number {
  crc = TABLE[(crc ^ w) & 0xff]! ^ (crc >>> 8);
  crc = TABLE[(crc ^ (w >>> 8)) & 0xff]! ^ (crc >>> 8);
  crc = TABLE[(crc ^ (w >>> 16)) & 0xff]! ^ (crc >>> 8);
  return TABLE[(crc ^ (w >>> 24)) & 0xff]! ^ (crc >>> 8);
}

/** The final CRC value of a running state, as an unsigned 32-bit number. */
export function crcFinal(crc: number): number {
  return (crc ^ -1) >>> 0;
}

/** CRC-32C of the UTF-8 bytes of `s`. */
export function crc32c(s: string): number {
  return crcFinal(crcString(CRC_INIT, s));
}
