/**
 * Blobs (docs/blobs.md): reading a tenant's blob with GetBlob, resumable from the bytes already
 * read, and the builders that send an image once and reference it afterwards.
 */
import { createHash } from 'node:crypto';
import { status, type Metadata } from '@grpc/grpc-js';
import type { GetBlobResponse, SessionServiceClient } from './gen/palimpsest/v1/service.js';
import type { ContentBlock } from './events.js';
import { toPalimpsestError } from './errors.js';

/** How many times in a row a blob read reopens a broken stream without progress. */
const RESUMES = 5;

/** Codes of a broken stream (connection dropped, server restarting) worth reopening from the bytes read. */
const RESUMABLE = new Set<number>([status.UNAVAILABLE, status.INTERNAL, status.UNKNOWN]);

/**
 * The chunks of blob `digest` from `offset` (GetBlob); a stream that breaks is opened again from
 * the bytes already yielded. Errors a retry cannot fix (BLOB_NOT_FOUND, DATA_LOSS, ...) are thrown
 * as PalimpsestError at once.
 */
export async function* blobChunks(raw: SessionServiceClient, metadata: () => Metadata, digest: string, offset = 0): AsyncGenerator<Uint8Array> {
  let failures = 0;
  for (;;) {
    const call = raw.getBlob({ digest, offset }, metadata());
    call.on('error', () => {}); // errors reach the iterator below
    try {
      for await (const res of call as AsyncIterable<GetBlobResponse>) {
        if (res.data.byteLength === 0) continue;
        failures = 0;
        offset += res.data.byteLength;
        yield res.data;
      }
      return;
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (typeof code !== 'number' || !RESUMABLE.has(code) || failures >= RESUMES) throw toPalimpsestError(e);
      failures += 1;
      await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** failures, 1000)));
    } finally {
      call.cancel();
    }
  }
}

/** The digest a blob of `data` has on the server: "sha256:" and the SHA-256 of the bytes (for an image, of the image file). */
export function blobDigest(data: Uint8Array): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/**
 * An image block carrying the image's bytes (as base64). A large one (serve --blob-min-bytes)
 * is stored once per tenant as a blob; later events can send `imageRef(blobDigest(data))`
 * instead of the bytes again.
 */
export function image(data: Uint8Array, mediaType = 'image/png'): ContentBlock {
  return { type: 'image', attachment: { mimeType: mediaType, data: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64') } };
}

/**
 * An image block that references a blob the tenant already stored (an image sent before with
 * `image`) by digest instead of carrying its bytes: the server stores the event exactly as if
 * the bytes had been sent. A digest the tenant has no blob for is refused with BLOB_NOT_FOUND,
 * nothing stored: send `image` then.
 */
export function imageRef(digest: string, mediaType = 'image/png'): ContentBlock {
  return { type: 'image', attachment: { mimeType: mediaType, data: { $blob: digest, encoding: 'base64' } } };
}
