/**
 * The viewer's blob reference rule (web/src/blob-ref.ts) is the server's exact shape
 * (parseBlobRef): an object with a `$blob` digest and any other key is data, shown as such.
 */
import { describe, expect, it } from 'vitest';
import { blobRef, formatBytes } from '../../web/src/blob-ref.js';

const D = `sha256:${'a'.repeat(64)}`;

describe('viewer blob references', () => {
  it('recognises exactly the reference shape', () => {
    expect(blobRef({ $blob: D, bytes: 2048, mediaType: 'image/png', encoding: 'base64' })).toEqual({ digest: D, bytes: 2048, mediaType: 'image/png' });
    expect(blobRef({ $blob: D })).toEqual({ digest: D, bytes: -1, mediaType: 'application/octet-stream' });
    expect(blobRef({ $blob: D, note: 'mine' })).toBeUndefined();
    expect(blobRef({ $blob: D, bytes: 1.5 })).toBeUndefined();
    expect(blobRef({ $blob: D, encoding: 'hex' })).toBeUndefined();
    expect(blobRef({ $blob: 'sha256:XYZ' })).toBeUndefined();
  });

  it('writes byte counts one way', () => {
    expect([formatBytes(-1), formatBytes(512), formatBytes(2048), formatBytes(3 * 1024 * 1024)]).toEqual(['? B', '512 B', '2.0 KiB', '3.0 MiB']);
  });
});
