/**
 * The web port's `GET /blobs/<digest>` (issue #39, src/server/web/blob-route.ts): the bytes of
 * the GetBlob read over plain HTTP with the RPCs' auth (401 without a token, another tenant's
 * digest 404 exactly like a missing one), a strong ETag and 304, single Range requests (206,
 * 416), headers that never let a blob render as a page of the viewer's origin, and a damaged
 * blob answering 500 with the DATA_LOSS detail while the server goes on serving.
 */
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorFromJson } from '@connectrpc/connect/protocol-connect';
import { Code } from '@connectrpc/connect';
import { ErrorInfoSchema } from '../../gen/es/google/rpc/error_details_pb.js';
import { hashToken } from '../../src/server/auth.js';
import { parseRange } from '../../src/server/web/blob-route.js';
import { input } from '../support/events.js';
import { esEvent, webClient } from '../support/web-client.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const ALICE = 'blob-alice-token-0123456789';
const ALICE_APPEND_ONLY = 'blob-alice-append-0123456789';
const BOB = 'blob-bob-token-0123456789';

function bytesOf(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7919 + seed) & 0xff;
  return b;
}
const png = bytesOf(300 * 1024, 1);
const html = Buffer.from(`<html><script>alert(1)</script>${'x'.repeat(2000)}</html>`);
const doomed = bytesOf(200 * 1024, 2);
const digestOf = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const PNG = digestOf(png);
const HTML = digestOf(html);
const DOOMED = digestOf(doomed);

function image(id: string, mimeType: string, b: Buffer) {
  return esEvent(input('user/message', {
    id, role: 'user', content: [{ type: 'image', attachment: { mimeType, data: b.toString('base64') } }], source: { kind: 'user' },
  }, { surfaceOp: { $case: 'append', value: {} } }));
}

let dir: string;
let t: TestServer;
let base: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'palimpsest-web-blobs-'));
  const tokens = join(dir, 'tokens.json');
  writeFileSync(tokens, JSON.stringify({
    tokens: [
      { name: 'alice', sha256: hashToken(ALICE), tenant: 'alice', permissions: ['read', 'append', 'admin'] },
      { name: 'alice-append', sha256: hashToken(ALICE_APPEND_ONLY), tenant: 'alice', permissions: ['append'] },
      { name: 'bob', sha256: hashToken(BOB), tenant: 'bob', permissions: ['read', 'append', 'admin'] },
    ],
  }));
  // SQLite (the damage is made in the file); a small threshold so that a 2 KiB page is a blob.
  t = await startTestServer({ webListen: '127.0.0.1:0', authTokens: tokens, blobMinBytes: 1024 });
  base = `http://127.0.0.1:${t.server.webPort}`;
  const a = webClient(base, 'connect', '1.1', ALICE);
  await a.createSession({ sessionId: 'shots' });
  await a.appendEvents({ sessionId: 'shots', events: [image('u1', 'image/png', png), image('u2', 'text/html', html), image('u3', 'image/png', doomed)] });
});
afterAll(async () => {
  await t?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** GET (or `method`) of a blob with `token` (null: no Authorization header). */
function get(digest: string, headers: Record<string, string> = {}, token: string | null = ALICE, method = 'GET'): Promise<Response> {
  return fetch(`${base}/blobs/${digest}`, { method, headers: { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...headers } });
}

async function reasonOf(r: Response): Promise<{ code: Code; reason: string; metadata: Record<string, string> }> {
  const err = errorFromJson((await r.json()) as never, undefined, new Error('not a Connect error') as never);
  const info = err.findDetails(ErrorInfoSchema)[0];
  return { code: err.code, reason: info?.reason ?? '', metadata: { ...(info?.metadata ?? {}) } };
}

describe('GET /blobs/<digest>', () => {
  it('serves the tenant\'s bytes with their media type, length, a strong ETag and immutable private caching', async () => {
    const r = await get(PNG);
    expect(r.status).toBe(200);
    expect(Buffer.from(await r.arrayBuffer()).equals(png)).toBe(true);
    expect(Object.fromEntries(['content-type', 'content-length', 'etag', 'cache-control', 'x-content-type-options', 'accept-ranges', 'content-disposition', 'vary'].map((k) => [k, r.headers.get(k)]))).toEqual({
      'content-type': 'image/png', 'content-length': String(png.length), etag: `"${PNG}"`, 'cache-control': 'private, max-age=31536000, immutable',
      'x-content-type-options': 'nosniff', 'accept-ranges': 'bytes', 'content-disposition': 'inline', vary: 'authorization',
    });
    // The colon may come percent-encoded.
    const enc = await get(PNG.replace(':', '%3A'));
    expect([enc.status, Number(enc.headers.get('content-length'))]).toEqual([200, png.length]);
    await enc.arrayBuffer();
    const head = await get(PNG, {}, ALICE, 'HEAD');
    expect([head.status, head.headers.get('content-length'), (await head.arrayBuffer()).byteLength]).toEqual([200, String(png.length), 0]);
  });

  it('needs the token and the read permission of GetBlob (401, 403), and another tenant\'s digest is 404 like a missing one', async () => {
    const none = await get(PNG, {}, null);
    expect(none.status).toBe(401);
    expect(await reasonOf(none)).toMatchObject({ code: Code.Unauthenticated, reason: 'UNAUTHENTICATED' });
    const bad = await get(PNG, {}, 'not-a-token');
    expect(bad.status).toBe(401);
    await bad.arrayBuffer();
    const appendOnly = await get(PNG, {}, ALICE_APPEND_ONLY);
    expect(appendOnly.status).toBe(403);
    expect(await reasonOf(appendOnly)).toMatchObject({ code: Code.PermissionDenied, reason: 'PERMISSION_DENIED', metadata: { permission: 'read', method: 'GetBlob' } });
    const bob = await get(PNG, {}, BOB);
    const missing = await get(`sha256:${'0'.repeat(64)}`, {}, BOB);
    expect([bob.status, missing.status]).toEqual([404, 404]);
    const [eb, em] = [await reasonOf(bob), await reasonOf(missing)];
    expect(eb).toMatchObject({ code: Code.NotFound, reason: 'BLOB_NOT_FOUND' });
    expect(em).toMatchObject({ code: Code.NotFound, reason: 'BLOB_NOT_FOUND' });
    // Even with the ETag in hand: no 304 for a tenant that does not have the blob.
    const probe = await get(PNG, { 'if-none-match': `"${PNG}"` }, BOB);
    expect(probe.status).toBe(404);
    await probe.arrayBuffer();
    const malformed = await get('sha256:nope');
    expect(malformed.status).toBe(400);
    expect((await reasonOf(malformed)).reason).toBe('BLOB_DIGEST_INVALID');
    const post = await fetch(`${base}/blobs/${PNG}`, { method: 'POST', headers: { authorization: `Bearer ${ALICE}` }, body: 'x' });
    expect([post.status, post.headers.get('allow')]).toEqual([405, 'GET, HEAD']);
    await post.arrayBuffer();
  });

  it('answers 304 to If-None-Match with its ETag', async () => {
    const r = await get(PNG, { 'if-none-match': `"${PNG}"` });
    expect([r.status, r.headers.get('etag'), (await r.arrayBuffer()).byteLength]).toEqual([304, `"${PNG}"`, 0]);
    const other = await get(PNG, { 'if-none-match': `"sha256:${'1'.repeat(64)}"` });
    expect(other.status).toBe(200);
    await other.arrayBuffer();
  });

  it('serves one byte range (206) so a download resumes; past the end is 416; If-Range with another validator gets it all', async () => {
    const mid = await get(PNG, { range: 'bytes=1000-262143' });
    expect([mid.status, mid.headers.get('content-range'), mid.headers.get('content-length')]).toEqual([206, `bytes 1000-262143/${png.length}`, String(262144 - 1000)]);
    expect(Buffer.from(await mid.arrayBuffer()).equals(png.subarray(1000, 262144))).toBe(true);
    // Resume: the bytes a client has, then the rest from there.
    const rest = await get(PNG, { range: `bytes=${262144}-` });
    expect(rest.status).toBe(206);
    expect(Buffer.concat([png.subarray(0, 262144), Buffer.from(await rest.arrayBuffer())]).equals(png)).toBe(true);
    const tail = await get(PNG, { range: 'bytes=-100' });
    expect([tail.status, tail.headers.get('content-range')]).toEqual([206, `bytes ${png.length - 100}-${png.length - 1}/${png.length}`]);
    expect(Buffer.from(await tail.arrayBuffer()).equals(png.subarray(png.length - 100))).toBe(true);
    const clipped = await get(PNG, { range: `bytes=${png.length - 10}-${png.length + 1000}` });
    expect([clipped.status, (await clipped.arrayBuffer()).byteLength]).toEqual([206, 10]);
    for (const from of [png.length, png.length + 5]) {
      const past = await get(PNG, { range: `bytes=${from}-` });
      expect([past.status, past.headers.get('content-range')]).toEqual([416, `bytes */${png.length}`]);
      await past.arrayBuffer();
    }
    const stale = await get(PNG, { range: 'bytes=0-9', 'if-range': '"something-else"' });
    expect([stale.status, (await stale.arrayBuffer()).byteLength]).toEqual([200, png.length]);
    const fresh = await get(PNG, { range: 'bytes=0-9', 'if-range': `"${PNG}"` });
    expect([fresh.status, (await fresh.arrayBuffer()).byteLength]).toEqual([206, 10]);
    // Several ranges: the whole blob (allowed by RFC 9110).
    const multi = await get(PNG, { range: 'bytes=0-1,5-6' });
    expect([multi.status, (await multi.arrayBuffer()).byteLength]).toEqual([200, png.length]);
  });

  it('parses only single byte ranges', () => {
    expect(parseRange('bytes=0-9')).toEqual({ first: 0, last: 9 });
    expect(parseRange('bytes=5-')).toEqual({ first: 5, last: undefined });
    expect(parseRange('bytes=-3')).toEqual({ suffix: 3 });
    for (const bad of [undefined, 'bytes=9-0', 'bytes=-', 'bytes=-0', 'items=0-1', 'bytes=0-1,3-4', 'bytes=a-b']) expect(parseRange(bad)).toBeUndefined();
  });

  it('never lets a blob render as a page: a non-image type is an attachment under a sandboxing CSP', async () => {
    const r = await get(HTML);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/html');
    expect(r.headers.get('content-disposition')).toBe(`attachment; filename="${HTML.replace(':', '-')}"`);
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(r.headers.get('content-security-policy')).toMatch(/^sandbox; default-src 'none'/);
    expect(Buffer.from(await r.arrayBuffer()).equals(html)).toBe(true);
  });

  it('a damaged blob answers 500 with the DATA_LOSS detail naming its digest, and the server goes on serving', async () => {
    const db = new Database(t.dbPath);
    try {
      const flipped = Buffer.from(doomed);
      flipped[1234] = (flipped[1234] as number) ^ 0x40;
      expect(db.prepare('UPDATE blobs SET bytes = ? WHERE digest = ?').run(flipped, DOOMED).changes).toBe(1);
    } finally {
      db.close();
    }
    const r = await get(DOOMED);
    expect(r.status).toBe(500);
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(await reasonOf(r)).toMatchObject({ code: Code.DataLoss, reason: 'DATA_CORRUPTED', metadata: { digest: DOOMED } });
    const ranged = await get(DOOMED, { range: 'bytes=10-20' });
    expect(ranged.status).toBe(500);
    await ranged.arrayBuffer();
    const ok = await get(PNG);
    expect([ok.status, (await ok.arrayBuffer()).byteLength]).toEqual([200, png.length]);
  });
});
