/**
 * The compaction metrics and the sessions-per-tenant gauge (issue #41) of a real server, read from
 * GET /metrics: a prune of five tool results and one compaction are counted with the events they
 * took off the surface and the tokens they saved; an ordinary append counts nothing; the tenant
 * gauge follows creates and deletes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ANONYMOUS } from '../../src/app/session-service.js';
import { CompactionService } from '../../src/app/compaction.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import { toolResult, user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
let t: TestServer;
beforeAll(async () => { t = await startTestServer({ metricsListen: '127.0.0.1:0' }); });
afterAll(async () => { await t.stop(); });

async function scrape(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${t.server.metricsPort}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('compaction metrics', () => {
  it('counts prunes and compactions with events shadowed and tokens saved; sessions per tenant', async () => {
    const app = t.server.app;
    const svc = new CompactionService(app);
    const before = await scrape();
    expect(sample(before, 'palimpsest_compactions_total{kind="prune"}')).toBeUndefined();
    await app.createSession(ctx, { id: 'm' });
    await app.createSession(ctx, { id: 'other' });
    expect(sample(await scrape(), 'palimpsest_tenant_sessions{tenant=""}')).toBe(2);
    // The search index follower's lag is exported (nothing searchable appended yet).
    expect(sample(await scrape(), 'palimpsest_search_index_lag_events')).toBe(0);
    expect(sample(await scrape(), 'palimpsest_search_index_lag_seconds')).toBeLessThan(60);
    const round = (i: number): CandidateEvent[] => [
      user(`q${i} ${'x'.repeat(40)}`),
      { type: 'assistant/message', data: { turn: 1, step: 1, message: { id: `a${i}`, role: 'assistant', content: [{ type: 'tool-call', id: `k${i}`, name: 'read', arguments: '{}' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append' },
      toolResult(`k${i}`, 'y'.repeat(12_000)),
    ];
    for (let i = 0; i < 6; i++) await app.append(ctx, 'm', round(i));
    const pruned = await svc.prune(ctx, 'm', { minBytes: 100, keepRecent: 1 });
    expect(pruned.pruned.length).toBe(5);
    let text = await scrape();
    expect(sample(text, 'palimpsest_compactions_total{kind="prune"}')).toBe(5);
    expect(sample(text, 'palimpsest_compaction_shadowed_events_sum{kind="prune"}')).toBe(5);
    // Each 12,000-character result was cut to about 5,000: thousands of tokens saved in all, none negative.
    const saved = sample(text, 'palimpsest_compaction_tokens_saved_sum{kind="prune"}') as number;
    expect(saved).toBeGreaterThan(5 * 1000);
    expect(sample(text, 'palimpsest_compaction_tokens_saved_bucket{le="0",kind="prune"}')).toBe(0);

    const plan = await svc.plan(ctx, 'm', { keepTokens: 30 });
    await svc.compact(ctx, 'm', { start: plan.start as number, end: plan.end as number, expectedLastSeq: plan.expectedLastSeq, summary: [{ type: 'text', text: 's' }], provider: 'p', model: 'm' });
    text = await scrape();
    expect(sample(text, 'palimpsest_compactions_total{kind="compact"}')).toBe(1);
    expect(sample(text, 'palimpsest_compaction_shadowed_events_sum{kind="compact"}')).toBe(plan.shadowedSeqs.length);
    expect(sample(text, 'palimpsest_compaction_tokens_saved_sum{kind="compact"}')).toBeGreaterThan(0);
    // An ordinary append counts nothing.
    await app.append(ctx, 'other', [user('hello')]);
    expect(sample(await scrape(), 'palimpsest_compactions_total{kind="compact"}')).toBe(1);

    await app.deleteSession(ctx, 'other');
    expect(sample(await scrape(), 'palimpsest_tenant_sessions{tenant=""}')).toBe(1);
  });
});
