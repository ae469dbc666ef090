/**
 * Blobs in the TypeScript client (clients/typescript/src/blobs.ts, docs/blobs.md): `events`
 * with `blobRefs` returns references, `getBlob` reads the bytes (from an offset; a stream cut
 * short resumes from the bytes it has), and an image sent once is referenced by digest
 * afterwards (an unknown digest is BLOB_NOT_FOUND, nothing stored); `blobRefs` on messages,
 * exportSession and subscribeSurface returns references there too.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PalimpsestClient, PalimpsestError, events as ev } from '../../clients/typescript/src/index.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const imageData = (e: { data?: { kind?: { $case: string; value: unknown } } | undefined }): unknown => {
  const v = e.data?.kind?.$case === 'json' ? JSON.parse(e.data.kind.value as string) as { content: { attachment: { data: unknown } }[] } : undefined;
  return v?.content.at(-1)?.attachment.data;
};

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7919 + seed) & 0xff;
  return b;
}

async function rejection(p: Promise<unknown>): Promise<PalimpsestError> {
  const e = await p.then(() => undefined, (x: unknown) => x);
  expect(e).toBeInstanceOf(PalimpsestError);
  return e as PalimpsestError;
}

async function all<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

let ts: TestServer;
let c: PalimpsestClient;
let n = 0;
const sid = (): string => `ts-blob-${process.pid}-${n++}`;
beforeAll(async () => {
  ts = await startTestServer({ db: ':memory:' });
  c = new PalimpsestClient(ts.server.address);
});
afterAll(async () => {
  c?.close();
  await ts?.stop();
});

describe('@palimpsest/client blobs', () => {
  it('events with blobRefs return references; getBlob reads the bytes, from an offset too', async () => {
    const png = pattern(300 * 1024, 1);
    const digest = ev.blobDigest(png);
    const id = sid();
    await c.createSession(id);
    await c.append(id, [ev.userMessage([ev.image(png)])]);
    const [full] = await all(c.events(id));
    expect(imageData(full!)).toBe(png.toString('base64'));
    const [ref] = await all(c.events(id, { blobRefs: true }));
    expect(imageData(ref!)).toEqual({ $blob: digest, bytes: png.length, mediaType: 'image/png', encoding: 'base64' });
    expect(Buffer.from(await c.getBlob(digest)).equals(png)).toBe(true);
    expect(Buffer.from(await c.getBlob(digest, png.length - 1000)).equals(png.subarray(png.length - 1000))).toBe(true);
    expect((await c.getBlob(digest, png.length)).byteLength).toBe(0);
    expect((await rejection(c.getBlob(`sha256:${'0'.repeat(64)}`))).reason).toBe('BLOB_NOT_FOUND');
    expect((await rejection(c.getBlob(digest, png.length + 1))).reason).toBe('BLOB_OFFSET_OUT_OF_RANGE');
  });

  it('an image sent once is referenced by digest; an unknown digest is BLOB_NOT_FOUND and nothing is stored', async () => {
    const png = pattern(200 * 1024, 2);
    const id = sid();
    await c.createSession(id);
    await c.append(id, [ev.userMessage([ev.image(png)])]);
    await c.append(id, [ev.userMessage([ev.text('again'), ev.imageRef(ev.blobDigest(png))])]);
    const events = await all(c.events(id));
    expect(imageData(events[1]!)).toBe(png.toString('base64'));
    const unknown = await rejection(c.append(id, [ev.userMessage([ev.imageRef(ev.blobDigest(Buffer.from('never sent')))])]));
    expect([unknown.reason, unknown.metadata['digest']]).toEqual(['BLOB_NOT_FOUND', ev.blobDigest(Buffer.from('never sent'))]);
    expect(await all(c.events(id))).toHaveLength(2);
  });

  it('a blob read cut short resumes from the bytes it has', async () => {
    const png = randomBytes(2 * 1024 * 1024 + 5);
    const id = sid();
    await c.createSession(id);
    await c.append(id, [ev.userMessage([ev.image(png)])]);
    const proxy = await TcpProxy.start(ts.server.address);
    const rc = new PalimpsestClient(proxy.address, { channelOptions: { 'grpc.initial_reconnect_backoff_ms': 50, 'grpc.min_reconnect_backoff_ms': 50, 'grpc.max_reconnect_backoff_ms': 200 } });
    try {
      const parts: Uint8Array[] = [];
      for await (const chunk of rc.blobChunks(ev.blobDigest(png))) {
        if (parts.length === 0) expect(proxy.drop()).toBeGreaterThan(0);
        parts.push(chunk);
      }
      expect(Buffer.concat(parts).equals(png)).toBe(true);
      // The read went on over a new connection, from the offset it had reached.
      expect(proxy.accepted).toBeGreaterThanOrEqual(2);
    } finally {
      rc.close();
      await proxy.close();
    }
  });

  it('blobRefs on messages, renderedMessages, exportSession and subscribeSurface: references instead of bytes; without it, the bytes', async () => {
    const png = pattern(120 * 1024, 3);
    const ref = { $blob: ev.blobDigest(png), bytes: png.length, mediaType: 'image/png', encoding: 'base64' };
    const refText = JSON.stringify(ref);
    const b64 = png.toString('base64');
    const id = sid();
    await c.createSession(id);
    await c.append(id, [ev.userMessage([ev.image(png)])]);
    expect(JSON.stringify(await c.messages(id))).toContain(b64);
    const msgs = JSON.stringify(await c.messages(id, { blobRefs: true }));
    expect([msgs.includes(refText), msgs.includes(b64)]).toEqual([true, false]);
    const rendered = JSON.stringify(await c.renderedMessages(id, 'anthropic', { blobRefs: true }));
    expect([rendered.includes(refText), rendered.includes(b64)]).toEqual([true, false]);
    const text = async (opts?: { blobRefs?: boolean }): Promise<string> => Buffer.concat((await all(c.exportSession(id, opts))).map((x) => Buffer.from(x))).toString();
    expect(await text()).toContain(b64);
    const light = await text({ blobRefs: true });
    expect([light.includes(refText), light.includes(b64)]).toEqual([true, false]);
    const firstAppend = async (blobRefs: boolean): Promise<string> => {
      for await (const d of c.subscribeSurface(id, { includeMessages: true, blobRefs })) {
        if (d.op === 'append') return JSON.stringify([imageData(d.event!), d.message]);
      }
      return '';
    };
    expect(await firstAppend(false)).toContain(b64);
    const live = await firstAppend(true);
    expect([live.includes(refText), live.includes(b64)]).toEqual([true, false]);
  });
});
