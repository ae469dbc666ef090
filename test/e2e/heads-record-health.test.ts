/**
 * Issue #33 item 5, health's part: a SQLite database that holds sessions and opens with its heads
 * record (`FILE-heads`) missing, emptied or damaged is unprotected (lost acknowledged commits would
 * go unseen) until an operator re-seals it. While it is unsealed the server keeps serving ("" and
 * palimpsest.v1.SessionService SERVING: sessions are served correctly), but the health service
 * name `palimpsest.heads-record` answers NOT_SERVING (Check and Watch, on the gRPC port and on the
 * web port), the gauge palimpsest_heads_record_unsealed is 1 and `verify --addr` reports it. After
 * `verify --db FILE --reseal-heads` the next start answers SERVING, 0, and verify passes.
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { credentials } from '@grpc/grpc-js';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { HealthClient, HealthCheckResponse_ServingStatus as S } from '../../gen/grpc/health/v1/health.js';
import { Health } from '../../gen/es/grpc/health/v1/health_pb.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { resealHeads } from '../../src/store/sqlite/verify.js';
import { verify } from '../../src/cli/verify.js';
import { appendAt, ev, newSession } from '../integration/store-contract.js';
import { tempDbDir } from '../support/temp-db.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { until } from '../support/e2e.js';

const dbs = tempDbDir('palimpsest-heads-health-');
const HEADS = 'palimpsest.heads-record';
let running: TestServer | undefined;
afterEach(async () => {
  await running?.stop();
  running = undefined;
});

/** A closed database holding session 'a' with two events (its heads record sealed). */
async function withSession(): Promise<string> {
  const path = dbs.freshPath();
  const s = new SqliteSessionStore({ path });
  await s.createSession(newSession('a'), []);
  await appendAt(s, 'a', 0, [ev(0, 'x/note', 1), ev(1, 'x/note', 2)]);
  await s.close();
  return path;
}

async function serve(db: string): Promise<TestServer> {
  running = await startTestServer({ db, metricsListen: '127.0.0.1:0', webListen: '127.0.0.1:0' });
  return running;
}

/** The gRPC port's Check of `service`. */
async function check(s: TestServer, service: string): Promise<S> {
  const health = new HealthClient(s.server.address, credentials.createInsecure());
  try {
    return await new Promise<S>((resolve, reject) => health.check({ service }, (err, res) => (err ? reject(err) : resolve(res.status))));
  } finally {
    health.close();
  }
}

/** The first status a Watch of `service` sends. */
async function firstWatched(s: TestServer, service: string): Promise<S> {
  const health = new HealthClient(s.server.address, credentials.createInsecure());
  const call = health.watch({ service });
  try {
    return await new Promise<S>((resolve, reject) => {
      call.once('data', (r: { status: S }) => resolve(r.status));
      call.once('error', reject);
    });
  } finally {
    call.cancel();
    health.close();
  }
}

/** The web port's Check of `service` (Connect protocol). */
async function webCheck(s: TestServer, service: string): Promise<number> {
  const client = createClient(Health, createConnectTransport({ baseUrl: `http://127.0.0.1:${s.server.webPort}`, httpVersion: '1.1' }));
  return (await client.check({ service })).status;
}

async function gauge(s: TestServer): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${s.server.metricsPort}/metrics`)).text();
  const m = /^palimpsest_heads_record_unsealed (\d+)$/m.exec(text);
  if (m === null) throw new Error('palimpsest_heads_record_unsealed not scraped');
  return Number(m[1]);
}

async function verifyAddr(s: TestServer): Promise<{ code: number; out: string }> {
  let out = '';
  const io = { stdout: { write: (t: string) => (out += t) }, stderr: { write: (t: string) => (out += t) }, env: {} };
  const code = await verify(['--addr', s.server.address], io);
  return { code, out };
}

describe('health reports an unsealed heads record until it is re-sealed', () => {
  it('unsealed (the heads file deleted): palimpsest.heads-record NOT_SERVING on both ports, the gauge 1, verify --addr fails; the server still serves', async () => {
    const db = await withSession();
    rmSync(`${db}-heads`);
    const s = await serve(db);
    expect(await check(s, HEADS)).toBe(S.NOT_SERVING);
    expect(await firstWatched(s, HEADS)).toBe(S.NOT_SERVING);
    expect(await webCheck(s, HEADS)).toBe(S.NOT_SERVING);
    expect(await gauge(s)).toBe(1);
    // Sessions are still served correctly: the server itself stays SERVING.
    expect(await check(s, '')).toBe(S.SERVING);
    expect(await check(s, 'palimpsest.v1.SessionService')).toBe(S.SERVING);
    expect(await webCheck(s, '')).toBe(S.SERVING);
    const v = await verifyAddr(s);
    expect(v.code, v.out).toBe(1);
    expect(v.out).toMatch(/heads record unsealed \(health palimpsest\.heads-record NOT_SERVING\).*--reseal-heads/);
    // Restarted without the operator's re-seal: still reported (the mark is in the file).
    await s.stop();
    running = undefined;
    const again = await serve(db);
    expect(await check(again, HEADS)).toBe(S.NOT_SERVING);
    expect(await gauge(again)).toBe(1);
  });

  it('sealed (fresh, and after verify --db --reseal-heads): SERVING on both ports, the gauge 0, verify --addr passes', async () => {
    const db = await withSession();
    rmSync(`${db}-heads`);
    // Opened once without its heads file: marked unsealed; then the operator re-seals it.
    await new SqliteSessionStore({ path: db }).close();
    expect(resealHeads(db)).toBe(1);
    const s = await serve(db);
    expect(await check(s, HEADS)).toBe(S.SERVING);
    expect(await firstWatched(s, HEADS)).toBe(S.SERVING);
    expect(await webCheck(s, HEADS)).toBe(S.SERVING);
    expect(await gauge(s)).toBe(0);
    const v = await verifyAddr(s);
    expect(v.code, v.out).toBe(0);
    await s.stop();
    running = undefined;
    const fresh = await serve(dbs.freshPath());
    expect(await check(fresh, HEADS)).toBe(S.SERVING);
    expect(await gauge(fresh)).toBe(0);
  });

  it('shutdown turns palimpsest.heads-record NOT_SERVING for its watchers too', async () => {
    const s = await serve(await withSession());
    const health = new HealthClient(s.server.address, credentials.createInsecure());
    const seen: S[] = [];
    const call = health.watch({ service: HEADS });
    call.on('data', (r: { status: S }) => seen.push(r.status));
    call.on('error', () => undefined);
    await until(() => seen.length > 0, 'the first status');
    const stopping = s.stop();
    running = undefined;
    await until(() => seen.includes(S.NOT_SERVING), 'NOT_SERVING on shutdown');
    await stopping;
    health.close();
    expect(seen).toEqual([S.SERVING, S.NOT_SERVING]);
  });
});
