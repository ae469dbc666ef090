/**
 * Two in-process servers on one PostgreSQL database while the database goes away and comes back:
 * requests fail with UNAVAILABLE and reason STORE_UNAVAILABLE (naming the cause) and leave the log
 * as it was; both replicas recover on their own, and a subscriber on one replica, whose LISTEN
 * connection was cut too, receives what the other replica commits after the database returned.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, status } from '@grpc/grpc-js';
import { HealthCheckResponse_ServingStatus as S } from '../../gen/grpc/health/v1/health.js';
import { SubscribeEventsRequest, type SubscribeEventsResponse } from '../../gen/palimpsest/v1/service.js';
import { userMessage } from '../support/events.js';
import { api, type Api } from '../support/e2e.js';
import { waitFor } from '../support/poll.js';
import { createTestDatabase, hasPostgres, pgAdminUrl, type TestDatabase } from '../support/postgres.js';
import { Tail } from '../support/subscribe.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt, spawnServer } from '../support/server-process.js';
import { decodeError } from '../../src/client/error-details.js';
import type { ServiceError } from '@grpc/grpc-js';

describe.skipIf(!hasPostgres())('PostgreSQL unreachable', () => {
  let db: TestDatabase;
  let one: TestServer;
  let two: TestServer;
  let a: Api;
  let b: Api;
  let admin: pg.Client;

  beforeAll(async () => {
    db = await createTestDatabase();
    one = await startTestServer({ db: db.url });
    two = await startTestServer({ db: db.url });
    a = api(one.client);
    b = api(two.client);
    admin = new pg.Client({ connectionString: pgAdminUrl() });
    await admin.connect();
  });
  afterAll(async () => {
    await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS true`).catch(() => undefined);
    await admin.end();
    await one.stop();
    await two.stop();
    await db.drop();
  });

  it('fails with UNAVAILABLE / STORE_UNAVAILABLE while the database is gone, writes nothing, and recovers on its own', async () => {
    await a.createSession({ sessionId: 's' });
    expect((await a.appendEvents({ sessionId: 's', events: [userMessage('m0', 'before')] })).seqs).toEqual([0]);
    const tail = new Tail<SubscribeEventsResponse>(one.client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: 's' })));
    await tail.until((t) => t.msgs.some((m) => m.kind?.$case === 'caughtUp'), 10_000, 'caught up');

    // The database goes away: no new connections, every existing one (pools and LISTEN) cut.
    await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS false`);
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [db.name]);
    const failure = await b.appendEvents({ sessionId: 's', events: [userMessage('m1', 'during')] }).catch((e: unknown) => decodeError(e as ServiceError));
    expect(failure).toMatchObject({ code: status.UNAVAILABLE, reason: 'STORE_UNAVAILABLE' });
    expect((failure as { message: string }).message).toMatch(/PostgreSQL database is unreachable \(.+\)/);
    const read = await a.listEvents({ sessionId: 's' }).catch((e: unknown) => decodeError(e as ServiceError));
    expect(read).toMatchObject({ code: status.UNAVAILABLE, reason: 'STORE_UNAVAILABLE' });

    // It returns: both replicas serve again without a restart.
    await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS true`);
    await waitFor(async () => (await b.getSession({ sessionId: 's' }).catch(() => undefined)) !== undefined, 15_000, 'replica two serves again');
    // Nothing of the failed append was stored; the log goes on from where it was.
    expect((await b.appendEvents({ sessionId: 's', events: [userMessage('m2', 'after')] })).seqs).toEqual([1]);
    // The subscriber on replica one hears replica two's commit (its LISTEN reconnected and
    // re-read the head, or the slow poll found it).
    await tail.until((t) => t.msgs.some((m) => m.kind?.$case === 'event' && m.kind.value.seq === 1), 15_000, 'seq 1 on the other replica');
    const seqs = tail.msgs.flatMap((m) => (m.kind?.$case === 'event' ? [m.kind.value.seq] : []));
    expect(seqs).toEqual([0, 1]);
    tail.cancel();
  });
});

describe.skipIf(!hasPostgres())('a replica started while PostgreSQL is unreachable (issue #33 item 3)', () => {
  let db: TestDatabase;
  let admin: pg.Client;
  const started: TestServer[] = [];

  beforeAll(async () => {
    ensureBuilt();
    db = await createTestDatabase();
    admin = new pg.Client({ connectionString: pgAdminUrl() });
    await admin.connect();
  }, 120_000);
  afterAll(async () => {
    await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS true`).catch(() => undefined);
    for (const s of started) await s.stop();
    await admin.end();
    await db.drop();
  });

  async function healthOf(address: string): Promise<number> {
    const { HealthClient } = await import('../../gen/grpc/health/v1/health.js');
    const health = new HealthClient(address, credentials.createInsecure());
    try {
      return await new Promise<number>((resolve, reject) => health.check({ service: '' }, (err, res) => (err ? reject(err) : resolve(res.status))));
    } finally {
      health.close();
    }
  }

  it('listens with health NOT_SERVING and answers STORE_UNAVAILABLE, then serves once the database comes (no restart)', async () => {
    await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS false`);
    const s = await startTestServer({ db: db.url, storeWaitMs: 60_000 });
    started.push(s);
    const a = api(s.client);
    expect(await healthOf(s.server.address)).toBe(S.NOT_SERVING);
    const refused = await a.createSession({ sessionId: 'w' }).catch((e: unknown) => decodeError(e as ServiceError));
    expect(refused).toMatchObject({ code: status.UNAVAILABLE, reason: 'STORE_UNAVAILABLE' });
    expect((refused as { message: string }).message).toMatch(/not reachable yet .*--store-wait-ms 60000/);
    await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS true`);
    await s.server.storeReady;
    expect(await healthOf(s.server.address)).toBe(S.SERVING);
    await a.createSession({ sessionId: 'w' });
    expect((await a.appendEvents({ sessionId: 'w', events: [userMessage('m0', 'after the wait')] })).seqs).toEqual([0]);
  });

  it('gives up after --store-wait-ms: storeReady rejects and the server shuts down; with --store-wait-ms 0 the start fails at once', async () => {
    await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS false`);
    const s = await startTestServer({ db: db.url, storeWaitMs: 1_500 });
    await expect(s.server.storeReady).rejects.toThrow(/not reachable within --store-wait-ms 1500 ms/);
    await s.stop();
    await expect(startTestServer({ db: db.url, storeWaitMs: 0 })).rejects.toThrow(/database is unreachable/);
    // `palimpsest serve` exits 1 once the wait ran out, saying why.
    const proc = await spawnServer(['--db', db.url, '--store-wait-ms', '1000']);
    expect((await proc.exited).code).toBe(1);
    expect(proc.stderr()).toMatch(/STORE_UNAVAILABLE: the PostgreSQL database .* was not reachable within --store-wait-ms 1000 ms/);
    await admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS true`);
  }, 60_000);
});
