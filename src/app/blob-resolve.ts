/**
 * The one resolver of references by digest in written data (issue #39, docs/blobs.md): every
 * object of the reference shape (src/domain/blobs.ts parseBlobRef) in an event's data stands for
 * the tenant's blob, whatever path the write came by (AppendEvents, imports, forks, server-built
 * batches). Checks, for every path alike:
 *
 *  - the tenant has the blob, else BLOB_NOT_FOUND (metadata `digest`, the event's index);
 *  - a reference's `bytes`, when given, is the blob's size, else BLOB_REF_INVALID;
 *  - a reference read as UTF-8 text (no `encoding`, or `"utf8"`) is over bytes that are UTF-8,
 *    else BLOB_REF_INVALID (so an image's digest without `"encoding": "base64"` is refused, never
 *    decoded into U+FFFD and stored corrupted).
 */
import type { Json } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { findBlobRefs, inflateBlobs, mayHoldRefs, type BlobRef } from '../domain/blobs.js';
import { blobString } from './blob-codec.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Reads the tenant's blobs by digest: their bytes (a digest it has none for is absent). */
export type BlobFetch = (digests: string[]) => Promise<ReadonlyMap<string, { readonly bytes: Uint8Array }>>;

function notFound(digest: string, index: number): DomainError {
  return new DomainError('BLOB_NOT_FOUND',
    `event ${index} references blob ${digest}, which this tenant has not stored; send the value itself (a blob exists only while an event of the tenant references it)`,
    { digest }, index);
}

/** The string `ref` stands for, checked against the blob's bytes (see the module comment). */
function checkedString(ref: BlobRef, bytes: Uint8Array | undefined, index: number): string {
  if (bytes === undefined) throw notFound(ref.digest, index);
  if (ref.bytes >= 0 && ref.bytes !== bytes.byteLength) {
    throw new DomainError('BLOB_REF_INVALID',
      `event ${index} references blob ${ref.digest} with bytes ${ref.bytes}, but it has ${bytes.byteLength}; send the reference as a blob_refs read returned it`,
      { digest: ref.digest }, index);
  }
  if (ref.encoding === 'utf8') {
    try {
      utf8.decode(bytes);
    } catch {
      throw new DomainError('BLOB_REF_INVALID',
        `event ${index} references blob ${ref.digest} as UTF-8 text, but its bytes are not UTF-8; reference it with "encoding": "base64"`,
        { digest: ref.digest }, index);
    }
  }
  return blobString(bytes, ref.encoding);
}

/**
 * The data of each event with its references resolved (undefined at an index without any), or
 * undefined when no event holds one. `texts[i]`, when known, is event i's JSON text (a cheap gate).
 * Throws BLOB_NOT_FOUND or BLOB_REF_INVALID naming the first event at fault.
 */
export async function resolveRefs(
  datas: readonly unknown[], texts: readonly (string | undefined)[] | undefined, fetch: BlobFetch,
): Promise<(Json | undefined)[] | undefined> {
  const perEvent: (BlobRef[] | undefined)[] = [];
  const digests = new Set<string>();
  for (let i = 0; i < datas.length; i++) {
    const text = texts?.[i];
    if (text !== undefined && !mayHoldRefs(text)) continue;
    const refs = findBlobRefs(datas[i]);
    if (refs.length === 0) continue;
    perEvent[i] = refs;
    for (const r of refs) digests.add(r.digest);
  }
  if (digests.size === 0) return undefined;
  const blobs = await fetch([...digests]);
  const out: (Json | undefined)[] = [];
  for (let i = 0; i < datas.length; i++) {
    const refs = perEvent[i];
    if (refs === undefined) continue;
    // Every reference is checked (in walk order) before the data is rebuilt.
    const strings = new Map<string, string>();
    for (const ref of refs) {
      const key = `${ref.encoding}:${ref.bytes}:${ref.digest}`;
      if (!strings.has(key)) strings.set(key, checkedString(ref, blobs.get(ref.digest)?.bytes, i));
    }
    out[i] = inflateBlobs(datas[i] as Json, (ref) => strings.get(`${ref.encoding}:${ref.bytes}:${ref.digest}`)!);
  }
  return out;
}
