/**
 * Regenerates docs/viewer-session.png: the session page of the demo session (a tool round,
 * reasoning, an image, a compaction and a pruned result) in headless Chromium, with the
 * compaction's shadowed events expanded.
 *
 *   npx tsx scripts/viewer-screenshot.ts [OUT.png]
 */
import { execFileSync } from 'node:child_process';
import { Metadata } from '@grpc/grpc-js';
import { call, startTestServer } from '../test/support/test-server.js';
import { DEMO, demoBatches } from '../test/support/demo-session.js';
import { launchChromium } from '../test/support/browser.js';

const out = process.argv[2] ?? 'docs/viewer-session.png';
execFileSync('node_modules/.bin/vite', ['build', '--config', 'web/vite.config.ts', '--logLevel', 'error'], { stdio: 'inherit' });
const t = await startTestServer({ webListen: '127.0.0.1:0' });
const b = await launchChromium();
try {
  const c = t.client;
  await call(c.createSession.bind(c), { sessionId: 'agent-run-42', labels: { agent: 'coder', env: 'dev' }, strict: false } as never, new Metadata());
  for (const batch of demoBatches()) await call(c.appendEvents.bind(c), { sessionId: 'agent-run-42', events: batch, idempotencyKey: '' } as never, new Metadata());
  const p = await b.context.newPage();
  await p.goto(`http://127.0.0.1:${t.server.webPort}/sessions/agent-run-42`);
  await p.waitForSelector(`#surface > [data-seq="${DEMO.head}"]`);
  await p.waitForSelector('#live-status[data-state="live"]');
  await p.click(`[data-replacement="${DEMO.compactionReplacement}"] > summary`);
  await p.click(`[data-replacement="${DEMO.pruneReplacement}"] > summary`);
  await p.click(`#surface > [data-seq="5"] details.reasoning > summary`);
  await p.evaluate(() => (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0));
  // Entries use content-visibility: auto (skipped until near the viewport): make the viewport the
  // page's height so the whole page is painted.
  const height = await p.evaluate(() => (globalThis as unknown as { document: { body: { scrollHeight: number } } }).document.body.scrollHeight);
  await p.setViewportSize({ width: 1280, height });
  await p.waitForTimeout(200);
  await p.screenshot({ path: out, fullPage: true });
  console.log(`wrote ${out}`);
} finally {
  await b.close();
  await t.stop();
}
