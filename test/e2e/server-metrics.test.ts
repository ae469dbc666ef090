/**
 * Prometheus metrics of a real server: accepted appends, rejections by reason, the latency
 * histogram and the hot-session gauge, read from GET /metrics.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { input, userMessage } from '../support/events.js';
import { api, failure, type Api } from '../support/e2e.js';

let t: TestServer;
let a: Api;
beforeAll(async () => {
  t = await startTestServer({ metricsListen: '127.0.0.1:0' });
  a = api(t.client);
});
afterAll(async () => { await t.stop(); });

async function scrape(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${t.server.metricsPort}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return res.text();
}

/** The value of one sample line (`name{labels} value`), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('metrics', () => {
  it('counts appended events, rejections by reason, latency and cached sessions', async () => {
    expect(t.server.metricsPort).toBeGreaterThan(0);
    const before = await scrape();
    expect(sample(before, 'palimpsest_appended_events_total')).toBe(0);
    expect(sample(before, 'palimpsest_cached_sessions')).toBe(0);
    for (const id of ['m1', 'm2', 'm3']) await a.createSession({ sessionId: id });
    await a.appendEvents({ sessionId: 'm1', events: [userMessage('u', 'x'), input('x/y', {}), input('x/y', {})] });
    await a.appendEvents({ sessionId: 'm2', events: [input('x/y', {})] });
    await failure(a.appendEvents({ sessionId: 'm1', expectedLastSeq: 0, events: [input('x/y', {})] }));
    await failure(a.appendEvents({ sessionId: 'm1', expectedLastSeq: 5, events: [input('x/y', {})] }));
    await failure(a.appendEvents({ sessionId: 'm2', events: [{ ...input('x/y', {}), data: { kind: { $case: 'json', value: '{' } } }] }));
    await failure(a.appendEvents({ sessionId: 'missing', events: [input('x/y', {})] }));
    const text = await scrape();
    expect(sample(text, 'palimpsest_appended_events_total')).toBe(4);
    expect(sample(text, 'palimpsest_append_requests_total')).toBe(2);
    expect(sample(text, 'palimpsest_append_rejections_total{reason="HEAD_MISMATCH"}')).toBe(2);
    expect(sample(text, 'palimpsest_append_rejections_total{reason="NOT_JSON"}')).toBe(1);
    expect(sample(text, 'palimpsest_append_rejections_total{reason="SESSION_NOT_FOUND"}')).toBe(1);
    expect(text).toContain('# TYPE palimpsest_append_duration_seconds histogram');
    expect(sample(text, 'palimpsest_append_duration_seconds_count')).toBe(2);
    expect(sample(text, 'palimpsest_append_duration_seconds_bucket{le="+Inf"}')).toBe(2);
    expect(sample(text, 'palimpsest_append_duration_seconds_sum')).toBeGreaterThan(0);
    expect(sample(text, 'palimpsest_append_batch_events_sum')).toBe(4);
    // Hot sessions, read at scrape time (create loads the new session; unknown ids are not cached).
    expect(sample(text, 'palimpsest_cached_sessions')).toBe(3);
    await a.deleteSession({ sessionId: 'm3' });
    expect(sample(await scrape(), 'palimpsest_cached_sessions')).toBe(2);
    expect(text).toContain('process_cpu_user_seconds_total');
    const notFound = await fetch(`http://127.0.0.1:${t.server.metricsPort}/other`);
    expect(notFound.status).toBe(404);
  });
});
