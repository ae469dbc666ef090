/**
 * The viewer with blobs (issue #39, web/src/blob-view.ts) in headless Chromium against a real
 * server: the event log (opened directly, `?view=events`) reads with blob_refs, so an
 * image-heavy session's page is as small as one without images and paints as fast (ratio of the
 * two, same run); each image shows its type and
 * size ("PNG · 1.0 MiB") and is fetched from `GET /blobs/<digest>` only once scrolled into view;
 * a large tool output is a collapsed line with its size that loads on demand. The model view
 * (SubscribeSurface with blob_refs) shows the images the same way.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata } from '@grpc/grpc-js';
import { call, startTestServer, type TestServer } from '../support/test-server.js';
import { input } from '../support/events.js';
import { hasChromium, launchChromium, type TestBrowser } from '../support/browser.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';

const CI = process.env.CI === 'true';
const WAIT = { timeout: 15_000 };
/** Images of the image-heavy session, each a ~1 MiB PNG of noise (incompressible). */
const IMAGES = 16;

const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(b: Buffer): number {
  let c = 0xffffffff;
  for (const x of b) c = (crcTable[(c ^ x) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}
/** A valid RGBA PNG of `w`x`h` random pixels. */
function noisePng(w: number, h: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 6, 0, 0, 0], 8);
  const rows: Buffer[] = [];
  for (let y = 0; y < h; y++) rows.push(Buffer.from([0]), randomBytes(w * 4));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.concat(rows), { level: 0 })), chunk('IEND', Buffer.alloc(0))]);
}

function userMessage(n: number, content: unknown[]): EventInput {
  return input('user/message', { id: `u${n}`, role: 'user', content, source: { kind: 'user' } }, { surfaceOp: { $case: 'append', value: {} }, time: 1_700_000_000_000 + n * 1000 });
}

const suite = hasChromium() || CI ? describe : describe.skip;

suite(`viewer with blobs in headless Chromium${hasChromium() ? '' : ' (skipped: /usr/bin/chromium missing; run .ci/system-deps)'}`, () => {
  let t: TestServer;
  let b: TestBrowser;
  let base: string;
  beforeAll(async () => {
    expect(hasChromium(), 'chromium missing under CI (run .ci/system-deps)').toBe(true);
    execFileSync('node_modules/.bin/vite', ['build', '--config', 'web/vite.config.ts', '--logLevel', 'error'], { stdio: 'pipe' });
    t = await startTestServer({ webListen: '127.0.0.1:0', db: ':memory:' });
    base = `http://127.0.0.1:${t.server.webPort}`;
    const append = (id: string, events: EventInput[]) => call(t.client.appendEvents.bind(t.client), { sessionId: id, events, idempotencyKey: '' } as never, new Metadata());
    for (const id of ['images', 'plain']) {
      await call(t.client.createSession.bind(t.client), { sessionId: id, labels: {}, strict: false } as never, new Metadata());
      for (let i = 0; i < IMAGES; i++) {
        const text = { type: 'text', text: `screenshot ${i}` };
        await append(id, [userMessage(i, id === 'images' ? [text, { type: 'image', attachment: { mimeType: 'image/png', data: noisePng(512, 512).toString('base64') } }] : [text])]);
      }
    }
    await append('images', [userMessage(IMAGES, [{ type: 'text', text: `build log\n${'ok '.repeat(40_000)}` }])]);
    b = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await t?.stop();
  });

  /** Opens a session's event log; ms until its first row is on screen. */
  async function openEvents(id: string) {
    const p = await b.context.newPage();
    const blobRequests: string[] = [];
    p.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/blobs/')) blobRequests.push(r.url());
    });
    const start = Date.now();
    await p.goto(`${base}/sessions/${id}?view=events`);
    await p.waitForSelector('#event-log tr[data-seq="0"]', WAIT);
    return { p, ms: Date.now() - start, blobRequests };
  }

  it('shows each image by reference with its size, fetched only once scrolled into view, and a large text collapsed', async () => {
    const { p, blobRequests } = await openEvents('images');
    const labels = await p.$$eval('#event-log figure.blob .blob-label', (els) => els.map((e) => e.textContent));
    expect(labels).toHaveLength(IMAGES);
    expect(labels.every((l) => /^PNG · 1\.0 MiB$/.test(l ?? ''))).toBe(true);
    // Only the images near the viewport were asked for.
    await p.waitForFunction(`[...document.querySelectorAll('#event-log img.blob-image')].some((i) => i.complete && i.naturalWidth > 0)`, undefined, WAIT);
    expect(blobRequests.length).toBeGreaterThan(0);
    expect(blobRequests.length).toBeLessThan(IMAGES);
    const last = p.locator(`#event-log tr[data-seq="${IMAGES - 1}"] img.blob-image`);
    const loaded = (): Promise<number> => last.evaluate((i) => {
      const img = i as unknown as { complete: boolean; naturalWidth: number };
      return img.complete ? img.naturalWidth : 0;
    });
    expect(await loaded()).toBe(0);
    await last.scrollIntoViewIfNeeded();
    await expect.poll(loaded, WAIT).toBe(512);
    // The large text: collapsed with its size, loaded when opened.
    const text = p.locator(`#event-log tr[data-seq="${IMAGES}"] details.blob-text`);
    expect(await text.locator('.blob-label').textContent()).toBe('text · 117.2 KiB');
    await text.locator('summary').click();
    await expect.poll(() => text.getAttribute('data-loaded'), WAIT).toBe('true');
    expect((await text.locator('pre').textContent())?.startsWith('build log\nok ok')).toBe(true);
    await p.evaluate('window.scrollTo(0, 0)');
    await p.waitForFunction(`[...document.querySelectorAll('#event-log img.blob-image')].filter((i) => i.getBoundingClientRect().top < innerHeight).every((i) => i.complete && i.naturalWidth > 0)`, undefined, WAIT);
    // docs/viewer-blobs.png is this page (PALIMPSEST_DOCS_SCREENSHOTS=1 writes it there).
    await p.screenshot({ path: process.env.PALIMPSEST_DOCS_SCREENSHOTS === '1' ? 'docs/viewer-blobs.png' : join(t.dir, 'viewer-blobs.png') });
    await p.close();
  }, 60_000);

  it('the model view reads with blob_refs: each image by reference with its size, its bytes fetched from /blobs/ (lazy img), none in the stream', async () => {
    const p = await b.context.newPage();
    const blobRequests: string[] = [];
    p.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/blobs/')) blobRequests.push(r.url());
    });
    await p.goto(`${base}/sessions/images`);
    const row = (seq: number) => `#surface [data-seq="${seq}"]`;
    await p.waitForSelector(`${row(IMAGES - 1)} figure.blob img.blob-image`, WAIT);
    const labels = await p.$$eval('#surface figure.blob .blob-label', (els) => els.map((e) => e.textContent));
    expect(labels.filter((l) => /^PNG · 1\.0 MiB$/.test(l ?? ''))).toHaveLength(IMAGES);
    // no image travelled in the stream (16 MiB of base64 otherwise)
    expect(await p.locator('#surface img[src^="data:"]').count()).toBe(0);
    await p.waitForFunction(`[...document.querySelectorAll('#surface img.blob-image')].some((i) => i.complete && i.naturalWidth > 0)`, undefined, WAIT);
    // Loaded by the browser's lazy loading (loading="lazy": its distance threshold covers this
    // short page; the event log test above shows far images left unloaded).
    expect(blobRequests.length).toBeGreaterThan(0);
    expect(await p.$$eval('#surface img.blob-image', (els) => els.every((e) => (e.getAttribute('src') ?? '').startsWith('/blobs/sha256:')))).toBe(true);
    const last = p.locator(`${row(IMAGES - 1)} img.blob-image`);
    const loaded = (): Promise<number> => last.evaluate((i) => {
      const img = i as unknown as { complete: boolean; naturalWidth: number };
      return img.complete ? img.naturalWidth : 0;
    });
    await last.scrollIntoViewIfNeeded();
    await expect.poll(loaded, WAIT).toBe(512);
    // The header's totals count each image at its base64 size, as without references.
    const png = noisePng(512, 512).length; // every one of them is this long
    const bytes = Number(await p.locator('#surface-totals').getAttribute('data-bytes'));
    expect(bytes).toBeGreaterThan(IMAGES * 4 * Math.ceil(png / 3));
    await p.close();
  }, 30_000);

  it('opens the image-heavy event log about as fast as the same log without images', async () => {
    // Warm both once (the viewer's assets, the sessions), then measure alternately.
    for (const id of ['plain', 'images']) await (await openEvents(id)).p.close();
    const times: Record<string, number[]> = { plain: [], images: [] };
    for (let round = 0; round < 3; round++) {
      for (const id of ['plain', 'images'] as const) {
        const o = await openEvents(id);
        times[id]!.push(o.ms);
        await o.p.close();
      }
    }
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[1] as number;
    const ratio = median(times.images!) / Math.max(1, median(times.plain!));
    console.log(`event log first row: plain ${times.plain!.join('/')} ms, ${IMAGES} MiB of images ${times.images!.join('/')} ms, ratio ${ratio.toFixed(2)}`);
    // Without blob_refs (the bytes in the page) this was 14x on this machine.
    expect(ratio).toBeLessThan(3);
  }, 60_000);
});
