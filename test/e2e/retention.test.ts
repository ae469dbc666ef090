/**
 * Retention on the real server (issue #17): `serve --retention-days 30` deletes the sessions
 * untouched for 30 days (imported with old times) in batches while appends continue, keeps the
 * live ones and the ones a `palimpsest.dev/ttl-days` label keeps, counts the deletes in
 * palimpsest_retention_deleted_total, and ends the subscriptions of deleted sessions with
 * SESSION_NOT_FOUND; the live session's subscription stays open.
 */
import { get } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SubscribeEventsRequest } from '../../gen/palimpsest/v1/service.js';
import { api, until } from '../support/e2e.js';
import { input } from '../support/events.js';
import { Tail } from '../support/subscribe.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const DAY = 86_400_000;
let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ retentionDays: 30, retentionIntervalMs: 50, retentionBatch: 5, metricsListen: '127.0.0.1:0' });
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

function jsonl(id: string, time: number): Buffer {
  const lines = [
    { type: 'session', version: 0, id, createdAt: time },
    { type: 'x/note', seq: 0, time, data: { old: true } },
  ];
  return Buffer.from(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
}

function metric(name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(`http://127.0.0.1:${t.server.metricsPort}/metrics`, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => { body += d.toString(); });
      res.on('end', () => {
        const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(body);
        resolve(m ? Number(m[1]) : 0);
      });
    }).on('error', reject);
  });
}

describe('serve --retention-days', () => {
  it('deletes sessions untouched for N days in batches while appends continue', async () => {
    const a = api(t.client);
    const old = Date.now() - 40 * DAY;
    await a.createSession({ sessionId: 'live' });
    const subscriber = new Tail(t.client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: 'live' })));
    let appending = true;
    let appended = 0;
    const appends = (async () => {
      while (appending) {
        await a.appendEvents({ sessionId: 'live', events: [input('x/note', appended)] });
        appended++;
      }
    })();
    await a.importSession({ sessionId: 'kept', labels: { 'palimpsest.dev/ttl-days': '100' } }, jsonl('kept', old));
    const ids = Array.from({ length: 16 }, (_, i) => `old${i}`);
    // A subscriber of an old session: told when it goes.
    await a.importSession({ sessionId: ids[0]! }, jsonl(ids[0]!, old));
    const doomed = new Tail(t.client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: ids[0]! })));
    await Promise.all(ids.slice(1).map((id) => a.importSession({ sessionId: id }, jsonl(id, old)).catch(() => undefined)));
    await until(async () => (await metric('palimpsest_retention_deleted_total')) >= ids.length, 'retention deleted the old sessions', 30_000);
    appending = false;
    await appends;
    const left = (await a.listSessions({ pageSize: 100 })).sessions.map((s) => s.id).sort();
    expect(left).toEqual(['kept', 'live']);
    expect(await metric('palimpsest_retention_deleted_total')).toBe(ids.length);
    await doomed.until((x) => x.ended, 10_000, 'the deleted session\'s subscription ends');
    expect(doomed.decoded?.reason).toBe('SESSION_NOT_FOUND');
    // The appends kept succeeding while retention ran; the live subscription saw them all.
    expect(appended).toBeGreaterThan(0);
    expect((await a.getSession({ sessionId: 'live' })).session?.eventCount).toBe(appended);
    // The live session's subscription is untouched.
    expect(subscriber.ended).toBe(false);
    expect(subscriber.msgs.length).toBeGreaterThan(0);
    subscriber.cancel();
  }, 60_000);
});
