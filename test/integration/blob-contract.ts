/**
 * The blob part of the store contract (issue #39, src/app/blob-port.ts): every store that keeps
 * blobs, driven through the app's BlobbingStore, stores a blob once per tenant with the rows that
 * reference it, counts it once toward the tenant's bytes, drops it with its last reference, and
 * gives back byte-identical events on every read. Registered by storeContract (store-contract.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BlobbingStore } from '../../src/app/blobbing-store.js';
import { blobDigest } from '../../src/app/blob-codec.js';
import type { AppendRequest, NewSession, SessionStore } from '../../src/app/store-port.js';
import type { Json, SessionEvent } from '../../src/domain/event.js';

type Helpers = {
  ev: (seq: number, type?: string, data?: Json) => SessionEvent;
  newSession: (id: string, o?: { tenant?: string; pending?: boolean }) => NewSession;
  req: (expectedNextSeq: number, events: readonly SessionEvent[], extra?: Partial<AppendRequest>) => AppendRequest;
  IMPORTER: string;
  LONG_LEASE: number;
};

const MIN = 1024;
const png = Buffer.alloc(64 * 1024, 0x5a);
png.write('\x89PNG\r\n', 0, 'latin1');
const PNG_DIGEST = blobDigest(png);
const bigText = `line "one"\n✓ 𝄞 ${'ü'.repeat(2000)}`;

function imageMessage(seq: number): SessionEvent {
  return {
    type: 'user/message', seq, time: 1_700_000_000_000 + seq, surfaceOp: 'append',
    data: { id: `u${seq}`, role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image', attachment: { mimeType: 'image/png', data: png.toString('base64') } }], source: { kind: 'user' } },
  };
}

export function blobContract<S extends SessionStore>(name: string, open: () => Promise<S>, h: Helpers): void {
  describe(`${name}: blob contract`, () => {
    let inner: S;
    let store: BlobbingStore;
    beforeEach(async () => {
      inner = await open();
      store = new BlobbingStore(inner, MIN);
    });
    afterEach(async () => {
      await store.close();
    });

    async function appendTo(id: string, events: SessionEvent[], extra: Partial<AppendRequest> = {}) {
      const rec = await store.getSession(id);
      return store.append(id, h.req(rec!.nextSeq, events, { expectedWriter: rec!.writer, ...extra }));
    }

    it('the store keeps blobs', () => {
      expect(inner.blobs).toBeDefined();
    });

    it('every read gives back the appended events byte for byte; the row holds a reference', async () => {
      const events = [imageMessage(0), h.ev(1, 'x/text', { text: bigText, nested: [[bigText]] }), h.ev(2, 'x/small', { a: 1 })];
      expect(await store.createSession(h.newSession('s'), [])).toEqual({ kind: 'created' });
      expect(await appendTo('s', events)).toEqual({ kind: 'appended' });
      const want = events.map((e) => JSON.stringify(e.data));
      const all = { fromSeq: 0, direction: 'forward' as const, limit: 100 };
      expect((await store.readEvents('s', all)).map((e) => JSON.stringify(e.data))).toEqual(want);
      expect((await store.readEventTexts('s', all)).map((e) => e.dataText)).toEqual(want);
      expect((await store.getEvents('s', [1, 0])).map((e) => JSON.stringify(e.data))).toEqual(want.slice(0, 2));
      const scanned: string[] = [];
      for await (const b of store.scanEvents('s', 0, 2)) scanned.push(...b.map((e) => JSON.stringify(e.data)));
      expect(scanned).toEqual(want);
      expect(await store.readEncodedEventPage?.('s', all, 1 << 20)).toBeUndefined();
      const raw = (await inner.readEventTexts('s', all)).map((e) => e.dataText);
      expect(raw[0]).toContain(`{"$blob":"${PNG_DIGEST}","bytes":${png.byteLength},"mediaType":"image/png","encoding":"base64"}`);
      expect(raw[0]!.length).toBeLessThan(500);
      expect(raw[2]).toBe(want[2]);
    });

    it('the same image in 20 messages and a second session is stored and counted once', async () => {
      await store.createSession(h.newSession('a', { tenant: 't' }), []);
      const base = (await store.getTenantUsage('t')).dataBytes;
      await appendTo('a', [imageMessage(0)]);
      const one = (await store.getTenantUsage('t')).dataBytes - base;
      expect(one).toBeGreaterThan(png.byteLength);
      expect(one).toBeLessThan(png.byteLength + 500);
      await appendTo('a', Array.from({ length: 19 }, (_, i) => imageMessage(i + 1)));
      const twenty = (await store.getTenantUsage('t')).dataBytes - base;
      expect(twenty).toBeLessThan(png.byteLength + 20 * 500);
      await store.createSession(h.newSession('b', { tenant: 't' }), [imageMessage(0)]);
      expect((await store.getTenantUsage('t')).dataBytes - base).toBeLessThan(png.byteLength + 22 * 500);
      expect([...(await store.blobs!.tenantBlobs('t', [PNG_DIGEST])).values()]).toEqual([{ digest: PNG_DIGEST, size: png.byteLength, mediaType: 'image/png' }]);
      // deleting one session keeps the blob for the other; deleting both frees it
      expect(await store.deleteSession('a')).toBe(true);
      expect((await store.blobs!.tenantBlobs('t', [PNG_DIGEST])).size).toBe(1);
      expect(JSON.stringify((await store.getEvents('b', [0]))[0]!.data)).toBe(JSON.stringify(imageMessage(0).data));
      expect(await store.deleteSession('b')).toBe(true);
      expect((await store.blobs!.tenantBlobs('t', [PNG_DIGEST])).size).toBe(0);
      expect((await store.getTenantUsage('t')).dataBytes).toBe(0);
    });

    it('blobs are per tenant: another tenant has none, and reads by digest are tenant-scoped', async () => {
      await store.createSession(h.newSession('a', { tenant: 't1' }), [imageMessage(0)]);
      expect(await store.blobs!.readBlob('t2', PNG_DIGEST, 0, 10)).toBeUndefined();
      expect((await store.blobs!.tenantBlobs('t2', [PNG_DIGEST])).size).toBe(0);
      const slice = await store.blobs!.readBlob('t1', PNG_DIGEST, 1, 4);
      expect(slice?.info).toEqual({ digest: PNG_DIGEST, size: png.byteLength, mediaType: 'image/png' });
      expect(Buffer.from(slice!.bytes).equals(png.subarray(1, 5))).toBe(true);
      expect((await store.blobs!.readBlob('t1', PNG_DIGEST, png.byteLength, 4))?.bytes.byteLength).toBe(0);
      // the second tenant stores its own copy and counts it
      await store.createSession(h.newSession('b', { tenant: 't2' }), [imageMessage(0)]);
      expect((await store.getTenantUsage('t2')).dataBytes).toBeGreaterThan(png.byteLength);
    });

    it('a refused write stores no blob: byte quota, head conflict', async () => {
      await store.createSession(h.newSession('q', { tenant: 't' }), []);
      const used = (await store.getTenantUsage('t')).dataBytes;
      const over = await appendTo('q', [imageMessage(0)], { quota: { tenant: 't', maxBytes: used + png.byteLength } });
      expect(over).toMatchObject({ kind: 'quota-exceeded', limitName: 'tenant_max_bytes' });
      expect((await store.blobs!.tenantBlobs('t', [PNG_DIGEST])).size).toBe(0);
      const rec = await store.getSession('q');
      expect(await store.append('q', h.req(5, [imageMessage(5)], { expectedWriter: rec!.writer }))).toMatchObject({ kind: 'conflict' });
      expect((await store.blobs!.tenantBlobs('t', [PNG_DIGEST])).size).toBe(0);
      expect(await store.blobs!.sessionHasBlobs('q')).toBe(false);
      expect((await store.getTenantUsage('t')).dataBytes).toBe(used);
      // the byte quota counts a blob the tenant already has as nothing
      await appendTo('q', [imageMessage(0)]);
      const after = (await store.getTenantUsage('t')).dataBytes;
      expect(await appendTo('q', [imageMessage(1)], { quota: { tenant: 't', maxBytes: after + 1000 } })).toEqual({ kind: 'appended' });
    });

    it('an import chunk stores its blobs; a failed import removes them', async () => {
      await store.createSession(h.newSession('i', { tenant: 't', pending: true }), []);
      await store.appendPending('i', [imageMessage(0), imageMessage(1)], { owner: h.IMPORTER, leaseUntil: h.LONG_LEASE });
      expect(JSON.stringify((await store.getPendingEvents('i', h.IMPORTER, [1]))[0]!.data)).toBe(JSON.stringify(imageMessage(1).data));
      expect((await store.blobs!.tenantBlobs('t', [PNG_DIGEST])).size).toBe(1);
      expect(await store.deletePending('i', h.IMPORTER)).toBe(true);
      expect((await store.blobs!.tenantBlobs('t', [PNG_DIGEST])).size).toBe(0);
      expect((await store.getTenantUsage('t')).dataBytes).toBe(0);
    });

    it('blobs off (minBytes 0) stores inline; blobs stored earlier are still read', async () => {
      await store.createSession(h.newSession('o'), [imageMessage(0)]);
      const off = new BlobbingStore(inner, 0);
      const rec = await off.getSession('o');
      await off.append('o', h.req(1, [imageMessage(1)], { expectedWriter: rec!.writer }));
      const raw = await inner.readEventTexts('o', { fromSeq: 0, direction: 'forward', limit: 10 });
      expect(raw[0]!.dataText).toContain('"$blob"');
      expect(raw[1]!.dataText).toBe(JSON.stringify(imageMessage(1).data));
      expect((await off.readEvents('o', { fromSeq: 0, direction: 'forward', limit: 10 })).map((e) => JSON.stringify(e.data))).toEqual([0, 1].map((s) => JSON.stringify(imageMessage(s).data)));
    });
  });
}
