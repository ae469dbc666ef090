/**
 * Graceful shutdown: appends the server has already received finish and are acknowledged, calls
 * after shutdown began get UNAVAILABLE, health turns NOT_SERVING, and the database is closed
 * cleanly (WAL checkpointed into the main file; reopening it serves every acknowledged event).
 */
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { credentials, status } from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { startServer } from '../../src/main.js';
import { ANONYMOUS } from '../../src/app/session-service.js';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { input } from '../support/events.js';
import { allEvents, api, failure, until } from '../support/e2e.js';

const dir = mkdtempSync(join(tmpdir(), 'palimpsest-shutdown-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('graceful shutdown', () => {
  it('in-flight appends finish, later calls are UNAVAILABLE, the database closes cleanly', async () => {
    const db = join(dir, 'shutdown.db');
    const N = 40;
    let received = 0;
    let done = 0;
    let doneAtShutdown = -1;
    let stopping: Promise<void> | undefined;
    // Shutdown starts from inside the server, as the last append arrives: that one (at least) is
    // certainly in flight.
    const server = await startServer({ listen: '127.0.0.1:0', logLevel: 'silent', db }, {
      resolver: (call) => {
        if (call.path === '/palimpsest.v1.SessionService/AppendEvents' && ++received === N) {
          doneAtShutdown = done;
          stopping = server.shutdown();
        }
        return ANONYMOUS;
      },
    });
    const client = new SessionServiceClient(server.address, credentials.createInsecure());
    const a = api(client);
    for (const id of ['g1', 'g2']) await a.createSession({ sessionId: id });
    // 40 appends, each of 50 events, on two sessions.
    const inflight = Array.from({ length: N }, (_, i) => a.appendEvents({
      sessionId: i % 2 === 0 ? 'g1' : 'g2',
      events: Array.from({ length: 50 }, (_, j) => input('x/y', { i, j, pad: 'p'.repeat(200) })),
    }).finally(() => { done++; }));
    await until(() => stopping !== undefined, 'shutdown to start');
    expect(doneAtShutdown).toBeGreaterThanOrEqual(0);
    expect(doneAtShutdown).toBeLessThan(N);
    // After shutdown began: new calls are refused.
    const late = await failure(a.getSession({ sessionId: 'g1' }));
    expect(late.code).toBe(status.UNAVAILABLE);
    const results = await Promise.allSettled(inflight);
    const rejected = results.filter((r) => r.status === 'rejected');
    expect(rejected.map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
    await stopping;
    client.close();
    const acked = results.map((r) => (r as PromiseFulfilledResult<{ seqs: number[] }>).value.seqs);
    expect(acked.flat().length).toBe(N * 50);

    // Closed cleanly: the WAL was checkpointed and removed, and the file is consistent.
    expect(!existsSync(`${db}-wal`) || statSync(`${db}-wal`).size === 0).toBe(true);
    const raw = new Database(db, { readonly: true });
    expect(raw.pragma('integrity_check', { simple: true })).toBe('ok');
    raw.close();

    // Reopen: everything acknowledged is there, in order.
    const again = await startServer({ listen: '127.0.0.1:0', logLevel: 'silent', db });
    const c2 = new SessionServiceClient(again.address, credentials.createInsecure());
    try {
      const b = api(c2);
      for (const id of ['g1', 'g2']) {
        const events = await allEvents(b, id);
        expect(events.map((e) => e.seq)).toEqual(Array.from({ length: (N / 2) * 50 }, (_, k) => k));
      }
      const byIndex = results.map((_, i) => i);
      for (const i of byIndex) {
        const sessionId = i % 2 === 0 ? 'g1' : 'g2';
        const seqs = acked[i] as number[];
        const page = await b.listEvents({ sessionId, fromSeq: seqs[0], pageSize: 50 });
        expect(page.events.map((e) => JSON.parse(e.data?.kind?.$case === 'json' ? e.data.kind.value : 'null').i)).toEqual(Array(50).fill(i));
      }
    } finally {
      c2.close();
      await again.shutdown();
    }
  });

  it('shutdown is idempotent and health reports NOT_SERVING to watchers', async () => {
    const server = await startServer({ listen: '127.0.0.1:0', logLevel: 'silent', db: ':memory:' });
    const { HealthClient, HealthCheckResponse_ServingStatus: S } = await import('../../gen/grpc/health/v1/health.js');
    const health = new HealthClient(server.address, credentials.createInsecure());
    const statuses: number[] = [];
    const watch = health.watch({ service: '' });
    const ended = new Promise<void>((resolve) => {
      watch.on('data', (r: { status: number }) => statuses.push(r.status));
      watch.on('end', resolve);
      watch.on('error', () => resolve());
    });
    await until(() => statuses.length > 0, 'the first health status');
    const p1 = server.shutdown();
    const p2 = server.shutdown();
    expect(p1).toBe(p2);
    await p1;
    await ended;
    health.close();
    expect(statuses).toEqual([S.SERVING, S.NOT_SERVING]);
  });
});
