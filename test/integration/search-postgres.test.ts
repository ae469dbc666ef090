/**
 * The search contract (search-contract.ts) on PostgreSQL: the same hits as the memory store's
 * scan, tenants apart, a deleted session forgotten; verify and reindex of the tsvector index.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { PostgresSearchIndex } from '../../src/store/postgres/search.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';
import { ACME, allHits, answers, assistant, result, searchContract, user, writeScenario } from './search-contract.js';

let db: TestDatabase | undefined;

function clock(): () => number {
  let t = 1_700_000_000_000;
  return () => (t += 1000);
}

describe.skipIf(!hasPostgres())('search contract on PostgreSQL', () => {
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('finds what the memory store finds, keeps tenants apart, forgets a deleted session; verify and reindex agree', async () => {
    const store = await PostgresSessionStore.open({ url: db!.url, schema: 'search1', poolSize: 4 });
    const app = new SessionService(store, undefined, clock());
    const index = new PostgresSearchIndex({ url: db!.url, schema: 'search1' });
    app.search.useIndex(index);
    const got = await searchContract(app);
    const reference = new SessionService(new MemorySessionStore(), undefined, clock());
    await writeScenario(reference);
    expect(got).toEqual(await answers(reference, ACME));
    await reference.close();
    expect(await index.verifyIndex()).toEqual({ events: 12, problems: [] });
    const pg = await import('pg');
    const raw = new pg.default.Client({ connectionString: db!.url });
    await raw.connect();
    await raw.query("DELETE FROM search1.search_docs WHERE session_id = 'acme/billing' AND seq = 1");
    await raw.end();
    expect(await index.verifyIndex()).toEqual({ events: 12, problems: ['search index: session "acme/billing" seq 1 is missing or differs from its event (run palimpsest reindex)'] });
    expect(await index.reindex()).toEqual({ sessions: 5, events: 12 });
    expect(await index.verifyIndex()).toEqual({ events: 12, problems: [] });
    await app.close();
  });

  it('a follower off the append path: one indexer at a time across replicas, a session deleted before it is followed leaves nothing, read-your-writes', async () => {
    const store = await PostgresSessionStore.open({ url: db!.url, schema: 'search2', poolSize: 4 });
    const app = new SessionService(store, undefined, clock());
    const index = new PostgresSearchIndex({ url: db!.url, schema: 'search2' });
    const replica = new PostgresSearchIndex({ url: db!.url, schema: 'search2' });
    app.search.useIndex(index, { follow: false });
    await writeScenario(app);
    const pg = await import('pg');
    const raw = new pg.default.Client({ connectionString: db!.url });
    await raw.connect();
    const count = async (sql: string): Promise<number> => Number((await raw.query<{ n: string }>(sql)).rows[0]!.n);
    expect(await count('SELECT count(*) AS n FROM search2.search_docs')).toBe(0);
    expect((await index.lag()).events).toBe(16);
    // Another indexer holds the lock: a replica's batch is busy and does nothing.
    await raw.query('BEGIN');
    await raw.query("SELECT pg_advisory_xact_lock(hashtext('palimpsest search follower ' || 'search2'))");
    expect(await replica.followBatch(100)).toEqual({ events: 0, caughtUp: false, busy: true });
    await raw.query('ROLLBACK');
    await app.deleteSession(ACME, 'billing');
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual([]);
    expect(await index.lag()).toEqual({ events: 0, seconds: 0 });
    expect(await count("SELECT count(*) AS n FROM search2.search_docs WHERE session_id = 'acme/billing'")).toBe(0);
    expect(await count("SELECT count(*) AS n FROM search2.search_progress WHERE session_id = 'acme/billing'")).toBe(0);
    expect(await count("SELECT count(*) AS n FROM search2.search_docs WHERE session_id = 'beta/ops'")).toBe(5);
    await app.append(ACME, 'ops', [user('u9', 'the walrus migrated')]);
    expect(await allHits(app, ACME, { query: 'walrus' })).toEqual(['ops@5']);
    // A tool result followed in a later batch than its call is indexed under the call's tool.
    await app.append(ACME, 'ops', [assistant('a9', 'Searching.', [['c9', 'grep', '{"pattern":"walrus"}']])]);
    expect(await index.followBatch(100)).toMatchObject({ caughtUp: true });
    await app.append(ACME, 'ops', [result('r9', 'c9', 'no match')]);
    expect(await allHits(app, ACME, { query: 'tool:grep' })).toEqual(['ops@7', 'ops@6']);
    expect(await index.verifyIndex()).toEqual({ events: 17, problems: [] });
    await raw.end();
    await replica.close();
    await app.close();
  });
});
