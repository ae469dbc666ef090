/**
 * Blobs through the app (issue #39): the session service over a BlobbingStore gives back every
 * event byte for byte (reads, export, fork), appends may reference a blob of their tenant by
 * digest, and GetBlob's read serves a tenant's blob in chunks from an offset.
 */
import { describe, expect, it } from 'vitest';
import { SessionService, ANONYMOUS, DEFAULT_LIMITS, type CallContext } from '../../src/app/session-service.js';
import { BlobbingStore } from '../../src/app/blobbing-store.js';
import { blobDigest } from '../../src/app/blob-codec.js';
import { readBlobChunks, resolveBlobRefs } from '../../src/app/blob-refs.js';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent, Json } from '../../src/domain/event.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';

const png = Buffer.alloc(300 * 1024, 0x33);
png.write('\x89PNG\r\n', 0, 'latin1');
const PNG = png.toString('base64');
const DIGEST = blobDigest(png);

function userMessage(n: number, image: Json = PNG): CandidateEvent {
  return {
    type: 'user/message', surfaceOp: 'append',
    data: { id: `u${n}`, role: 'user', content: [{ type: 'text', text: `look ✓ "${n}"` }, { type: 'image', attachment: { mimeType: 'image/png', data: image } }], source: { kind: 'user' } },
  };
}

function services(): { blobbed: SessionService; plain: SessionService; inner: MemorySessionStore } {
  const inner = new MemorySessionStore();
  const clock = () => 1_700_000_000_000;
  return { blobbed: new SessionService(new BlobbingStore(inner, 65_536), DEFAULT_LIMITS, clock), plain: new SessionService(new MemorySessionStore(), DEFAULT_LIMITS, clock), inner };
}

async function exported(s: SessionService, ctx: CallContext, id: string): Promise<string> {
  let out = '';
  for await (const lines of s.exportJsonl(ctx, id)) out += lines.join('');
  return out;
}

async function reason(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) return e.reason;
    throw e;
  }
  return 'resolved';
}

describe('blobs through the session service', () => {
  it('20 messages with the same image: stored once, every read and the export byte-identical to the same session without blobs', async () => {
    const { blobbed, plain, inner } = services();
    for (const s of [blobbed, plain]) {
      await s.createSession(ANONYMOUS, { id: 's' });
      for (let i = 0; i < 20; i++) await s.append(ANONYMOUS, 's', [userMessage(i)]);
    }
    const usage = await inner.getTenantUsage('');
    expect(usage.dataBytes).toBeLessThan(png.byteLength + 20 * 600);
    expect(await exported(blobbed, ANONYMOUS, 's')).toBe(await exported(plain, ANONYMOUS, 's'));
    const a = await blobbed.listEvents(ANONYMOUS, 's', { direction: 'forward', pageSize: 100 });
    const b = await plain.listEvents(ANONYMOUS, 's', { direction: 'forward', pageSize: 100 });
    expect(a.events.map((e) => e.dataText)).toEqual(b.events.map((e) => e.dataText));
    const ma = await blobbed.getMessages(ANONYMOUS, 's', 'model');
    const mb = await plain.getMessages(ANONYMOUS, 's', 'model');
    expect(JSON.stringify(ma.messages)).toBe(JSON.stringify(mb.messages));
  });

  it('a fork reads back identical and keeps the blob after its parent is deleted', async () => {
    const { blobbed, inner } = services();
    await blobbed.createSession(ANONYMOUS, { id: 'p' });
    await blobbed.append(ANONYMOUS, 'p', [userMessage(0)]);
    await blobbed.fork(ANONYMOUS, 'p', { childId: 'c' });
    expect(await blobbed.deleteSession(ANONYMOUS, 'p')).toBe(true);
    const [e] = await blobbed.store.getEvents('c', [0]);
    expect(JSON.stringify(e!.data)).toBe(JSON.stringify(userMessage(0).data));
    expect((await inner.blobs.tenantBlobs('', [DIGEST])).size).toBe(1);
  });

  it('an append may reference a blob of its tenant by digest; a missing one is BLOB_NOT_FOUND and the log is untouched', async () => {
    const { blobbed } = services();
    const alice: CallContext = { tenant: 'alice' };
    const bob: CallContext = { tenant: 'bob' };
    await blobbed.createSession(alice, { id: 's' });
    await blobbed.createSession(bob, { id: 's' });
    const ref = { $blob: DIGEST, encoding: 'base64' };
    // nothing stored yet: refused, nothing appended
    expect(await reason(blobbed.append(alice, 's', [userMessage(0, ref)]))).toBe('BLOB_NOT_FOUND');
    expect((await blobbed.getSession(alice, 's')).headSeq).toBeUndefined();
    await blobbed.append(alice, 's', [userMessage(0)]);
    const r = await blobbed.append(alice, 's', [userMessage(1, ref)]);
    expect(r.seqs).toEqual([1]);
    const [e] = await blobbed.store.getEvents('alice/s', [1]);
    expect(JSON.stringify(e!.data)).toBe(JSON.stringify(userMessage(1).data));
    // another tenant's blob is as missing as none
    expect(await reason(blobbed.append(bob, 's', [userMessage(0, ref)]))).toBe('BLOB_NOT_FOUND');
    expect((await blobbed.getSession(bob, 's')).headSeq).toBeUndefined();
    // a reference whose size does not fit, or bytes that are not text referenced as text
    expect(await reason(blobbed.append(alice, 's', [userMessage(2, { $blob: DIGEST, bytes: 5, encoding: 'base64' })]))).toBe('BLOB_REF_INVALID');
    expect(await reason(blobbed.append(alice, 's', [userMessage(2, { $blob: DIGEST })]))).toBe('BLOB_REF_INVALID');
    expect((await blobbed.getSession(alice, 's')).headSeq).toBe(1);
    // an object with a $blob key that is not a reference is ordinary data
    const literal = { $blob: 'mine', note: 1 };
    await blobbed.append(alice, 's', [{ type: 'x/note', data: { literal } }]);
    const [n] = await blobbed.store.getEvents('alice/s', [2]);
    expect(n!.data).toEqual({ literal });
  });

  it('GetBlob read: chunks from an offset, tenant-scoped, checked digest and offset', async () => {
    const { blobbed } = services();
    const alice: CallContext = { tenant: 'alice' };
    await blobbed.createSession(alice, { id: 's' });
    await blobbed.append(alice, 's', [userMessage(0)]);
    const chunks = [];
    for await (const c of readBlobChunks(blobbed.store, 'alice', DIGEST, 1000, 100 * 1024)) chunks.push(c);
    expect(chunks.map((c) => c.offset)).toEqual([1000, 1000 + 102_400, 1000 + 204_800]);
    expect(Buffer.concat(chunks.map((c) => c.bytes)).equals(png.subarray(1000))).toBe(true);
    expect(chunks[0]!.info).toEqual({ digest: DIGEST, size: png.byteLength, mediaType: 'image/png' });
    const end = [];
    for await (const c of readBlobChunks(blobbed.store, 'alice', DIGEST, png.byteLength)) end.push(c);
    expect(end.map((c) => c.bytes.byteLength)).toEqual([0]);
    const drain = async (tenant: string, digest: string, offset = 0) => {
      for await (const _ of readBlobChunks(blobbed.store, tenant, digest, offset)) { /* drain */ }
    };
    expect(await reason(drain('bob', DIGEST))).toBe('BLOB_NOT_FOUND');
    expect(await reason(drain('alice', blobDigest(Buffer.from('nope'))))).toBe('BLOB_NOT_FOUND');
    expect(await reason(drain('alice', 'sha256:XYZ'))).toBe('BLOB_DIGEST_INVALID');
    expect(await reason(drain('alice', DIGEST, png.byteLength + 1))).toBe('BLOB_OFFSET_OUT_OF_RANGE');
  });

  it('an import holding a reference resolves it against the tenant\'s blobs; an unknown one is BLOB_NOT_FOUND and no session is left', async () => {
    const { blobbed } = services();
    await blobbed.createSession(ANONYMOUS, { id: 's' });
    await blobbed.append(ANONYMOUS, 's', [userMessage(0)]);
    const file = (digest: string): Uint8Array => Buffer.from(
      `${JSON.stringify({ type: 'session', version: 0, id: 'imp', createdAt: 1 })}\n` +
      `${JSON.stringify({ type: 'x/note', seq: 0, time: 5, data: { img: { $blob: digest, encoding: 'base64' } } })}\n`);
    async function* chunks(b: Uint8Array) { yield b; }
    const missing = blobDigest(Buffer.from('nothing'));
    expect(await reason(blobbed.importJsonl(ANONYMOUS, chunks(file(missing)), { id: 'imp' }))).toBe('BLOB_NOT_FOUND');
    expect(await reason(blobbed.getSession(ANONYMOUS, 'imp'))).toBe('SESSION_NOT_FOUND');
    await blobbed.importJsonl(ANONYMOUS, chunks(file(DIGEST)), { id: 'imp' });
    const [e] = await blobbed.store.getEvents('imp', [0]);
    expect(e!.data).toEqual({ img: PNG });
  });

  it('an import referencing an image by digest without "encoding": "base64" is BLOB_REF_INVALID (the AppendEvents rule), nothing stored', async () => {
    const { blobbed } = services();
    await blobbed.createSession(ANONYMOUS, { id: 's' });
    await blobbed.append(ANONYMOUS, 's', [userMessage(0)]);
    const line = (img: Json) => Buffer.from(
      `${JSON.stringify({ type: 'session', version: 0, id: 'imp', createdAt: 1 })}\n` +
      `${JSON.stringify({ type: 'x/note', seq: 0, time: 5, data: { img } })}\n`);
    async function* chunks(b: Uint8Array) { yield b; }
    expect(await reason(blobbed.importJsonl(ANONYMOUS, chunks(line({ $blob: DIGEST })), { id: 'imp' }))).toBe('BLOB_REF_INVALID');
    expect(await reason(blobbed.getSession(ANONYMOUS, 'imp'))).toBe('SESSION_NOT_FOUND');
    expect(await reason(blobbed.importJsonl(ANONYMOUS, chunks(line({ $blob: DIGEST, bytes: 7, encoding: 'base64' })), { id: 'imp' }))).toBe('BLOB_REF_INVALID');
    expect(await reason(blobbed.getSession(ANONYMOUS, 'imp'))).toBe('SESSION_NOT_FOUND');
  });

  it('on a store that keeps no blobs (PostgreSQL today) an imported reference is BLOB_NOT_FOUND, as an append is, and nothing is stored', async () => {
    const inner = new MemorySessionStore();
    // The store port without its blobs, as the PostgreSQL store is.
    const noBlobs = new Proxy(inner, { get: (t, k) => (k === 'blobs' ? undefined : Reflect.get(t, k, t) as unknown) });
    const app = new SessionService(new BlobbingStore(noBlobs, 65_536), DEFAULT_LIMITS, () => 1_700_000_000_000);
    const ref = { $blob: DIGEST, bytes: png.length, mediaType: 'image/png', encoding: 'base64' };
    const line = Buffer.from(
      `${JSON.stringify({ type: 'session', version: 0, id: 'imp', createdAt: 1 })}\n` +
      `${JSON.stringify({ type: 'x/note', seq: 0, time: 5, data: { img: ref } })}\n`);
    async function* chunks(b: Uint8Array) { yield b; }
    expect(await reason(app.importJsonl(ANONYMOUS, chunks(line), { id: 'imp' }))).toBe('BLOB_NOT_FOUND');
    expect(await reason(app.getSession(ANONYMOUS, 'imp'))).toBe('SESSION_NOT_FOUND');
    await app.createSession(ANONYMOUS, { id: 's' });
    expect(await reason(app.append(ANONYMOUS, 's', [userMessage(0, ref as unknown as Json)]))).toBe('BLOB_NOT_FOUND');
    // Ordinary data is stored as given (inline: no blobs here).
    await app.append(ANONYMOUS, 's', [userMessage(0)]);
    expect((await inner.readEventTexts('s', { fromSeq: 0, direction: 'forward', limit: 10 }))[0]!.dataText).toContain(PNG.slice(0, 100));
  });

  it('an append referencing a CJK text blob is sized in UTF-8 bytes', async () => {
    const { blobbed } = services();
    await blobbed.createSession(ANONYMOUS, { id: 's' });
    const cjk = '漢字'.repeat(12_000); // 72,000 UTF-8 bytes, 24,000 UTF-16 units
    await blobbed.append(ANONYMOUS, 's', [{ type: 'x/note', data: { cjk } }]);
    const ref = { $blob: blobDigest(Buffer.from(cjk)) };
    const r = await resolveBlobRefs(blobbed.store, '', [{ type: 'x/note', data: { cjk: ref } }], { dataBytes: [10] });
    expect(r!.opts.dataBytes).toEqual([Buffer.byteLength(JSON.stringify({ cjk }))]);
  });
});
