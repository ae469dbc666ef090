/**
 * Blobs through a real server (issue #39, docs/blobs.md): reads return the bytes as appended by
 * default and the export is byte-identical to a server with blobs off; ListEvents with blob_refs
 * returns references; GetBlob streams a blob in chunks and resumes from an offset; an append may
 * reference a blob by digest, and an unknown digest is NOT_FOUND / BLOB_NOT_FOUND with the log
 * untouched; subscriptions with blob_refs get references (catch-up and live), others the bytes.
 */
import { createHash } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClientReadableStream } from '@grpc/grpc-js';
import {
  DataFormat, GetBlobRequest, MessageFormat, MessageView, SubscribeEventsRequest, SubscribeSurfaceRequest,
  type GetBlobResponse, type SubscribeEventsResponse, type SubscribeSurfaceResponse,
} from '../../gen/palimpsest/v1/service.js';
import { api, failure, type Api } from '../support/e2e.js';
import { input } from '../support/events.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const png = Buffer.alloc(600 * 1024);
for (let i = 0; i < png.length; i++) png[i] = (i * 7919) & 0xff;
const PNG = png.toString('base64');
const DIGEST = `sha256:${createHash('sha256').update(png).digest('hex')}`;

function imageMessage(n: number, image: unknown = PNG) {
  return input('user/message', {
    id: `u${n}`, role: 'user', content: [{ type: 'text', text: `screenshot "${n}" ✓` }, { type: 'image', attachment: { mimeType: 'image/png', data: image } }], source: { kind: 'user' },
  }, { surfaceOp: { $case: 'append', value: {} }, time: 1_700_000_000_000 + n });
}

let on: TestServer;
let off: TestServer;
let a: Api;
let b: Api;
beforeAll(async () => {
  on = await startTestServer();
  off = await startTestServer({ blobMinBytes: 0 });
  a = api(on.client);
  b = api(off.client);
});
afterAll(async () => {
  await on?.stop();
  await off?.stop();
});

function getBlob(digest: string, offset = 0): Promise<GetBlobResponse[]> {
  return new Promise((resolve, reject) => {
    const out: GetBlobResponse[] = [];
    const s = on.client.getBlob(GetBlobRequest.fromPartial({ digest, offset }));
    s.on('data', (m: GetBlobResponse) => out.push(m));
    s.on('error', reject);
    s.on('end', () => resolve(out));
  });
}

/** Collects a stream's messages until `done` holds for them (then cancels it). */
function collect<M>(s: ClientReadableStream<M>, done: (ms: M[]) => boolean): { ready: Promise<M[]>; msgs: M[] } {
  const msgs: M[] = [];
  const ready = new Promise<M[]>((resolve, reject) => {
    s.on('data', (m: M) => {
      msgs.push(m);
      if (done(msgs)) {
        s.cancel();
        resolve(msgs);
      }
    });
    s.on('error', (e: { code?: number }) => (e.code === status.CANCELLED ? undefined : reject(e)));
  });
  return { ready, msgs };
}

describe('blobs through the server', () => {
  it('reads and the export are byte-identical to a server with blobs off; blob_refs returns references', async () => {
    for (const x of [a, b]) {
      await x.createSession({ sessionId: 'img' });
      await x.appendEvents({ sessionId: 'img', events: [imageMessage(0), imageMessage(1)] });
    }
    const page = { sessionId: 'img', pageSize: 10 };
    const [la, lb] = await Promise.all([a.listEvents(page), b.listEvents(page)]);
    expect(la.events.map((e) => e.data)).toEqual(lb.events.map((e) => e.data));
    const exportA = await a.exportSession('img');
    const exportB = await b.exportSession('img');
    // the same bytes but for the header's creation time (two servers)
    expect(exportA.replace(/"createdAt":\d+/, '') === exportB.replace(/"createdAt":\d+/, '')).toBe(true);
    expect(exportA).toContain(PNG);
    const refs = await a.listEvents({ ...page, blobRefs: true });
    const data = refs.events.map((e) => (e.data?.kind?.$case === 'json' ? e.data.kind.value : ''));
    expect(data[0]).toContain(`{"$blob":"${DIGEST}","bytes":${png.byteLength},"mediaType":"image/png","encoding":"base64"}`);
    expect(data[0]!.length).toBeLessThan(1000);
  });

  it('GetBlob streams the bytes in chunks and resumes from an offset', async () => {
    const all = await getBlob(DIGEST);
    expect(all.length).toBeGreaterThan(1);
    expect(Buffer.concat(all.map((m) => m.data)).equals(png)).toBe(true);
    expect(all[0]).toMatchObject({ offset: 0, size: png.byteLength, mediaType: 'image/png' });
    const rest = await getBlob(DIGEST, 500_000);
    expect(Buffer.concat(rest.map((m) => m.data)).equals(png.subarray(500_000))).toBe(true);
    const missing = await failure(getBlob(`sha256:${'0'.repeat(64)}`));
    expect([missing.code, missing.reason]).toEqual([status.NOT_FOUND, 'BLOB_NOT_FOUND']);
    const bad = await failure(getBlob('sha256:nope'));
    expect([bad.code, bad.reason]).toEqual([status.INVALID_ARGUMENT, 'BLOB_DIGEST_INVALID']);
  });

  it('an append references a stored blob by digest; an unknown digest is NOT_FOUND and the log is untouched', async () => {
    await a.createSession({ sessionId: 'byref' });
    const unknown = await failure(a.appendEvents({ sessionId: 'byref', events: [imageMessage(0, { $blob: `sha256:${'1'.repeat(64)}`, encoding: 'base64' })] }));
    expect([unknown.code, unknown.reason]).toEqual([status.NOT_FOUND, 'BLOB_NOT_FOUND']);
    expect((await a.getSession({ sessionId: 'byref' })).session?.eventCount).toBe(0);
    await a.appendEvents({ sessionId: 'byref', events: [imageMessage(0, { $blob: DIGEST, bytes: png.byteLength, mediaType: 'image/png', encoding: 'base64' })] });
    const [e] = (await a.listEvents({ sessionId: 'byref' })).events;
    expect(e!.data?.kind?.$case === 'json' ? e!.data.kind.value : '').toBe(JSON.stringify({
      id: 'u0', role: 'user', content: [{ type: 'text', text: 'screenshot "0" ✓' }, { type: 'image', attachment: { mimeType: 'image/png', data: PNG } }], source: { kind: 'user' },
    }));
  });

  it('GetMessages with blob_refs: every view and format carries the reference where the bytes were; without it, the bytes', async () => {
    await a.createSession({ sessionId: 'msgs' });
    await a.appendEvents({ sessionId: 'msgs', events: [imageMessage(0), imageMessage(1)] });
    const ref = `{"$blob":"${DIGEST}","bytes":${png.byteLength},"mediaType":"image/png","encoding":"base64"}`;
    for (const view of [MessageView.MESSAGE_VIEW_MODEL_HISTORY, MessageView.MESSAGE_VIEW_TRANSCRIPT]) {
      const plain = await a.getMessages({ sessionId: 'msgs', view });
      expect(plain.messages.map((m) => m.messageJson).join('')).toContain(PNG);
      const withRefs = await a.getMessages({ sessionId: 'msgs', view, blobRefs: true, typed: true });
      expect(withRefs.messages.map((m) => m.seq)).toEqual(plain.messages.map((m) => m.seq));
      for (const m of withRefs.messages) {
        expect(m.messageJson).toContain(`"attachment":{"mimeType":"image/png","data":${ref}}`);
        expect(m.messageJson.length).toBeLessThan(1000);
        // a message holding a reference has no typed form
        expect(m.message).toBeUndefined();
      }
      expect(withRefs.messages.map((m) => JSON.parse(m.messageJson.replace(ref, JSON.stringify(PNG))) as unknown))
        .toEqual(plain.messages.map((m) => JSON.parse(m.messageJson) as unknown));
    }
    for (const format of [MessageFormat.MESSAGE_FORMAT_OPENAI_CHAT, MessageFormat.MESSAGE_FORMAT_OPENAI_RESPONSES, MessageFormat.MESSAGE_FORMAT_ANTHROPIC, MessageFormat.MESSAGE_FORMAT_GEMINI]) {
      const req = { sessionId: 'msgs', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format };
      const plain = await a.getMessages(req);
      const withRefs = await a.getMessages({ ...req, blobRefs: true });
      const text = withRefs.rendered.map((m) => m.providerJson).join('\n');
      expect(text, `format ${format}`).toContain(ref);
      expect(text).not.toContain(PNG.slice(0, 100));
      expect(withRefs.rendered.map((m) => m.seqs)).toEqual(plain.rendered.map((m) => m.seqs));
      expect(plain.rendered.map((m) => m.providerJson).join('')).toContain(PNG.slice(0, 100));
    }
  });

  it('ExportSession with blob_refs writes references; importing that file into the tenant gives back the same session', async () => {
    await a.createSession({ sessionId: 'exp' });
    await a.appendEvents({ sessionId: 'exp', events: [imageMessage(0), imageMessage(1)] });
    const full = await a.exportSession('exp');
    const light = await a.exportSession('exp', false, true);
    expect(full).toContain(PNG);
    expect(light).not.toContain(PNG.slice(0, 100));
    expect(light).toContain(`{"$blob":"${DIGEST}","bytes":${png.byteLength},"mediaType":"image/png","encoding":"base64"}`);
    expect(light.length).toBeLessThan(5000);
    // the same tenant holds the blob: the references resolve on import
    await a.importSession({ sessionId: 'exp-copy' }, Buffer.from(light));
    const copy = await a.exportSession('exp-copy');
    expect(copy.replace(/"(id|createdAt)":("exp(-copy)?"|\d+)/g, '') === full.replace(/"(id|createdAt)":("exp(-copy)?"|\d+)/g, '')).toBe(true);
    // a server whose tenant has no such blob refuses it, and stores nothing
    const refused = await failure(b.importSession({ sessionId: 'exp-elsewhere' }, Buffer.from(light)));
    expect([refused.code, refused.reason]).toEqual([status.NOT_FOUND, 'BLOB_NOT_FOUND']);
    expect((await failure(b.getSession({ sessionId: 'exp-elsewhere' }))).code).toBe(status.NOT_FOUND);
  });

  it('subscriptions with blob_refs get references, catch-up and live, in events and attached messages; the others the bytes, the same deliveries otherwise', async () => {
    await a.createSession({ sessionId: 'subs' });
    await a.appendEvents({ sessionId: 'subs', events: [imageMessage(0)] });
    const ref = `{"$blob":"${DIGEST}","bytes":${png.byteLength},"mediaType":"image/png","encoding":"base64"}`;
    const eventsDone = (ms: SubscribeEventsResponse[]) => ms.filter((m) => m.kind?.$case === 'event').length === 2;
    const surfaceDone = (ms: SubscribeSurfaceResponse[]) => ms.filter((m) => m.kind?.$case === 'append').length === 2;
    const events = [false, true].map((blobRefs) => collect(on.client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: 'subs', blobRefs })), eventsDone));
    const surface = [false, true].map((blobRefs) => collect(on.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial({
      sessionId: 'subs', includeMessages: true, dataFormat: DataFormat.DATA_FORMAT_TYPED, blobRefs,
    })), surfaceDone));
    // every stream caught up on the first event (read from the store), then one live append
    const caughtUp = (ms: readonly { kind?: { $case: string } }[]) => ms.some((m) => m.kind?.$case === 'caughtUp');
    await expect.poll(() => [...events, ...surface].every((s) => caughtUp(s.msgs as { kind?: { $case: string } }[])), { timeout: 10_000 }).toBe(true);
    await a.appendEvents({ sessionId: 'subs', events: [imageMessage(1)] });
    const [plainEvents, refEvents] = await Promise.all(events.map((s) => s.ready));
    const [plainSurface, refSurface] = await Promise.all(surface.map((s) => s.ready));
    const dataOf = (e: SubscribeEventsResponse['kind']) => (e?.$case === 'event' && e.value.data?.kind?.$case === 'json' ? e.value.data.kind.value : '');
    const plainData = plainEvents!.map((m) => dataOf(m.kind));
    const refData = refEvents!.map((m) => dataOf(m.kind));
    expect(refEvents!.map((m) => [m.cursor, m.kind?.$case])).toEqual(plainEvents!.map((m) => [m.cursor, m.kind?.$case]));
    for (const [i, d] of refData.entries()) {
      if (d === '') continue;
      expect(d).toContain(ref);
      expect(d.length).toBeLessThan(1000);
      expect(JSON.parse(d.replace(ref, JSON.stringify(PNG))) as unknown).toEqual(JSON.parse(plainData[i]!) as unknown);
      expect(plainData[i]).toContain(PNG);
    }
    expect(refData.filter((d) => d !== '')).toHaveLength(2);
    expect(refSurface!.map((m) => [m.cursor, m.kind?.$case])).toEqual(plainSurface!.map((m) => [m.cursor, m.kind?.$case]));
    const appended = (ms: SubscribeSurfaceResponse[]) => ms.filter((m) => m.kind?.$case === 'append');
    for (const [i, m] of appended(refSurface!).entries()) {
      const plain = appended(plainSurface!)[i]!;
      expect(m.message!.messageJson).toContain(`"data":${ref}`);
      // a message holding a reference has no typed form, and the event data is json
      expect(m.message!.message).toBeUndefined();
      expect(m.event!.data!.kind!.$case).toBe('json');
      expect(plain.message!.messageJson).toContain(PNG);
      expect(plain.message!.message).toBeDefined();
      expect(JSON.parse(m.message!.messageJson.replace(ref, JSON.stringify(PNG))) as unknown).toEqual(JSON.parse(plain.message!.messageJson) as unknown);
    }
  });
});
