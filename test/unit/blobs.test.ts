/**
 * Blob extraction and re-inflation (issue #39, src/domain/blobs.ts + src/app/blob-codec.ts):
 * which values are blobbed, the reference shape, and byte-identical round trips.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BLOB_MIN_BYTES, extractBlobs, findBlobRefs, inflateBlobs, isBlobDigest, mayHoldBlobs, mayHoldRefs, parseBlobRef, type BlobRef } from '../../src/domain/blobs.js';
import type { Json, SessionEvent } from '../../src/domain/event.js';
import { blobDigest, blobString, collectingMaker, extractBatch, inflateData, BlobDamagedError, type BlobPut } from '../../src/app/blob-codec.js';

const MIN = 1024;

function roundTrip(data: Json, minBytes = MIN): { text: string; stored: string; blobs: Map<string, BlobPut> } {
  const blobs = new Map<string, BlobPut>();
  const x = extractBlobs(data, minBytes, collectingMaker(blobs));
  const stored = JSON.stringify(x?.data ?? data);
  const back = inflateData(JSON.parse(stored) as Json, blobs);
  return { text: JSON.stringify(back), stored, blobs };
}

const png = Buffer.alloc(4096, 7);
png.write('\x89PNG\r\n', 0, 'latin1');
const pngB64 = png.toString('base64');

describe('which values are blobbed', () => {
  it('a string at the threshold is blobbed, one byte below it is not', () => {
    const at = 'a'.repeat(MIN);
    const below = 'a'.repeat(MIN - 1);
    const x = extractBlobs({ at, below }, MIN, collectingMaker(new Map()));
    expect(x).toBeDefined();
    expect((x!.data as Record<string, Json>)['below']).toBe(below);
    expect(x!.refs).toHaveLength(1);
    expect((x!.data as Record<string, Json>)['at']).toEqual({ $blob: blobDigest(Buffer.from(at)), bytes: MIN, mediaType: 'text/plain; charset=utf-8' });
  });

  it('counts UTF-8 bytes, not characters', () => {
    const s = 'é'.repeat(MIN / 2); // 2 bytes each
    expect(extractBlobs({ s }, MIN, collectingMaker(new Map()))?.refs[0]?.bytes).toBe(MIN);
    expect(extractBlobs({ s: 'é'.repeat(MIN / 2 - 1) }, MIN, collectingMaker(new Map()))).toBeUndefined();
  });

  it('an image block stores its data decoded, with its media type and encoding base64', () => {
    const data = { message: { content: [{ type: 'image', attachment: { mimeType: 'image/png', data: pngB64 } }] } };
    const blobs = new Map<string, BlobPut>();
    const x = extractBlobs(data, DEFAULT_BLOB_MIN_BYTES, collectingMaker(blobs))!;
    const ref = { $blob: blobDigest(png), bytes: png.byteLength, mediaType: 'image/png', encoding: 'base64' };
    expect(x.data).toEqual({ message: { content: [{ type: 'image', attachment: { mimeType: 'image/png', data: ref } }] } });
    expect(Buffer.from(blobs.get(ref.$blob)!.bytes).equals(png)).toBe(true);
    // key order of the attachment is kept
    expect(Object.keys((x.data as { message: { content: { attachment: object }[] } }).message.content[0]!.attachment)).toEqual(['mimeType', 'data']);
  });

  it('image data that is not canonical base64 is stored as its text', () => {
    const odd = `${pngB64.slice(0, -4)}\n${pngB64.slice(-4)}`; // a line break: decodes, but not back to itself
    const x = extractBlobs({ type: 'image', attachment: { data: odd } }, DEFAULT_BLOB_MIN_BYTES, collectingMaker(new Map()));
    expect(x).toBeUndefined(); // below 64 KiB as text, and no canonical base64
    const { text } = roundTrip({ type: 'image', attachment: { data: odd } }, 16);
    expect(text).toBe(JSON.stringify({ type: 'image', attachment: { data: odd } }));
  });

  it('a string with a lone surrogate stays inline', () => {
    const s = `${'x'.repeat(MIN)}\ud800`;
    expect(extractBlobs([s], MIN, collectingMaker(new Map()))).toBeUndefined();
  });

  it('minBytes 0 turns blobs off', () => {
    expect(extractBlobs({ s: 'x'.repeat(1 << 20) }, 0, collectingMaker(new Map()))).toBeUndefined();
    expect(mayHoldBlobs('x'.repeat(1 << 20), 0)).toBe(false);
  });

  it('the reference gate finds exactly the texts holding "$blob" (the key), wherever it is', () => {
    const cases: [string, boolean][] = [
      ['{"$blob":"sha256:x"}', true],
      ['[{"a":1},{"$blob":1}]', true],
      ['{"x$blob":1,"$blob$blob":2}', false],
      ['{"$blobs":1}', false],
      ['$blob"', false],
      ['{"a$blob":1,"b":{"$blob":2}}', true],
      ['"$blob"', true],
      ['{"t":"$blob\\""}', false],
      ['', false],
    ];
    for (const [text, want] of cases) {
      expect(mayHoldRefs(text), text).toBe(want);
      expect(mayHoldRefs(text), text).toBe(text.includes('"$blob"'));
    }
  });

  it('the gate lets small events through without a walk', () => {
    expect(mayHoldBlobs(JSON.stringify({ turn: 1 }), DEFAULT_BLOB_MIN_BYTES)).toBe(false);
    expect(mayHoldBlobs(JSON.stringify({ x: 'y'.repeat(2000) }), DEFAULT_BLOB_MIN_BYTES)).toBe(false);
    expect(mayHoldBlobs(JSON.stringify({ type: 'image', attachment: { data: 'y'.repeat(2000) } }), DEFAULT_BLOB_MIN_BYTES)).toBe(true);
  });
});

describe('byte-identical round trips', () => {
  it('unicode, JSON escapes, nested arrays, repeated values', () => {
    const big = `"quoted" \\ back\nslash\t ✓ 𝄞 \u0000 \u2028 ${'ü'.repeat(MIN)}`;
    const data: Json = { a: [[big, 1, [big, { b: big }]], null], c: { type: 'image', attachment: { mimeType: 'image/png', data: pngB64 } }, d: 'small' };
    const { text, stored, blobs } = roundTrip(data);
    expect(text).toBe(JSON.stringify(data));
    expect(blobs.size).toBe(2); // the string once, the image once
    expect(stored.length).toBeLessThan(1000);
  });

  it('a __proto__ key survives', () => {
    const data = JSON.parse(`{"__proto__": "${'p'.repeat(MIN)}", "x": {"__proto__": [1]}}`) as Json;
    expect(roundTrip(data).text).toBe(JSON.stringify(data));
  });

  it('any JSON value (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 1, max: 64 }), (v, min) => {
        const data = JSON.parse(JSON.stringify(v)) as Json;
        expect(roundTrip(data, min).text).toBe(JSON.stringify(data));
      }),
      { numRuns: 200 },
    );
  });

  it('extraction leaves its input unchanged and shares untouched subtrees', () => {
    const small = { k: [1, 2] };
    const data = Object.freeze({ small, big: 'z'.repeat(MIN) }) as Json;
    const x = extractBlobs(data, MIN, collectingMaker(new Map()))!;
    expect((data as Record<string, Json>)['big']).toBe('z'.repeat(MIN));
    expect((x.data as Record<string, Json>)['small']).toBe(small);
  });

  it('a missing blob on inflation is a BlobDamagedError naming the digest', () => {
    const digest = blobDigest(Buffer.from('gone'));
    expect(() => inflateData({ x: { $blob: digest, bytes: 4, mediaType: 'text/plain; charset=utf-8' } }, new Map())).toThrow(BlobDamagedError);
  });
});

describe('the reference shape is unambiguous', () => {
  const digest = blobDigest(Buffer.from('hello'));

  it('only the exact shape is a reference', () => {
    expect(parseBlobRef({ $blob: digest })).toEqual({ digest, bytes: -1, mediaType: '', encoding: 'utf8' });
    expect(parseBlobRef({ $blob: digest, bytes: 5, mediaType: 'text/plain', encoding: 'base64' })?.encoding).toBe('base64');
    for (const literal of [
      { $blob: digest, other: 1 },
      { $blob: digest.toUpperCase() },
      { $blob: `sha256:${'0'.repeat(63)}` },
      { $blob: 5 },
      { $blob: digest, bytes: -1 },
      { $blob: digest, bytes: 1.5 },
      { $blob: digest, encoding: 'hex' },
      { $blob: digest, mediaType: 3 },
      [digest],
      digest,
    ] as Json[]) {
      expect(parseBlobRef(literal)).toBeUndefined();
      expect(findBlobRefs({ x: literal })).toEqual([]);
    }
    expect(isBlobDigest(digest)).toBe(true);
  });

  it('findBlobRefs finds references at any depth, literals with a $blob key are left alone', () => {
    const refs = findBlobRefs({ a: [{ $blob: digest }, { $blob: 'not a digest', nested: { $blob: digest, bytes: 5 } }] });
    expect(refs.map((r: BlobRef) => r.digest)).toEqual([digest, digest]);
  });

  it('inflation replaces references only', () => {
    const literal = { $blob: 'x' };
    const out = inflateBlobs({ r: { $blob: digest }, literal }, () => 'hello');
    expect(out).toEqual({ r: 'hello', literal });
  });
});

describe('extractBatch', () => {
  const ev = (seq: number, data: Json): SessionEvent => ({ type: 'x/y', seq, time: 1, data });

  it('returns undefined for a batch of small events, and one blob per digest', () => {
    const small = [ev(0, { a: 1 }), ev(1, { b: 'c' })];
    expect(extractBatch(small, small.map((e) => JSON.stringify(e.data)), MIN)).toBeUndefined();
    expect(extractBatch(small, undefined, MIN)).toBeUndefined();
    const big = 'q'.repeat(MIN);
    const batch = [ev(0, { a: 1 }), ev(1, { big }), ev(2, [big, big])];
    const x = extractBatch(batch, undefined, MIN)!;
    expect(x.events[0]).toBe(batch[0]);
    expect(x.blobs).toHaveLength(1);
    expect(x.eventBlobs).toEqual([undefined, [x.blobs[0]!.digest], [x.blobs[0]!.digest, x.blobs[0]!.digest]]);
    expect(x.dataTexts[2]).toBe(JSON.stringify(x.events[2]!.data));
    expect(blobString(x.blobs[0]!.bytes, 'utf8')).toBe(big);
  });
});
