/**
 * Regenerates docs/viewer-list.png: the live session list (issue #35) in headless Chromium, with
 * sessions in each status: an idle one (the demo session), a turn in progress, one that needs
 * repair (a tool call without a result), one interrupted (repaired) and an empty one. The last
 * append happens while the page is open, so the row shows what the feed brought.
 *
 *   npx tsx scripts/viewer-list-screenshot.ts [OUT.png]
 */
import { execFileSync } from 'node:child_process';
import { Metadata } from '@grpc/grpc-js';
import { call, startTestServer } from '../test/support/test-server.js';
import { demoBatches } from '../test/support/demo-session.js';
import { assistantMessage, input, userMessage } from '../test/support/events.js';
import { launchChromium } from '../test/support/browser.js';
import type { EventInput } from '../gen/palimpsest/v1/event.js';

const out = process.argv[2] ?? 'docs/viewer-list.png';
execFileSync('node_modules/.bin/vite', ['build', '--config', 'web/vite.config.ts', '--logLevel', 'error'], { stdio: 'inherit' });
const t = await startTestServer({ webListen: '127.0.0.1:0' });
const b = await launchChromium();
try {
  const c = t.client;
  const md = new Metadata();
  const create = (sessionId: string, labels: Record<string, string>) => call(c.createSession.bind(c), { sessionId, labels, strict: false } as never, md);
  const append = (sessionId: string, events: EventInput[]) => call(c.appendEvents.bind(c), { sessionId, events, idempotencyKey: '' } as never, md);
  const turn = (n: number, text: string): EventInput[] => [input('turn/start', { turn: n }), userMessage(`u${n}`, text), input('step/start', { turn: n, step: 1 })];

  await create('agent-run-40', { agent: 'coder', env: 'prod' });
  await append('agent-run-40', [...turn(1, 'Deploy the fix'), assistantMessage('a1', 'Running the deploy.', [], [{ id: 'call-9', name: 'deploy' }]),
    input('tool/call', { turn: 1, step: 1, callId: 'call-9', name: 'deploy', arguments: '{}' })]);
  await call(c.repairSession.bind(c), { sessionId: 'agent-run-40' } as never, md);
  await create('agent-run-41', { agent: 'coder', env: 'dev' });
  await append('agent-run-41', [...turn(1, 'Read the config'), assistantMessage('a1', 'Reading it.', [], [{ id: 'call-1', name: 'read' }]),
    input('tool/call', { turn: 1, step: 1, callId: 'call-1', name: 'read', arguments: '{}' })]);
  await create('agent-run-42', { agent: 'coder', env: 'dev' });
  for (const batch of demoBatches()) await append('agent-run-42', batch);
  await create('agent-run-43', { agent: 'reviewer', env: 'dev' });
  await append('agent-run-43', turn(1, 'Review the pull request'));
  const p = await b.context.newPage();
  await p.setViewportSize({ width: 1280, height: 360 });
  await p.goto(`http://127.0.0.1:${t.server.webPort}/`);
  await p.waitForSelector('#list-status[data-state="live"]');
  await p.waitForSelector('[data-session-id="agent-run-43"]');
  // Written while the page is open: a new session, and progress in the open turn.
  await create('scratch', { env: 'dev' });
  await append('agent-run-43', [assistantMessage('a1', 'Looking at the diff.', [])]);
  await p.waitForSelector('[data-session-id="scratch"]');
  await p.waitForFunction(() => {
    const d = (globalThis as unknown as { document: { querySelectorAll(s: string): ArrayLike<{ getAttribute(a: string): string | null }> } }).document;
    return Array.from(d.querySelectorAll('[data-field="status"]')).every((e) => e.getAttribute('data-status') !== '')
      && Array.from(d.querySelectorAll('[data-field="surface-tokens"]')).every((e) => e.getAttribute('data-known') === 'true');
  });
  await p.screenshot({ path: out, fullPage: true });
  console.log(`wrote ${out}`);
} finally {
  await b.close();
  await t.stop();
}
