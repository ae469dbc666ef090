/**
 * Viewer benchmark (headless Chromium, Debian's /usr/bin/chromium through playwright-core):
 *
 *   npx tsx bench/viewer.bench.ts [--quick]
 *
 * 1. First paint of a large session: a session of ENTRIES surface entries (user and assistant
 *    messages, a tool call and its result every tenth turn) opened at /sessions/<id>; the time
 *    from navigation start to the first entries painted (the viewer's `palimpsest:first-paint`
 *    mark, set in a task right after the frame that first showed entries; target: under 1 s),
 *    and to the caught-up surface being on the page (`palimpsest:surface-rendered`; the page
 *    holds the newest 500 entries, earlier ones on demand) and painted (the next frame).
 * 2. Live append latency: with the page open and live, APPENDS single-message appends through
 *    gRPC, one every 50 ms; per append, from the AppendEvents acknowledgement (in this process)
 *    to the entry being in the page's DOM (a MutationObserver in the page; both sides read the
 *    same system clock, Date.now()). Target: under 200 ms.
 * Medians and ranges over RUNS page loads. The server runs in this process (SQLite in a temp
 * dir); Chromium is its own processes, so both share the machine's 2 cores as they would.
 */
import v8 from 'node:v8';
v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials, Metadata } from '@grpc/grpc-js';
import { startServer } from '../src/main.js';
import { SessionServiceClient } from '../gen/palimpsest/v1/service.js';
import type { EventInput } from '../gen/palimpsest/v1/event.js';
import { call } from '../test/support/test-server.js';
import { input, toolResult, userMessage } from '../test/support/events.js';
import { launchChromium } from '../test/support/browser.js';

/** The few browser globals the in-page probes use (this file is typechecked without the DOM lib). */
interface PageGlobals {
  requestAnimationFrame(cb: () => void): void;
  performance: { now(): number; getEntriesByName(name: string): { startTime: number; detail: unknown }[] };
  document: { getElementById(id: string): unknown };
  MutationObserver: new (cb: (records: { addedNodes: Iterable<{ getAttribute?(n: string): string | null }> }[]) => void) => { observe(target: unknown, opts: { childList: boolean }): void };
  __seen: Record<string, number>;
}

const quick = process.argv.includes('--quick');
const ENTRIES = 10_000;
const RUNS = quick ? 3 : 5;
const APPENDS = quick ? 20 : 50;

function assistant(id: string, text: string, source: number, calls: { id: string; name: string }[] = []): EventInput {
  const content: unknown[] = [{ type: 'text', text }];
  for (const c of calls) content.push({ type: 'tool-call', id: c.id, name: c.name, arguments: '{"path":"src/domain/surface.ts"}' });
  return input('assistant/message', { turn: 1, step: 1, message: { id, role: 'assistant', content, source: { kind: 'model', provider: 'p', model: 'm' } } },
    { surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: { seqs: [source] } });
}

/** ENTRIES surface events: user, assistant; every tenth pair also a tool call and its result. */
function bigSession(): EventInput[] {
  const out: EventInput[] = [];
  for (let i = 0; out.length < ENTRIES; i++) {
    const q = out.length;
    out.push(userMessage(`u${i}`, `Question ${i}: what does the function on line ${i * 7} of surface.ts do, and why is it O(block)?`));
    if (i % 10 === 0) {
      out.push(assistant(`a${i}`, 'Let me read it.', q, [{ id: `c${i}`, name: 'read' }]));
      out.push(toolResult(`r${i}`, `c${i}`, `export function splice(start: number, end: number) {\n  // ${i}: block-local splice\n}`, q + 1));
    }
    out.push(assistant(`b${i}`, `It splices one block of the chunked surface (answer ${i}); the seq table maps each seq to its block, so only that block moves.`, out.length - 1));
  }
  return out.slice(0, ENTRIES);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] as number;
}
function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))] as number;
}
const fmt = (n: number) => n.toFixed(0);
const range = (xs: number[]) => `${fmt(median(xs))} (${fmt(Math.min(...xs))}-${fmt(Math.max(...xs))})`;

async function main(): Promise<void> {
  execFileSync('node_modules/.bin/vite', ['build', '--config', 'web/vite.config.ts', '--logLevel', 'error'], { stdio: 'inherit' });
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-viewer-bench-'));
  const server = await startServer({ listen: '127.0.0.1:0', webListen: '127.0.0.1:0', db: join(dir, 'b.db'), logLevel: 'silent', durability: 'normal' });
  const client = new SessionServiceClient(server.address, credentials.createInsecure());
  const browser = await launchChromium();
  const md = new Metadata();
  try {
    await call(client.createSession.bind(client), { sessionId: 'big', labels: {}, strict: false } as never, md);
    const events = bigSession();
    for (let i = 0; i < events.length; i += 1000) {
      await call(client.appendEvents.bind(client), { sessionId: 'big', events: events.slice(i, i + 1000), idempotencyKey: '' } as never, md);
    }
    const base = `http://127.0.0.1:${server.webPort}`;
    const first: number[] = [];
    const rendered: number[] = [];
    const painted: number[] = [];
    const lat: number[] = [];
    let next = ENTRIES;
    for (let run = 0; run < RUNS; run++) {
      const page = await browser.context.newPage();
      await page.goto(`${base}/sessions/big`);
      await page.waitForSelector(`#surface > [data-seq="${next - 1}"]`, { state: 'attached', timeout: 60_000 });
      const t = await page.evaluate(() => new Promise<{ first: number; rendered: number; painted: number; entries: number }>((resolve) => {
        const g = globalThis as unknown as PageGlobals;
        g.requestAnimationFrame(() => {
          const m = g.performance.getEntriesByName('palimpsest:surface-rendered')[0]!;
          const f = g.performance.getEntriesByName('palimpsest:first-paint')[0]!;
          resolve({ first: f.startTime, rendered: m.startTime, painted: g.performance.now(), entries: (m.detail as { entries: number }).entries });
        });
      }));
      if (t.entries < ENTRIES) throw new Error(`rendered ${t.entries} entries, expected ${ENTRIES}`);
      first.push(t.first);
      rendered.push(t.rendered);
      painted.push(t.painted);
      console.error(`  run ${run + 1}: first entries painted at ${fmt(t.first)} ms; surface of ${t.entries} caught up and rendered at ${fmt(t.rendered)} ms, painted by ${fmt(t.painted)} ms`);
      await page.waitForSelector('#live-status[data-state="live"]');
      await page.evaluate(() => {
        const g = globalThis as unknown as PageGlobals;
        const seen: Record<string, number> = {};
        g.__seen = seen;
        new g.MutationObserver((records) => {
          const now = Date.now();
          for (const r of records) for (const n of r.addedNodes) {
            const s = n.getAttribute?.('data-seq');
            if (s !== null && s !== undefined && seen[s] === undefined) seen[s] = now;
          }
        }).observe(g.document.getElementById('surface'), { childList: true });
      });
      const acks = new Map<number, number>();
      for (let i = 0; i < APPENDS; i++) {
        const res = await call(client.appendEvents.bind(client), { sessionId: 'big', events: [userMessage(`live${next}`, `live message ${next}`)], idempotencyKey: '' } as never, md) as { seqs: number[] };
        acks.set(res.seqs[0] as number, Date.now());
        next++;
        await new Promise((r) => setTimeout(r, 50));
      }
      await page.waitForSelector(`#surface > [data-seq="${next - 1}"]`, { state: 'attached' });
      const seen = await page.evaluate(() => (globalThis as unknown as PageGlobals).__seen);
      for (const [seq, ack] of acks) lat.push(Math.max(0, (seen[String(seq)] as number) - ack));
      await page.close();
    }
    const firstPaint = median(first);
    const p95 = pct(lat, 0.95);
    console.log(`\nViewer: a session of ${ENTRIES} surface entries at /sessions/<id>, ${RUNS} page loads; ${APPENDS} live appends per load (${lat.length} in all), one per 50 ms; headless Chromium ${browser.context.browser()?.version() ?? ''}; node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'})${quick ? ', --quick' : ''}\n`);
    console.log('| measure | median (min-max) | target |');
    console.log('|---|---|---|');
    console.log(`| navigation -> first entries painted (ms) | ${range(first)} | < 1000 |`);
    console.log(`| navigation -> caught up, newest 500 of ${ENTRIES} rendered (ms) | ${range(rendered)} | |`);
    console.log(`| navigation -> caught up and painted (ms) | ${range(painted)} | |`);
    console.log(`| append ack -> entry in the page, p50 (ms) | ${fmt(median(lat))} | |`);
    console.log(`| append ack -> entry in the page, p95 / max (ms) | ${fmt(p95)} / ${fmt(Math.max(...lat))} | < 200 |`);
    console.log(`HEADLINE ${JSON.stringify({ section: 'Viewer', id: 'viewer-first-paint', label: `first paint of ${ENTRIES} surface entries`, value: `${fmt(firstPaint)} ms`, target: '< 1000 ms', met: firstPaint < 1000 })}`);
    console.log(`HEADLINE ${JSON.stringify({ section: 'Viewer', id: 'viewer-live-append', label: 'live append, ack -> in the page (p95)', value: `${fmt(p95)} ms`, target: '< 200 ms', met: p95 < 200 })}`);
  } finally {
    await browser.close();
    client.close();
    await server.shutdown();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
