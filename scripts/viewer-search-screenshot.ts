/**
 * Regenerates docs/viewer-search.png: the session list's search box (issue #40) in headless
 * Chromium, with hits from several sessions (the match marked in each snippet). With a second
 * argument it also writes the session page a hit opens (the event highlighted at its seq).
 *
 *   npx tsx scripts/viewer-search-screenshot.ts [OUT.png] [TARGET.png]
 */
import { execFileSync } from 'node:child_process';
import { Metadata } from '@grpc/grpc-js';
import { call, startTestServer } from '../test/support/test-server.js';
import { demoBatches } from '../test/support/demo-session.js';
import { assistantMessage, input, toolResult, userMessage } from '../test/support/events.js';
import { launchChromium } from '../test/support/browser.js';
import type { EventInput } from '../gen/palimpsest/v1/event.js';

const out = process.argv[2] ?? 'docs/viewer-search.png';
const targetOut = process.argv[3];
execFileSync('node_modules/.bin/vite', ['build', '--config', 'web/vite.config.ts', '--logLevel', 'error'], { stdio: 'inherit' });
const t = await startTestServer({ webListen: '127.0.0.1:0' });
const b = await launchChromium();
try {
  const c = t.client;
  const md = new Metadata();
  const create = (sessionId: string, labels: Record<string, string>) => call(c.createSession.bind(c), { sessionId, labels, strict: false } as never, md);
  const append = (sessionId: string, events: EventInput[]) => call(c.appendEvents.bind(c), { sessionId, events, idempotencyKey: '' } as never, md);

  await create('billing-agent-7', { agent: 'billing', env: 'prod' });
  await append('billing-agent-7', [
    userMessage('u1', 'Customer says invoice 4711 was charged twice. Can you check?'),
    assistantMessage('a1', 'Looking up invoice 4711 in the ledger.', [0], [{ id: 'c1', name: 'ledger_lookup' }]),
    toolResult('r1', 'c1', '{"invoice": 4711, "charges": [{"id": "ch_1", "amount": 120.0}, {"id": "ch_2", "amount": 120.0}]}', 1),
    assistantMessage('a2', 'Invoice 4711 has two identical charges (ch_1 and ch_2); refunding ch_2.', [2], [{ id: 'c2', name: 'refund' }]),
    toolResult('r2', 'c2', 'refund failed: invoice 4711 is locked by the nightly export', 3),
  ]);
  await create('support-triage', { agent: 'triage', env: 'prod' });
  await append('support-triage', [
    userMessage('u1', 'Ticket #982: "I was billed twice for invoice 4711, please help"'),
    assistantMessage('a1', 'Routing to billing: duplicate charge on invoice 4711.', [0]),
  ]);
  await create('agent-run-42', { agent: 'coder', env: 'dev' });
  for (const batch of demoBatches()) await append('agent-run-42', batch);
  await append('agent-run-42', [input('turn/start', { turn: 3 }), userMessage('u3', 'Unrelated: does the export job touch invoice 4711?')]);

  const p = await b.context.newPage();
  await p.setViewportSize({ width: 1280, height: 780 });
  await p.goto(`http://127.0.0.1:${t.server.webPort}/`);
  await p.waitForSelector('#list-status[data-state="live"]');
  await p.locator('#event-search').pressSequentially('"invoice 4711"');
  await p.waitForSelector('#search-results[data-state="results"]');
  await p.locator('#event-search').blur();
  await p.screenshot({ path: out });
  console.log(`wrote ${out}`);
  if (targetOut) {
    await p.locator('#search-hits a.search-hit[data-session-id="billing-agent-7"][data-seq="2"]').click();
    await p.waitForSelector('#surface[data-scrolled="target"]', { state: 'attached' });
    await p.screenshot({ path: targetOut });
    console.log(`wrote ${targetOut}`);
  }
} finally {
  await b.close();
  await t.stop();
}
