/**
 * The session viewer in real headless Chromium (Debian's, via playwright-core) against a real
 * server: the list, a session page, live appends and compactions made through gRPC, the time
 * slider, a token error, and resuming after the server went away. Under CI=true a missing
 * Chromium fails; elsewhere the suite is skipped with the reason.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata } from '@grpc/grpc-js';
import type { Page } from 'playwright-core';
import { call, startTestServer, type TestServer } from '../support/test-server.js';
import { assistantMessage, input, replaceOp, userMessage } from '../support/events.js';
import { DEMO, DEMO_PNG, demoBatches } from '../support/demo-session.js';
import { hasChromium, launchChromium, type TestBrowser } from '../support/browser.js';
import { hashToken } from '../../src/server/auth.js';
import { startServer } from '../../src/main.js';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { credentials } from '@grpc/grpc-js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';

const CI = process.env.CI === 'true';
const WAIT = { timeout: 15_000 };

async function append(c: SessionServiceClient, sessionId: string, events: EventInput[], md = new Metadata()): Promise<number[]> {
  return (await call(c.appendEvents.bind(c), { sessionId, events, idempotencyKey: '' } as never, md) as { seqs: number[] }).seqs;
}

async function create(c: SessionServiceClient, sessionId: string, labels: Record<string, string> = {}, md = new Metadata()): Promise<void> {
  await call(c.createSession.bind(c), { sessionId, labels, strict: false } as never, md);
}

const suite = hasChromium() || CI ? describe : describe.skip;

suite(`viewer in headless Chromium${hasChromium() ? '' : ' (skipped: /usr/bin/chromium missing; run .ci/system-deps)'}`, () => {
  let t: TestServer;
  let b: TestBrowser;
  let base: string;
  beforeAll(async () => {
    expect(hasChromium(), 'chromium missing under CI (run .ci/system-deps)').toBe(true);
    // The viewer under test is the one in web/ now (npm ci builds it too).
    execFileSync('node_modules/.bin/vite', ['build', '--config', 'web/vite.config.ts', '--logLevel', 'error'], { stdio: 'pipe' });
    t = await startTestServer({ webListen: '127.0.0.1:0' });
    base = `http://127.0.0.1:${t.server.webPort}`;
    await create(t.client, 'alpha', { team: 'a' });
    await create(t.client, 'demo', { team: 'b', kind: 'demo' });
    for (const batch of demoBatches()) await append(t.client, 'demo', batch);
    b = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await t?.stop();
  });

  async function page(path: string): Promise<Page> {
    const p = await b.context.newPage();
    await p.goto(base + path);
    return p;
  }

  it('lists the sessions newest first, filters by label, and refreshes live', async () => {
    const p = await page('/');
    await p.waitForSelector('[data-session-id="demo"]', WAIT);
    expect(await p.$$eval('[data-session-id]', (rows) => rows.map((r) => r.getAttribute('data-session-id')))).toEqual(['demo', 'alpha']);
    const demoRow = p.locator('[data-session-id="demo"]');
    expect(await demoRow.locator('[data-field="event-count"]').textContent()).toBe(String(DEMO.head + 1));
    expect(await demoRow.locator('[data-field="surface-length"]').textContent()).toBe(String(DEMO.surface.length));
    await p.fill('#label-filter', 'team=a');
    await expect.poll(() => p.$$eval('[data-session-id]', (rows) => rows.map((r) => r.getAttribute('data-session-id'))), WAIT).toEqual(['alpha']);
    await p.fill('#label-filter', '');
    await create(t.client, 'gamma', { team: 'a' });
    await p.waitForSelector('[data-session-id="gamma"]', WAIT);
    await p.close();
  }, 30_000);

  it('pages the session list (50 a page, older / newer)', async () => {
    for (let i = 0; i < 52; i++) await create(t.client, `bulk-${String(i).padStart(2, '0')}`, { bulk: 'yes' });
    const p = await page('/?labels=bulk%3Dyes');
    await expect.poll(() => p.locator('[data-session-id]').count(), WAIT).toBe(50);
    expect(await p.locator('[data-session-id]').first().getAttribute('data-session-id')).toBe('bulk-51');
    await p.click('#next-page');
    await expect.poll(() => p.$$eval('[data-session-id]', (rows) => rows.map((r) => r.getAttribute('data-session-id'))), WAIT).toEqual(['bulk-01', 'bulk-00']);
    expect(await p.locator('#next-page').isDisabled()).toBe(true);
    await p.click('#prev-page');
    await expect.poll(() => p.locator('[data-session-id]').count(), WAIT).toBe(50);
    // Relabelled into the filter: a session newer than the page joins it on top; one older than
    // the page's oldest belongs to a later page and does not.
    await call(t.client.updateSession.bind(t.client), { sessionId: 'alpha', setLabels: { bulk: 'yes' }, removeLabels: [] } as never, new Metadata());
    await create(t.client, 'bulk-late');
    await call(t.client.updateSession.bind(t.client), { sessionId: 'bulk-late', setLabels: { bulk: 'yes' }, removeLabels: [] } as never, new Metadata());
    await expect.poll(() => p.locator('[data-session-id]').first().getAttribute('data-session-id'), WAIT).toBe('bulk-late');
    expect(await p.locator('[data-session-id="alpha"]').count()).toBe(0);
    expect(await p.locator('[data-session-id]').count()).toBe(51);
    await call(t.client.updateSession.bind(t.client), { sessionId: 'alpha', setLabels: {}, removeLabels: ['bulk'] } as never, new Metadata());
    await call(t.client.deleteSession.bind(t.client), { sessionId: 'bulk-late' } as never, new Metadata());
    await expect.poll(() => p.locator('[data-session-id]').count(), WAIT).toBe(50);
    await p.close();
  }, 30_000);

  it('shows a session page with its model history, each entry marked with its seq', async () => {
    const p = await page('/sessions/demo');
    await p.waitForSelector(`#surface [data-seq="${DEMO.head}"]`, WAIT);
    const seqs = await p.$$eval('#surface > [data-seq]', (els) => els.map((e) => Number(e.getAttribute('data-seq'))));
    expect(seqs).toEqual([...DEMO.surface]);
    expect(await p.locator('#surface > [data-seq="4"]').textContent()).toContain('Which one holds the rules?');
    // Images as images (data: URLs only; nothing is fetched).
    expect(await p.locator('#surface > [data-seq="4"] img.image').getAttribute('src')).toBe(`data:image/png;base64,${DEMO_PNG}`);
    expect(await p.locator('#surface > [data-seq="4"] img.image').evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBe(120);
    // Reasoning is folded; the tool call shows its (pruned) result next to it.
    expect(await p.locator('#surface > [data-seq="5"] details.reasoning').getAttribute('open')).toBeNull();
    expect(await p.locator('#surface > [data-seq="10"] .tool-call [data-result-seq="13"]').textContent()).toContain('[pruned: 900 tokens]');
    expect(await p.locator('#live-status').getAttribute('data-state')).toBe('live');
    // The session's facts include its tool-pairing guard (Session.pairing_guard; on by default).
    expect(await p.locator('dl.facts [data-field="pairing-guard"]').textContent()).toBe('on');
    // The transcript and the raw event log are the other two views.
    await p.click('#tab-transcript');
    await p.waitForSelector('#transcript [data-seq="0"]', WAIT);
    await p.click('#tab-events');
    await p.waitForSelector(`#event-log tr[data-seq="${DEMO.compactionSummary}"]`, WAIT);
    expect(await p.locator(`#event-log tr[data-seq="${DEMO.compactionSummary}"]`).textContent()).toContain('compaction/summary');
    await p.close();
  }, 30_000);

  it('shows a compaction summary and a pruned result as replacements, with what they shadow underneath', async () => {
    const p = await page('/sessions/demo');
    const summary = p.locator(`#surface > [data-seq="${DEMO.compactionReplacement}"]`);
    await summary.waitFor(WAIT);
    expect(await summary.getAttribute('class')).toContain('replacement');
    expect(await summary.locator('.badge').textContent()).toBe('Compaction summary');
    const shadowed = await summary.locator('[data-shadowed="true"]').evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-seq'))));
    expect(shadowed).toEqual([0, 1, 2, 3]);
    // Collapsed to one line each; expandable to the full shadowed messages, struck through.
    expect(await summary.locator('[data-shadowed="true"][data-seq="0"] .shadowed-body').isVisible()).toBe(false);
    await summary.locator('.shadow-group > summary').click();
    expect(await summary.locator('[data-shadowed="true"][data-seq="0"] .shadowed-body').isVisible()).toBe(true);
    expect(await summary.locator('[data-shadowed="true"][data-seq="0"]').textContent()).toContain('What is in src/?');
    const pruned = p.locator(`#surface > [data-seq="${DEMO.pruneReplacement}"]`);
    expect(await pruned.locator('.badge').textContent()).toBe('Pruned tool result');
    expect(await pruned.locator(`[data-shadowed="true"][data-seq="${DEMO.secondToolResult}"]`).textContent()).toContain('ChunkedSurface');
    // Shadowed events are not surface entries.
    expect(await p.locator('#surface > [data-seq="0"]').count()).toBe(0);
    await p.close();
  }, 30_000);

  it('shows each tool result once (with its call), a pruned copy with its sizes, and token/byte sizes per entry and in total', async () => {
    const p = await page('/sessions/demo');
    await p.waitForSelector('#live-status[data-state="live"]', WAIT);
    await p.waitForSelector(`#surface > [data-seq="${DEMO.head}"]`, WAIT);
    // The pruned result (13) is shown inside its call (10); its own entry is one folded line.
    expect(await p.locator('#surface [data-result-seq="13"]').count()).toBe(1);
    expect(await p.locator('#surface > [data-seq="10"] .tool-call [data-result-seq="13"]').count()).toBe(1);
    const folded = p.locator(`#surface > [data-seq="${DEMO.pruneReplacement}"]`);
    expect(await folded.getAttribute('data-folded-into')).toBe('10');
    expect(await folded.locator('.folded-line').textContent()).toContain('shown with its call in #10');
    expect(await folded.locator('.tool-result-inline').count()).toBe(0);
    // The pruned marker: bytes of the original result and of the copy.
    const marker = p.locator('#surface > [data-seq="10"] [data-pruned="true"]');
    const original = '/**\n * The surface: one ordered array of event seqs ...\n */\nexport class ChunkedSurface { /* 400 lines */ }';
    expect(Number(await marker.getAttribute('data-bytes-before'))).toBe(Buffer.byteLength(original));
    expect(Number(await marker.getAttribute('data-bytes-after'))).toBe(Buffer.byteLength('[pruned: 900 tokens]'));
    expect(await marker.textContent()).toMatch(/^pruned: \d+ B → 20 B, saved \d+ B$/);
    // Sizes per entry, and the surface's totals are their sums.
    const sizes = await p.$$eval('#surface > article[data-seq]', (els) => els.map((e) => [Number(e.getAttribute('data-bytes')), Number(e.getAttribute('data-tokens'))]));
    expect(sizes).toHaveLength(DEMO.surface.length);
    for (const [bytes, tokens] of sizes) {
      expect(bytes).toBeGreaterThan(0);
      expect(tokens).toBeGreaterThanOrEqual(8);
    }
    const totals = p.locator('#surface-totals');
    expect(Number(await totals.getAttribute('data-bytes'))).toBe(sizes.reduce((a, [b]) => a + b!, 0));
    expect(Number(await totals.getAttribute('data-tokens'))).toBe(sizes.reduce((a, [, t]) => a + t!, 0));
    expect(await p.locator('#surface > [data-seq="4"] [data-field="size"]').textContent()).toMatch(/^\d+(\.\d)? (B|KiB) · ≈\d+ tok$/);
    await p.close();
  }, 30_000);

  it('opens a session from anywhere on its row in the list', async () => {
    const p = await page('/?labels=kind%3Ddemo'); // demo is older than the 50 of the first page
    await p.waitForSelector('[data-session-id="demo"]', WAIT);
    await p.click('[data-session-id="demo"] [data-field="surface-length"]');
    await p.waitForURL(/\/sessions\/demo$/, WAIT);
    await p.waitForSelector(`#surface > [data-seq="${DEMO.head}"]`, WAIT);
    await p.close();
  }, 30_000);

  /** Counts the page's RPC requests by method name (Connect puts it at the end of the URL path). */
  function rpcCounter(p: Page): Record<string, number> {
    const counts: Record<string, number> = {};
    p.on('request', (r) => {
      const m = /\/palimpsest\.v1\.SessionService\/(\w+)$/.exec(new URL(r.url()).pathname);
      if (m) counts[m[1]!] = (counts[m[1]!] ?? 0) + 1;
    });
    return counts;
  }
  const rowIds = (p: Page) => p.$$eval('[data-session-id]', (rows) => rows.map((r) => r.getAttribute('data-session-id')));

  it('is live from the session feed: created, appended, relabelled and deleted sessions change in place, listed once', async () => {
    await create(t.client, 'live-a', { live: 'yes' });
    const p = await b.context.newPage();
    const counts = rpcCounter(p);
    await p.goto(`${base}/?labels=live%3Dyes`);
    await p.waitForSelector('#list-status[data-state="live"]', WAIT);
    await p.waitForSelector('[data-session-id="live-a"]', WAIT);
    // An empty session: its last activity is its creation, it has no turns and 0 surface tokens.
    const a = p.locator('[data-session-id="live-a"]');
    await expect.poll(() => a.locator('[data-field="surface-tokens"]').getAttribute('data-known'), WAIT).toBe('true');
    expect(await a.locator('[data-field="surface-tokens"]').textContent()).toBe('0');
    expect(await a.locator('[data-field="status"]').getAttribute('data-status')).toBe('no-turns');
    expect(Number(await a.locator('[data-field="last-activity"]').getAttribute('data-time'))).toBeGreaterThan(Date.now() - 60_000);

    await create(t.client, 'live-b', { live: 'yes' });
    await expect.poll(() => rowIds(p), WAIT).toEqual(['live-b', 'live-a']);
    const bRow = p.locator('[data-session-id="live-b"]');
    await append(t.client, 'live-b', [userMessage('lb0', 'hello'), userMessage('lb1', 'there')]);
    await expect.poll(() => bRow.locator('[data-field="event-count"]').textContent(), WAIT).toBe('2');
    expect(await bRow.locator('[data-field="surface-length"]').textContent()).toBe('2');
    // The tokens are the server's (GetSession), fetched again after the append.
    const got = await call(t.client.getSession.bind(t.client), { sessionId: 'live-b' } as never, new Metadata()) as { session: { surfaceTokens: number } };
    expect(got.session.surfaceTokens).toBeGreaterThan(0);
    await expect.poll(() => bRow.locator('[data-field="surface-tokens"]').textContent(), WAIT).toBe(String(got.session.surfaceTokens));
    expect(await bRow.locator('[data-field="last-activity"]').textContent()).toMatch(/^(just now|\d+s ago)$/);

    // A label change that leaves the selection removes the row; one that enters it adds it.
    await call(t.client.updateSession.bind(t.client), { sessionId: 'live-a', setLabels: {}, removeLabels: ['live'] } as never, new Metadata());
    await expect.poll(() => rowIds(p), WAIT).toEqual(['live-b']);
    await call(t.client.updateSession.bind(t.client), { sessionId: 'live-a', setLabels: { live: 'yes', extra: '1' }, removeLabels: [] } as never, new Metadata());
    await expect.poll(() => rowIds(p), WAIT).toEqual(['live-b', 'live-a']);
    expect(await a.textContent()).toContain('extra=1');

    // Changes committed together (the list asks for batches: they may come in one message) each update their row.
    await Promise.all([append(t.client, 'live-a', [userMessage('la0', 'one')]), append(t.client, 'live-b', [userMessage('lb2', 'three')])]);
    await expect.poll(() => a.locator('[data-field="event-count"]').textContent(), WAIT).toBe('1');
    await expect.poll(() => bRow.locator('[data-field="event-count"]').textContent(), WAIT).toBe('3');

    await call(t.client.deleteSession.bind(t.client), { sessionId: 'live-b' } as never, new Metadata());
    await expect.poll(() => rowIds(p), WAIT).toEqual(['live-a']);
    // One ListSessions and one SubscribeSessions for all of it: no polling, no reload.
    expect(counts['ListSessions']).toBe(1);
    expect(counts['SubscribeSessions']).toBe(1);
    await p.close();
  }, 45_000);

  it('shows each session\'s status: open turn, needs repair, and interrupted after RepairSession', async () => {
    const turn = [input('turn/start', { turn: 1 }), userMessage('s-u', 'do it'), input('step/start', { turn: 1, step: 1 })];
    await create(t.client, 'st-open', { st: 'yes' });
    await append(t.client, 'st-open', turn);
    await create(t.client, 'st-repair', { st: 'yes' });
    await append(t.client, 'st-repair', [...turn, assistantMessage('s-a', 'reading', [], [{ id: 'call-1', name: 'read' }]),
      input('tool/call', { turn: 1, step: 1, callId: 'call-1', name: 'read', arguments: '{}' })]);
    await create(t.client, 'st-done', { st: 'yes' });
    await append(t.client, 'st-done', [...turn, input('step/end', { turn: 1, step: 1 }), input('turn/end', { turn: 1, reason: { kind: 'completed' } })]);
    const p = await b.context.newPage();
    const counts = rpcCounter(p);
    await p.goto(`${base}/?labels=st%3Dyes`);
    const statusOf = (id: string) => p.locator(`[data-session-id="${id}"] [data-field="status"]`);
    await expect.poll(() => statusOf('st-open').getAttribute('data-status'), WAIT).toBe('open-turn');
    expect(await statusOf('st-open').textContent()).toBe('open turn');
    await expect.poll(() => statusOf('st-repair').getAttribute('data-status'), WAIT).toBe('needs-repair');
    expect(await statusOf('st-repair').textContent()).toBe('needs repair');
    await expect.poll(() => statusOf('st-done').getAttribute('data-status'), WAIT).toBe('idle');
    // RepairSession closes the turn as interrupted; the row follows through the feed.
    await call(t.client.repairSession.bind(t.client), { sessionId: 'st-repair' } as never, new Metadata());
    await expect.poll(() => statusOf('st-repair').getAttribute('data-status'), WAIT).toBe('interrupted');
    expect(await statusOf('st-repair').textContent()).toBe('interrupted');
    // The agent ends the open turn: the status follows too.
    await append(t.client, 'st-open', [input('step/end', { turn: 1, step: 1 }), input('turn/end', { turn: 1, reason: { kind: 'completed' } })]);
    await expect.poll(() => statusOf('st-open').getAttribute('data-status'), WAIT).toBe('idle');
    expect(counts['ListSessions']).toBe(1);
    await p.close();
  }, 45_000);

  it('filters the event log by type and shows each chunk as one compact line', async () => {
    await create(t.client, 'chunks');
    await append(t.client, 'chunks', [
      userMessage('c0', 'hi'),
      input('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'block-start', index: 0, blockType: 'text' } }),
      input('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'Let me' } }),
      input('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'block-end', index: 0, block: { type: 'text', text: 'Let me' } } }),
    ]);
    const p = await page('/sessions/chunks');
    await p.waitForSelector('#live-status[data-state="live"]', WAIT);
    await p.click('#tab-events');
    await p.waitForSelector('#event-log tr[data-seq="3"]', WAIT);
    expect(await p.locator('#event-log tr[data-seq="2"]').getAttribute('data-chunk')).toBe('true');
    expect(await p.locator('#event-log tr[data-seq="2"] .chunk-line').textContent()).toBe('text-delta[0] "Let me"');
    expect(await p.locator('#event-log tr[data-seq="1"] .chunk-line').textContent()).toBe('block-start[0] text');
    expect(await p.locator('#event-log tr[data-seq="0"]').getAttribute('data-chunk')).toBeNull();
    await p.selectOption('#event-type-filter', 'user/message');
    await expect.poll(() => p.$$eval('#event-log tbody tr[data-seq]', (rows) => rows.map((r) => r.getAttribute('data-seq'))), WAIT).toEqual(['0']);
    await p.selectOption('#event-type-filter', 'assistant/chunk');
    await expect.poll(() => p.$$eval('#event-log tbody tr[data-seq]', (rows) => rows.map((r) => r.getAttribute('data-seq'))), WAIT).toEqual(['1', '2', '3']);
    await p.close();
  }, 30_000);

  it('opens a long session scrolled to its newest entries', async () => {
    await create(t.client, 'tall');
    await append(t.client, 'tall', Array.from({ length: 80 }, (_, i) => userMessage(`t${i}`, `message ${i}`)));
    const p = await page('/sessions/tall');
    await p.waitForSelector('#surface[data-scrolled="newest"]', { ...WAIT, state: 'attached' });
    const at = await p.evaluate(() => {
      const w = globalThis as unknown as { scrollY: number; innerHeight: number; document: { body: { scrollHeight: number } } };
      return { bottom: w.scrollY + w.innerHeight, height: w.document.body.scrollHeight, y: w.scrollY };
    });
    expect(at.y).toBeGreaterThan(0);
    expect(at.bottom).toBeGreaterThanOrEqual(at.height - 100);
    expect(await p.locator('#surface > [data-seq="79"]').isVisible()).toBe(true);
    await p.close();
  }, 30_000);

  it('searches events from the list (debounced), shows hits with the match marked, and opens one highlighted at its seq', async () => {
    await create(t.client, 'findable', { search: 'yes' });
    // The hit is deep in a long session (the page opens at the newest entries otherwise); its
    // text has markup in it, which must show as text.
    const msgs = Array.from({ length: 60 }, (_, i) => userMessage(`f${i}`, i === 20 ? 'the <b>zanzibar</b> ledger is in vault 9' : `filler line ${i}`));
    await append(t.client, 'findable', msgs);
    const p = await page('/');
    await p.waitForSelector('[data-session-id="findable"]', WAIT);
    const searches: string[] = [];
    p.on('request', (r) => {
      if (r.url().endsWith('/palimpsest.v1.SessionService/SearchEvents')) searches.push(r.url());
    });
    await p.locator('#event-search').pressSequentially('zanzibar');
    await p.waitForSelector('#search-results[data-state="results"]', WAIT);
    // Typing asks once the typing stopped, not once per key.
    expect(searches.length).toBeLessThan('zanzibar'.length);
    const hit = p.locator('#search-hits a.search-hit');
    expect(await hit.count()).toBe(1);
    expect([await hit.getAttribute('data-session-id'), await hit.getAttribute('data-seq')]).toEqual(['findable', '20']);
    expect(await hit.locator('.hit-type').textContent()).toBe('user/message');
    expect(await hit.locator('mark').allTextContents()).toEqual(['zanzibar']);
    expect(await hit.locator('.hit-snippet').textContent()).toBe('the <b>zanzibar</b> ledger is in vault 9');
    expect(await hit.locator('.hit-snippet b').count()).toBe(0);
    expect(new URL(p.url()).searchParams.get('q')).toBe('zanzibar');
    // The keyboard reaches the hit from the box.
    await p.locator('#event-search').press('ArrowDown');
    expect(await hit.evaluate((el) => el === (el.ownerDocument as unknown as { activeElement: unknown }).activeElement)).toBe(true);
    await hit.click();
    await p.waitForURL(/\/sessions\/findable\?seq=20$/, WAIT);
    const target = p.locator('#surface [data-seq="20"]');
    await p.waitForSelector('#surface[data-scrolled="target"]', { ...WAIT, state: 'attached' });
    expect(await target.getAttribute('class')).toContain('search-target');
    expect(await target.isVisible()).toBe(true);
    const box = await target.boundingBox();
    expect(box && box.y >= 0 && box.y + box.height <= 900).toBe(true);
    expect(await p.locator('#surface .search-target').count()).toBe(1);
    // Back on the list, the query is still there; an unknown word is the empty state, and a
    // malformed query shows its position.
    await p.goBack();
    await p.waitForSelector('#search-results[data-state="results"]', WAIT);
    expect(await p.inputValue('#event-search')).toBe('zanzibar');
    await p.fill('#event-search', 'zanzibar quokkaless');
    await p.waitForSelector('#search-results[data-state="empty"]', WAIT);
    expect(await p.locator('#search-summary').textContent()).toBe('No events match zanzibar quokkaless.');
    await p.fill('#event-search', 'zanzibar fo*o');
    await p.waitForSelector('#search-results[data-state="error"]', WAIT);
    expect(await p.locator('#search-summary .reason').textContent()).toBe('SEARCH_QUERY_INVALID');
    expect(await p.locator('#search-summary .error-at').getAttribute('data-position')).toBe('11');
    expect(await p.locator('#search-summary .error-at').textContent()).toBe('*');
    expect(await p.locator('#search-summary .message').textContent()).toContain('position 11');
    await p.fill('#event-search', '');
    await p.waitForSelector('#search-results[data-state="idle"]', { ...WAIT, state: 'attached' });
    // A new query aborts the one in flight: the first answer is held back by the test, the
    // second query's results show, and the held request is cancelled by the page.
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => { release = r; });
    const seen: string[] = [];
    await p.route('**/palimpsest.v1.SessionService/SearchEvents', async (route) => {
      seen.push(route.request().url());
      if (seen.length === 1) await held;
      await route.continue().catch(() => undefined);
    });
    const cancelled = p.waitForEvent('requestfailed', { predicate: (r) => r.url().endsWith('/SearchEvents'), ...WAIT });
    await p.fill('#event-search', 'zanzibar');
    await expect.poll(() => seen.length, WAIT).toBe(1);
    await p.fill('#event-search', 'vault');
    expect((await cancelled).failure()?.errorText).toMatch(/ABORTED|cancel/i);
    release();
    await p.waitForSelector('#search-results[data-state="results"]', WAIT);
    expect(await p.locator('#search-hits mark').allTextContents()).toEqual(['vault']);
    await p.close();
  }, 30_000);

  it('marks turn boundaries on the time slider and steps by turn', async () => {
    await create(t.client, 'turns');
    const turn = (n: number): EventInput[] => [input('turn/start', { turn: n }), userMessage(`q${n}`, `question ${n}`), input('turn/end', { turn: n, reason: { kind: 'completed' } })];
    await append(t.client, 'turns', [...turn(1), ...turn(2), ...turn(3)]);
    const p = await page('/sessions/turns');
    await p.waitForSelector('#live-status[data-state="live"]', WAIT);
    await p.waitForSelector('#time-slider[data-turn-starts="0,3,6"]', { ...WAIT, state: 'attached' });
    expect(await p.$$eval('#turn-marks option', (os) => os.map((o) => o.getAttribute('value')))).toEqual(['0', '3', '6']);
    expect(await p.locator('#time-slider').getAttribute('list')).toBe('turn-marks');
    const shown = async (): Promise<string | null> => {
      await p.waitForFunction(() => (globalThis as unknown as { document: { getElementById(i: string): { dataset: { mode?: string } } | null } }).document.getElementById('surface')?.dataset.mode !== undefined);
      return p.locator('#surface').getAttribute('data-as-of');
    };
    await p.waitForSelector('#time-prev-turn:not([disabled])', WAIT);
    await p.click('#time-prev-turn');
    await p.waitForSelector('#surface[data-as-of="6"]', { ...WAIT, state: 'attached' });
    await p.click('#time-prev-turn');
    await p.waitForSelector('#surface[data-as-of="3"]', { ...WAIT, state: 'attached' });
    expect(await p.$$eval('#surface > article[data-seq]', (els) => els.map((e) => e.getAttribute('data-seq')))).toEqual(['1']);
    await p.click('#time-next-turn');
    await p.waitForSelector('#surface[data-as-of="6"]', { ...WAIT, state: 'attached' });
    await p.click('#time-next-turn');
    await p.waitForSelector('#surface[data-mode="live"]', { ...WAIT, state: 'attached' });
    expect(await shown()).toBeNull();
    // PageUp on the slider steps back a turn too.
    await p.focus('#time-slider');
    await p.keyboard.press('PageUp');
    await p.waitForSelector('#surface[data-as-of="6"]', { ...WAIT, state: 'attached' });
    await p.close();
  }, 30_000);

  it('follows appends and a compaction made through gRPC live', async () => {
    await create(t.client, 'live');
    await append(t.client, 'live', [userMessage('l0', 'first question')]);
    const p = await page('/sessions/live');
    await p.waitForSelector('#surface > [data-seq="0"]', WAIT);
    await p.waitForSelector('#live-status[data-state="live"]', WAIT);
    const [seq] = await append(t.client, 'live', [userMessage('l1', 'a live message')]);
    await p.waitForSelector(`#surface > [data-seq="${seq}"]`, WAIT);
    expect(await p.locator(`#surface > [data-seq="${seq}"]`).textContent()).toContain('a live message');
    // A compaction of seqs 0..1: the replacement takes their place, and they show underneath.
    await append(t.client, 'live', [
      input('compaction/start', { compactionId: 'k', turn: null }),
      input('compaction/summary', { compactionId: 'k', summary: [{ type: 'text', text: 's' }], shadowedRange: { start: 0, end: 1 }, shadowedSeqs: [0, 1], shadowedTokenCount: 10, provider: 'p', model: 'm' }),
      input('user/message', { id: 'k', role: 'user', content: [{ type: 'text', text: 'live summary' }], source: { kind: 'plugin', plugin: 'compact', compactionId: 'k' } },
        { surfaceOp: replaceOp(0, 1), sourceEventSeqs: { seqs: [2, 3, 0, 1] } }),
      input('compaction/end', { compactionId: 'k', turn: null }),
    ]);
    await p.waitForSelector('#surface > [data-seq="4"] [data-shadowed="true"][data-seq="1"]', { ...WAIT, state: 'attached' });
    expect(await p.$$eval('#surface > [data-seq]', (els) => els.map((e) => e.getAttribute('data-seq')))).toEqual(['4']);
    expect(await p.locator('#surface > [data-seq="4"] [data-shadowed="true"][data-seq="0"]').count()).toBe(1);
    await p.close();
  }, 30_000);

  it('pages a long surface: the newest 500 entries, earlier ones on demand', async () => {
    await create(t.client, 'long');
    await append(t.client, 'long', Array.from({ length: 520 }, (_, i) => userMessage(`m${i}`, `message ${i}`)));
    const p = await page('/sessions/long');
    await p.waitForSelector('#live-status[data-state="live"]', WAIT);
    await p.waitForSelector('#surface > [data-seq="519"]', { ...WAIT, state: 'attached' });
    expect(await p.locator('#surface > article[data-seq]').count()).toBe(500);
    expect(await p.locator('#surface-earlier').textContent()).toContain('20 earlier entries not shown');
    expect(await p.locator('#surface > [data-seq="19"]').count()).toBe(0);
    await p.click('#show-all');
    expect(await p.locator('#surface > article[data-seq]').count()).toBe(520);
    expect(await p.$$eval('#surface > article[data-seq]', (els) => els.slice(0, 3).map((e) => e.getAttribute('data-seq')))).toEqual(['0', '1', '2']);
    expect(await p.locator('#surface-earlier').count()).toBe(0);
    await p.close();
  }, 30_000);

  it('goes back in time with the slider (as_of_seq) and returns to now', async () => {
    const p = await page('/sessions/demo');
    await p.waitForSelector(`#surface > [data-seq="${DEMO.head}"]`, WAIT);
    await expect.poll(() => p.getAttribute('#time-slider', 'max'), WAIT).toBe(String(DEMO.head));
    const slide = (v: number) => p.$eval('#time-slider', (el, value) => {
      const s = el as unknown as { value: string; dispatchEvent(e: Event): boolean };
      s.value = String(value);
      s.dispatchEvent(new Event('input', { bubbles: true }));
    }, v);
    await slide(5);
    await p.waitForSelector('#surface[data-mode="as-of"][data-as-of="5"]', WAIT);
    expect(await p.$$eval('#surface > [data-seq]', (els) => els.map((e) => Number(e.getAttribute('data-seq'))))).toEqual([0, 1, 2, 3, 4, 5]);
    expect(await p.locator('#as-of-banner').isVisible()).toBe(true);
    await slide(DEMO.compactionReplacement);
    await p.waitForSelector(`#surface[data-as-of="${DEMO.compactionReplacement}"]`, WAIT);
    expect(await p.$$eval('#surface > [data-seq]', (els) => els.map((e) => Number(e.getAttribute('data-seq'))))).toEqual([8, 4, 5]);
    await p.click('#time-now');
    await p.waitForSelector('#surface[data-mode="live"]', WAIT);
    expect(await p.$$eval('#surface > [data-seq]', (els) => els.map((e) => Number(e.getAttribute('data-seq'))))).toEqual([...DEMO.surface]);
    await p.close();
  }, 30_000);

  it('resumes from its last cursor after the server went away', async () => {
    // A second server on a SQLite file whose web port is reused by its successor.
    const dir = mkdtempSync(join(tmpdir(), 'palimpsest-viewer-'));
    const db = join(dir, 'v.db');
    let s = await startServer({ listen: '127.0.0.1:0', webListen: '127.0.0.1:0', db, logLevel: 'silent', shutdownGraceMs: 200 });
    const port = s.webPort!;
    let c = new SessionServiceClient(s.address, credentials.createInsecure());
    try {
      await create(c, 'r');
      await append(c, 'r', [userMessage('r0', 'before the restart')]);
      const p = await b.context.newPage();
      await p.goto(`http://127.0.0.1:${port}/sessions/r`);
      await p.waitForSelector('#live-status[data-state="live"]', WAIT);
      // The session list follows the feed: it resumes after its last position, without listing again.
      const list = await b.context.newPage();
      const counts = rpcCounter(list);
      await list.goto(`http://127.0.0.1:${port}/`);
      await list.waitForSelector('#list-status[data-state="live"]', WAIT);
      await list.waitForSelector('[data-session-id="r"]', WAIT);
      c.close();
      await s.shutdown();
      await p.waitForSelector('#live-status[data-state="reconnecting"]', WAIT);
      await list.waitForSelector('#list-status[data-state="reconnecting"]', WAIT);
      s = await startServer({ listen: '127.0.0.1:0', webListen: `127.0.0.1:${port}`, db, logLevel: 'silent', shutdownGraceMs: 200 });
      c = new SessionServiceClient(s.address, credentials.createInsecure());
      // Written before the list reconnects (most likely): the resume from the position brings it.
      await create(c, 'r-after');
      await append(c, 'r', [userMessage('r1', 'after the restart')]);
      await p.waitForSelector('#surface > [data-seq="1"]', WAIT);
      expect(await p.$$eval('#surface > [data-seq]', (els) => els.map((e) => e.getAttribute('data-seq')))).toEqual(['0', '1']);
      await expect.poll(() => rowIds(list), WAIT).toEqual(['r-after', 'r']);
      await expect.poll(() => list.locator('[data-session-id="r"] [data-field="event-count"]').textContent(), WAIT).toBe('2');
      expect(counts['ListSessions']).toBe(1);
      expect(counts['SubscribeSessions']).toBeGreaterThanOrEqual(2);
      await list.close();
      await p.close();
    } finally {
      c.close();
      await s.shutdown();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 45_000);

  it('shows a token error in words, with the reason, and works once a token is given', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'palimpsest-viewer-auth-'));
    const tokens = join(dir, 'tokens.json');
    writeFileSync(tokens, JSON.stringify({ tokens: [{ name: 'viewer', sha256: hashToken('viewer-token-0123456789'), tenant: 't', permissions: ['read', 'append'] }] }));
    const a = await startTestServer({ webListen: '127.0.0.1:0', authTokens: tokens });
    try {
      const md = new Metadata();
      md.set('authorization', 'Bearer viewer-token-0123456789');
      await create(a.client, 'secret', {}, md);
      const p = await b.context.newPage();
      await p.goto(`http://127.0.0.1:${a.server.webPort}/`);
      await p.waitForSelector('#error:not([hidden]) [data-reason="UNAUTHENTICATED"]', WAIT);
      const text = await p.locator('#error').textContent();
      expect(text).toContain('Unauthenticated');
      expect(text).toContain('missing bearer token');
      expect(await p.locator('[data-session-id]').count()).toBe(0);
      await p.fill('#token', 'wrong-token');
      await p.click('#token-form button[type="submit"]');
      await expect.poll(() => p.locator('#error .message').textContent(), WAIT).toContain('not valid');
      await p.fill('#token', 'viewer-token-0123456789');
      await p.click('#token-form button[type="submit"]');
      await p.waitForSelector('[data-session-id="secret"]', WAIT);
      expect(await p.locator('#error').isHidden()).toBe(true);
      await p.close();
    } finally {
      await a.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
