/**
 * CRC-32C of JS strings (src/store/sqlite/crc32c.ts) against a plain oracle: the byte-at-a-time
 * CRC of Buffer.from(string) (which, like crcString, encodes a lone surrogate as U+FFFD). Short
 * ranges go through the character loop, long ones through the scratch buffer and slicing-by-8,
 * in chunks: both must give the oracle's value for any string and any range.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CRC_INIT, crc32c, crcFinal, crcString } from '../../src/store/sqlite/crc32c.js';

const TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  return c;
});
function oracle(s: string): number {
  let c = -1;
  for (const b of Buffer.from(s, 'utf8')) c = TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}

const PIECES = ['a', 'The quick brown fox ', '{"n":1}', 'é', '✓', '\u{1f600}', '\ud800', '\udc00', '\u0000', '\u007f', '\u0080', '\u07ff', '\u0800', '\uffff'];

describe('crc32c', () => {
  it('matches the standard check value and the oracle on fixed strings', () => {
    expect(crc32c('123456789')).toBe(0xe3069283);
    const long = 'The quick brown fox jumps over the lazy dog; '.repeat(40);
    for (const s of ['', 'a', long, long + 'é', `é${long}\u{1f600}`, '\ud800'.repeat(100)]) expect(crc32c(s)).toBe(oracle(s));
  });

  it('gives the oracle value for any string of ASCII, multi-byte characters, pairs and lone surrogates, whole or any range (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...PIECES), { maxLength: 60 }), fc.nat(), fc.nat(), (pieces, a, b) => {
        const s = pieces.join('');
        expect(crc32c(s)).toBe(oracle(s));
        const from = s.length === 0 ? 0 : a % (s.length + 1);
        const to = from + (s.length - from === 0 ? 0 : b % (s.length - from + 1));
        expect(crcFinal(crcString(CRC_INIT, s, from, to))).toBe(oracle(s.slice(from, to)));
        // Feeding in two parts is feeding the whole (when the cut is not inside a surrogate pair).
        const inPair = /[\ud800-\udbff]/.test(s.charAt(from - 1)) && /[\udc00-\udfff]/.test(s.charAt(from));
        if (!inPair) expect(crcFinal(crcString(crcString(CRC_INIT, s, 0, from), s, from))).toBe(oracle(s));
      }),
      { numRuns: 5_000 },
    );
  });

  it('strings longer than the scratch buffer: surrogate pairs at every chunk boundary are not split', () => {
    for (const at of [16_380, 16_381, 16_382, 16_383, 16_384, 32_767, 32_768]) {
      const s = 'x'.repeat(at) + '\u{1f600}' + 'é'.repeat(20_000) + '\u{1f600}'.repeat(9_000);
      expect(crc32c(s)).toBe(oracle(s));
    }
    const all = '\u{10ffff}'.repeat(40_000);
    expect(crc32c(all)).toBe(oracle(all));
  });
});
