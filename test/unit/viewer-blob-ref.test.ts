/**
 * The viewer's blob reference rule (web/src/blob-ref.ts) is the server's exact shape
 * (parseBlobRef): an object with a `$blob` digest and any other key is data, shown as such; a
 * message read with references is sized as the message with its bytes (refInflation).
 */
import { describe, expect, it } from 'vitest';
import { blobRef, formatBytes, refInflation } from '../../web/src/blob-ref.js';

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

  it('sizes a message read with references as the message with its bytes', () => {
    const b64 = Buffer.alloc(3000, 7).toString('base64');
    const text = 'x'.repeat(5000);
    const withBytes = { content: [{ type: 'image', attachment: { data: b64 } }, { type: 'text', text }] };
    const withRefs = { content: [{ type: 'image', attachment: { data: { $blob: D, bytes: 3000, mediaType: 'image/png', encoding: 'base64' } } }, { type: 'text', text: { $blob: D, bytes: 5000 } }] };
    expect(JSON.stringify(withRefs).length + refInflation(withRefs)).toBe(JSON.stringify(withBytes).length);
    // no reference, nothing added; a reference without its size adds nothing
    expect(refInflation(withBytes)).toBe(0);
    expect(refInflation({ data: { $blob: D } })).toBe(0);
  });
});
