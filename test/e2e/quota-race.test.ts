/**
 * Issue #17 item 2, end to end on the real server process (SQLite file and memory store): 20
 * concurrent CreateSession calls from separate connections against --tenant-max-sessions 5 give
 * exactly 5 sessions (the rest QUOTA_EXCEEDED with the limit), and concurrent appends never store
 * more than --tenant-max-bytes (every acknowledged byte counted, nothing of a refused append left).
 * The result verifies clean with `palimpsest verify` (--db on the live file, --addr).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, status } from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';
import { allEvents, api, failure } from '../support/e2e.js';
import { input } from '../support/events.js';
import { runCli } from '../support/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'palimpsest-quota-race-'));
const running: ServerProcess[] = [];
beforeAll(() => ensureBuilt(), 120_000);
afterAll(async () => {
  for (const s of running) {
    s.proc.kill('SIGTERM');
    await s.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

const MAX_BYTES = 20_000;

describe.each([['sqlite', 'race.db'], ['memory', ':memory:']])('quota races on the %s store', (_name, file) => {
  it('20 concurrent creates against a limit of 5 give exactly 5; concurrent appends never exceed the byte quota', async () => {
    const db = file === ':memory:' ? file : join(dir, file);
    const server = await spawnServer(['--db', db, '--tenant-max-sessions', '5', '--tenant-max-bytes', String(MAX_BYTES)]);
    running.push(server);
    // Separate connections, so the calls really arrive concurrently.
    const clients = Array.from({ length: 20 }, () => new SessionServiceClient(server.address, credentials.createInsecure()));
    try {
      const outcomes = await Promise.allSettled(clients.map((c, i) => api(c).createSession({ sessionId: `s${i}` })));
      const created = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [`s${i}`] : []));
      expect(created).toHaveLength(5);
      for (const o of outcomes) {
        if (o.status === 'rejected') {
          const e = await failure(Promise.reject(o.reason));
          expect(e).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'QUOTA_EXCEEDED', metadata: { limit: '5' } });
        }
      }
      const listed = await api(clients[0]!).listSessions({ pageSize: 100 });
      expect(listed.sessions.map((s) => s.id).sort()).toEqual([...created].sort());

      // Appends of ~1 KB from every connection to the 5 sessions until each has been refused once.
      const payload = 'x'.repeat(1000);
      let acceptedBytes = 0;
      let accepted = 0;
      let refused = 0;
      await Promise.all(clients.map(async (c, i) => {
        const a = api(c);
        const id = created[i % created.length]!;
        for (;;) {
          const data = { i, payload };
          try {
            await a.appendEvents({ sessionId: id, events: [input('x/note', data)] });
            acceptedBytes += Buffer.byteLength(JSON.stringify(data));
            accepted++;
          } catch (err) {
            const e = await failure(Promise.reject(err));
            expect(e.reason).toBe('QUOTA_EXCEEDED');
            refused++;
            return;
          }
        }
      }));
      expect(refused).toBe(20);
      expect(acceptedBytes).toBeLessThanOrEqual(MAX_BYTES);
      expect(acceptedBytes).toBeGreaterThan(MAX_BYTES - 2 * 1100 - 5 * 400);
      // What is stored is exactly what was acknowledged.
      let storedEvents = 0;
      for (const id of created) storedEvents += (await allEvents(api(clients[0]!), id)).length;
      expect(storedEvents).toBe(accepted);
      if (file !== ':memory:') {
        const raw = new Database(db, { readonly: true });
        const tenant = raw.prepare("SELECT session_count, data_bytes FROM tenants WHERE tenant = ''").get() as { session_count: number; data_bytes: number };
        const sum = raw.prepare('SELECT sum(data_bytes) AS b FROM sessions').get() as { b: number };
        raw.close();
        expect(tenant.session_count).toBe(5);
        expect(tenant.data_bytes).toBe(sum.b);
        expect(tenant.data_bytes).toBeLessThanOrEqual(MAX_BYTES);
        // The live file verifies clean while the server runs.
        const v = await runCli(['verify', '--db', db, '--json']);
        expect(v.code, v.stdout + v.stderr).toBe(0);
        expect(JSON.parse(v.stdout)).toMatchObject({ ok: true, sessions: 5, events: accepted });
      }
      // And through the server's RPCs (contiguity, surface replay against GetSurface).
      const byServer = await runCli(['verify', '--addr', server.address, '--json']);
      expect(byServer.code, byServer.stdout + byServer.stderr).toBe(0);
      expect(JSON.parse(byServer.stdout)).toMatchObject({ ok: true, sessions: 5, events: accepted, problems: [] });
    } finally {
      for (const c of clients) c.close();
    }
  }, 120_000);
});

describe.each([['sqlite', 'cross.db'], ['memory', ':memory:']])('60 appends crossing the byte quota at once on the %s store (issue #33 item 2)', (_name, file) => {
  it('every refused append is QUOTA_EXCEEDED (never ABORTED); the stored log is exactly the acknowledged appends', async () => {
    const db = file === ':memory:' ? file : join(dir, file);
    const server = await spawnServer(['--db', db, '--tenant-max-bytes', '100000']);
    running.push(server);
    const clients = Array.from({ length: 60 }, () => new SessionServiceClient(server.address, credentials.createInsecure()));
    try {
      await api(clients[0]!).createSession({ sessionId: 'q' });
      const payload = 'x'.repeat(3000);
      const outcomes = await Promise.allSettled(clients.map((c, i) => api(c).appendEvents({ sessionId: 'q', events: [input('x/note', { i, payload })] })));
      const refused = await Promise.all(outcomes.flatMap((o) => (o.status === 'rejected' ? [failure(Promise.reject(o.reason))] : [])));
      expect(refused.length).toBeGreaterThan(0);
      for (const e of refused) expect(e).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'QUOTA_EXCEEDED', metadata: { limit: '100000' } });
      const acknowledged = outcomes.flatMap((o) => (o.status === 'fulfilled' ? o.value.seqs : [])).sort((a, b) => a - b);
      expect(acknowledged).toEqual(Array.from({ length: acknowledged.length }, (_, i) => i));
      expect((await allEvents(api(clients[0]!), 'q')).map((e) => e.seq)).toEqual(acknowledged);
    } finally {
      for (const c of clients) c.close();
    }
  }, 120_000);
});
