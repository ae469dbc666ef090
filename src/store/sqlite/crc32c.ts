/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) over the UTF-8 bytes of JS strings,
 * table-driven (slicing-by-1), with the UTF-8 encoding done inline so no Buffer is allocated per
 * event. Used for the per-row checksums and the per-session digest of the SQLite store
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

/** The initial (pre-inverted) CRC state. */
export const CRC_INIT = -1;

/** Feeds the UTF-8 encoding of `s` into the running (pre-inverted) state `crc`. */
export function crcString(crc: number, s: string, from = 0, to = s.length): number {
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
