/**
 * The byte side of blobs (issue #39; the pure walks are src/domain/blobs.ts): a value's bytes and
 * SHA-256 digest, and the string a blob's bytes stand for again. Image data is stored decoded only
 * when it is canonical base64 (re-encoding gives back exactly the appended string), so every
 * re-inflation is byte-identical.
 */
import { createHash } from 'node:crypto';
import type { Json, SessionEvent } from '../domain/event.js';
import { extractBlobs, inflateBlobs, mayHoldBlobs, type BlobCandidate, type BlobEncoding, type BlobMaker, type BlobRef } from '../domain/blobs.js';

/** A blob a write stores (once per tenant and digest). */
export interface BlobPut {
  readonly digest: string;
  readonly bytes: Uint8Array;
  readonly mediaType: string;
}

/** `sha256:` and the hex SHA-256 of `bytes`. */
export function blobDigest(bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** The bytes `value` is stored as, or undefined when it cannot be stored that way exactly. */
export function blobBytes(value: string, encoding: BlobEncoding): Buffer | undefined {
  if (encoding === 'utf8') return Buffer.from(value, 'utf8');
  const bytes = Buffer.from(value, 'base64');
  // Buffer's decoder skips what is not base64 and accepts missing padding: keep only values
  // that encode back to themselves.
  return bytes.toString('base64') === value ? bytes : undefined;
}

/** The JSON string a blob's bytes stand for. */
export function blobString(bytes: Uint8Array, encoding: BlobEncoding): string {
  const b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return encoding === 'base64' ? b.toString('base64') : b.toString('utf8');
}

/** A maker that collects the blobs it makes into `out` (by digest: one per digest). */
export function collectingMaker(out: Map<string, BlobPut>): BlobMaker {
  return (c: BlobCandidate): BlobRef | undefined => {
    const bytes = blobBytes(c.value, c.encoding);
    if (bytes === undefined) return undefined;
    const digest = blobDigest(bytes);
    if (!out.has(digest)) out.set(digest, { digest, bytes, mediaType: c.mediaType });
    return { digest, bytes: bytes.byteLength, mediaType: c.mediaType, encoding: c.encoding };
  };
}

/** What extracting a batch's blobs yields. */
export interface ExtractedBatch {
  /** The events with references in place of their blobbed values (the same objects where nothing was blobbed). */
  readonly events: SessionEvent[];
  /** Per event, its data's JSON text when known (recomputed for events that changed). */
  readonly dataTexts: (string | undefined)[];
  /** Per event, the digests its data references (undefined = none), in walk order. */
  readonly eventBlobs: (readonly string[] | undefined)[];
  /** The distinct blobs of the batch. */
  readonly blobs: BlobPut[];
}

/**
 * The batch with its values to blob replaced by references (see src/domain/blobs.ts), or
 * undefined when nothing was blobbed. `dataTexts[i]`, when known, gates event i: data whose text
 * cannot hold a value to blob is not walked (ordinary small events cost one length check).
 */
export function extractBatch(events: readonly SessionEvent[], dataTexts: readonly (string | undefined)[] | undefined, minBytes: number): ExtractedBatch | undefined {
  if (minBytes <= 0) return undefined;
  let out: ExtractedBatch | undefined;
  const found = new Map<string, BlobPut>();
  const make = collectingMaker(found);
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    const text = dataTexts?.[i];
    if (text !== undefined ? !mayHoldBlobs(text, minBytes) : !mayHoldBlobsValue(e.data, minBytes)) continue;
    const x = extractBlobs(e.data, minBytes, make);
    if (x === undefined) continue;
    out ??= { events: events.slice(), dataTexts: events.map((_, j) => dataTexts?.[j]), eventBlobs: new Array<undefined>(events.length), blobs: [] };
    out.events[i] = { ...e, data: x.data };
    out.dataTexts[i] = JSON.stringify(x.data);
    out.eventBlobs[i] = x.refs.map((r) => r.digest);
  }
  if (out !== undefined) out.blobs.push(...found.values());
  return out;
}

/** Without the text: any string or image block at all can only be found by the walk itself; strings and containers qualify. */
function mayHoldBlobsValue(data: Json, minBytes: number): boolean {
  return minBytes > 0 && data !== null && (typeof data === 'object' || (typeof data === 'string' && data.length * 3 >= minBytes));
}

/** A stored blob as a read sees it. */
export interface StoredBlob {
  readonly bytes: Uint8Array;
}

/** Raised by a resolver when a referenced blob is missing or its bytes do not match the digest. */
export class BlobDamagedError extends Error {
  constructor(readonly digest: string, readonly why: 'missing' | 'checksum') {
    super(`blob ${digest} is ${why === 'missing' ? 'missing' : 'damaged (its bytes do not match its digest)'}`);
    this.name = 'BlobDamagedError';
  }
}

/** `data` with its references replaced by the blobs' strings, read from `blobs` (by digest). */
export function inflateData(data: Json, blobs: ReadonlyMap<string, StoredBlob>): Json {
  return inflateBlobs(data, (ref) => {
    const b = blobs.get(ref.digest);
    if (b === undefined) throw new BlobDamagedError(ref.digest, 'missing');
    return blobString(b.bytes, ref.encoding);
  });
}
