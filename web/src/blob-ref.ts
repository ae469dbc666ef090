/**
 * What the viewer recognises as a blob reference (issue #39, docs/blobs.md), and how it writes a
 * byte count: pure, no DOM. The reference rule is the server's own (src/domain/blobs.ts
 * parseBlobRef: a `$blob` digest and only the keys `bytes`, `mediaType`, `encoding`, each valid),
 * so an object with a `$blob` key and anything else is shown as the data it is.
 */
import { parseBlobRef } from '../../src/domain/blobs.js';
import type { Json } from '../../src/domain/event.js';

/** A blob reference as the server writes it. */
export interface BlobRef {
  readonly digest: string;
  /** -1 when the reference does not say. */
  readonly bytes: number;
  readonly mediaType: string;
}

/** The reference `v` is, or undefined (the exact shape of parseBlobRef). */
export function blobRef(v: unknown): BlobRef | undefined {
  const r = parseBlobRef(v as Json);
  return r === undefined ? undefined : { digest: r.digest, bytes: r.bytes, mediaType: r.mediaType || 'application/octet-stream' };
}

/** A byte count for people ("? B" when unknown): the one byte formatting of the viewer. */
export function formatBytes(n: number): string {
  if (n < 0) return '? B';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * How many more UTF-8 bytes `v` would be with each blob reference in it replaced by the string it
 * stands for (read with blob_refs: the viewer's sizes and token estimates stay those of the
 * appended message). Approximate for text blobs (their JSON escapes are not counted).
 */
export function refInflation(v: unknown): number {
  if (typeof v !== 'object' || v === null) return 0;
  const r = parseBlobRef(v as Json);
  if (r !== undefined) {
    const len = r.bytes < 0 ? 0 : r.encoding === 'base64' ? 4 * Math.ceil(r.bytes / 3) : r.bytes;
    return Math.max(0, len + 2 - JSON.stringify(v).length);
  }
  let n = 0;
  for (const x of Array.isArray(v) ? v : Object.values(v)) n += refInflation(x);
  return n;
}
