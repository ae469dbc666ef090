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
import type { CandidateEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { isBlobDigest } from '../domain/blobs.js';
import { utf8Length } from '../domain/utf8.js';
import { BlobDamagedError } from './blob-codec.js';
import { resolveRefs } from './blob-resolve.js';
import type { BlobInfo } from './blob-port.js';
import type { AppendOptions } from './app-types.js';
import { DataCorruptedError } from './storage-error.js';
import type { SessionStore } from './store-port.js';

/**
 * The candidates with their references resolved (and the options adjusted: a resolved event's
 * parsed text and size no longer apply), or undefined when none holds a reference. Throws
 * BLOB_NOT_FOUND or BLOB_REF_INVALID (a reference whose `bytes` or encoding does not fit the blob).
 */
export async function resolveBlobRefs(
  store: SessionStore, tenant: string, candidates: readonly CandidateEvent[], opts: AppendOptions,
): Promise<{ candidates: CandidateEvent[]; opts: AppendOptions } | undefined> {
  const blobs = store.blobs;
  const resolved = await resolveRefs(candidates.map((c) => c?.data), candidates.map((_, i) => opts.parsedData?.[i]?.text), async (digests) => {
    const out = new Map<string, { bytes: Uint8Array }>();
    for (const d of digests) {
      const slice = await blobs?.readBlob(tenant, d, 0, Number.MAX_SAFE_INTEGER);
      if (slice !== undefined) out.set(d, slice);
    }
    return out;
  });
  if (resolved === undefined) return undefined;
  const out = candidates.slice();
  const parsedData = opts.parsedData?.slice();
  const dataBytes = opts.dataBytes?.slice();
  for (let i = 0; i < candidates.length; i++) {
    const data = resolved[i];
    if (data === undefined) continue;
    out[i] = { ...candidates[i]!, data };
    if (parsedData !== undefined) parsedData[i] = undefined;
    if (dataBytes !== undefined) dataBytes[i] = utf8Length(JSON.stringify(data));
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
