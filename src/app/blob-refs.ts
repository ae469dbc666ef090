/**
 * Blobs as the app's use cases see them (issue #39, docs/blobs.md):
 *
 *  - {@link resolveBlobRefs}: an append may reference a blob its tenant already has instead of
 *    sending the value again: every object of the reference shape (src/domain/blobs.ts
 *    parseBlobRef) in a candidate's data stands for the blob's content, resolved here before
 *    validation, so the events are validated, sized and stored exactly as if the value had been
 *    sent. A reference the tenant has no blob for is BLOB_NOT_FOUND (NOT_FOUND, metadata `digest`,
 *    `index`), nothing stored.
 *  - {@link readBlobChunks}: GetBlob's read (and the web port's `GET /blobs/...`): a tenant's
 *    blob by digest, from an offset, in chunks. Another tenant's digest is BLOB_NOT_FOUND exactly
 *    like a missing one.
 */
import type { CandidateEvent, Json } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { MAX_NESTING } from '../domain/json.js';
import { inflateBlobs, isBlobDigest, mayHoldRefs, parseBlobRef, type BlobRef } from '../domain/blobs.js';
import { BlobDamagedError, blobString } from './blob-codec.js';
import type { BlobInfo } from './blob-port.js';
import type { AppendOptions } from './app-types.js';
import { DataCorruptedError } from './storage-error.js';
import type { SessionStore } from './store-port.js';

/** Every reference in a candidate's (unvalidated) data; stops at MAX_NESTING (deeper data is refused by validation). */
function refsIn(data: unknown, out: BlobRef[], depth = 0): void {
  if (data === null || typeof data !== 'object' || depth > MAX_NESTING) return;
  if (Array.isArray(data)) {
    for (const x of data) refsIn(x, out, depth + 1);
    return;
  }
  if ('$blob' in data) {
    const ref = parseBlobRef(data as Json);
    if (ref !== undefined) {
      out.push(ref);
      return;
    }
  }
  for (const k in data) refsIn((data as Record<string, unknown>)[k], out, depth + 1);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function notFound(digest: string, index: number): DomainError {
  return new DomainError('BLOB_NOT_FOUND',
    `event ${index} references blob ${digest}, which this tenant has not stored; send the value itself (a blob exists only while an event of the tenant references it)`,
    { digest }, index);
}

/**
 * The candidates with their references resolved (and the options adjusted: a resolved event's
 * parsed text and size no longer apply), or undefined when none holds a reference. Throws
 * BLOB_NOT_FOUND or BLOB_REF_INVALID (a reference whose `bytes` or encoding does not fit the blob).
 */
export async function resolveBlobRefs(
  store: SessionStore, tenant: string, candidates: readonly CandidateEvent[], opts: AppendOptions,
): Promise<{ candidates: CandidateEvent[]; opts: AppendOptions } | undefined> {
  const perEvent: (BlobRef[] | undefined)[] = [];
  let any = false;
  for (let i = 0; i < candidates.length; i++) {
    const text = opts.parsedData?.[i]?.text;
    if (text !== undefined && !mayHoldRefs(text)) continue;
    const refs: BlobRef[] = [];
    refsIn(candidates[i]?.data, refs);
    if (refs.length > 0) {
      perEvent[i] = refs;
      any = true;
    }
  }
  if (!any) return undefined;
  const strings = new Map<string, string>();
  for (let i = 0; i < candidates.length; i++) {
    for (const ref of perEvent[i] ?? []) {
      const key = `${ref.encoding}:${ref.digest}`;
      if (strings.has(key)) continue;
      const slice = await store.blobs?.readBlob(tenant, ref.digest, 0, Number.MAX_SAFE_INTEGER);
      if (slice === undefined) throw notFound(ref.digest, i);
      if (ref.bytes >= 0 && ref.bytes !== slice.info.size) {
        throw new DomainError('BLOB_REF_INVALID',
          `event ${i} references blob ${ref.digest} with bytes ${ref.bytes}, but it has ${slice.info.size}; send the reference as a blob_refs read returned it`,
          { digest: ref.digest }, i);
      }
      if (ref.encoding === 'utf8') {
        try {
          utf8.decode(slice.bytes);
        } catch {
          throw new DomainError('BLOB_REF_INVALID',
            `event ${i} references blob ${ref.digest} as UTF-8 text, but its bytes are not UTF-8; reference it with "encoding": "base64"`,
            { digest: ref.digest }, i);
        }
      }
      strings.set(key, blobString(slice.bytes, ref.encoding));
    }
  }
  const out = candidates.slice();
  const parsedData = opts.parsedData?.slice();
  const dataBytes = opts.dataBytes?.slice();
  for (let i = 0; i < candidates.length; i++) {
    if (perEvent[i] === undefined) continue;
    const c = candidates[i]!;
    const data = inflateBlobs(c.data as Json, (ref) => strings.get(`${ref.encoding}:${ref.digest}`)!);
    out[i] = { ...c, data };
    if (parsedData !== undefined) parsedData[i] = undefined;
    if (dataBytes !== undefined) dataBytes[i] = JSON.stringify(data).length;
  }
  return { candidates: out, opts: { ...opts, ...(parsedData === undefined ? {} : { parsedData }), ...(dataBytes === undefined ? {} : { dataBytes }) } };
}

/** One chunk of a blob read. */
export interface BlobChunk {
  readonly info: BlobInfo;
  /** Offset of `bytes` in the blob. */
  readonly offset: number;
  readonly bytes: Uint8Array;
}

/** GetBlob's default chunk size (256 KiB: well below every client's default message limit). */
export const BLOB_CHUNK_BYTES = 256 * 1024;

/**
 * A tenant's blob from `offset` in chunks of at most `chunkBytes` (at least one chunk, empty when
 * `offset` is the blob's size). BLOB_DIGEST_INVALID for a malformed digest, BLOB_NOT_FOUND when
 * the tenant has no such blob, BLOB_OFFSET_OUT_OF_RANGE past its end, DATA_LOSS when damaged.
 */
export async function* readBlobChunks(store: SessionStore, tenant: string, digest: string, offset = 0, chunkBytes = BLOB_CHUNK_BYTES): AsyncGenerator<BlobChunk> {
  if (!isBlobDigest(digest)) {
    throw new DomainError('BLOB_DIGEST_INVALID', `${JSON.stringify(String(digest).slice(0, 80))} is not a blob digest; send "sha256:" and 64 lowercase hex digits`, {});
  }
  if (!Number.isSafeInteger(offset) || offset < 0) throw new DomainError('INVALID_ARGUMENT', `offset ${offset} is not a byte offset`, {});
  let slice;
  try {
    slice = await store.blobs?.readBlob(tenant, digest, offset, Number.MAX_SAFE_INTEGER);
  } catch (e) {
    if (e instanceof BlobDamagedError) {
      throw new DataCorruptedError('', undefined, `${e.message}; it cannot be served (restore the database from a backup; \`palimpsest verify\` lists every damaged blob)`, digest);
    }
    throw e;
  }
  if (slice === undefined) throw new DomainError('BLOB_NOT_FOUND', `this tenant has no blob ${digest}`, { digest });
  const size = slice.info.size;
  if (offset > size) {
    throw new DomainError('BLOB_OFFSET_OUT_OF_RANGE', `offset ${offset} is past the end of blob ${digest} (${size} bytes); resume from at most ${size}`,
      { digest, size: String(size) });
  }
  const bytes = slice.bytes;
  let at = 0;
  do {
    const n = Math.min(chunkBytes, bytes.byteLength - at);
    yield { info: slice.info, offset: offset + at, bytes: bytes.subarray(at, at + n) };
    at += n;
  } while (at < bytes.byteLength);
}
