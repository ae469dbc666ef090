/**
 * The search contract (search-contract.ts) on PostgreSQL: the same hits as the memory store's
 * scan, tenants apart, a deleted session forgotten; verify and reindex of the tsvector index; the
 * follower's entries computed in node (search-docs.ts) against their SQL twins; the migration that
 * made the tsvector a written column.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { PostgresSearchIndex } from '../../src/store/postgres/search.js';
import { searchNormalize } from '../../src/store/postgres/search-docs.js';
import { verifyPostgres } from '../../src/store/postgres/verify-postgres.js';
import { prepareSchema } from '../../src/store/postgres/migrate.js';
import { MIGRATIONS } from '../../src/store/postgres/migrations/index.js';
import { migration as tsvWritten } from '../../src/store/postgres/migrations/0010-search-tsv-written.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';
import { ACME, allHits, answers, assistant, recreatedContract, result, searchContract, user, writeScenario } from './search-contract.js';

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

  it('a session deleted and created again in the same millisecond, or imported again from a redacted export, answers its new life only', async () => {
    const store = await PostgresSessionStore.open({ url: db!.url, schema: 'recreated', poolSize: 2 });
    const app = new SessionService(store, undefined, () => 1_700_000_000_000);
    const index = new PostgresSearchIndex({ url: db!.url, schema: 'recreated' });
    app.search.useIndex(index);
    await recreatedContract(app, async () => {
      expect(await app.search.follower!.catchUp(2000)).toBe(true);
      expect(await index.verifyIndex()).toMatchObject({ problems: [] });
    });
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

  it('the follower\'s node twins: searchNormalize is search_normalize; a batch over several chunks keeps calls, results and the latest tool name', async () => {
    const store = await PostgresSessionStore.open({ url: db!.url, schema: 'search3', poolSize: 2 });
    const app = new SessionService(store, undefined, clock());
    const index = new PostgresSearchIndex({ url: db!.url, schema: 'search3' });
    app.search.useIndex(index, { follow: false });
    const pg = await import('pg');
    const raw = new pg.default.Client({ connectionString: db!.url });
    await raw.connect();
    const samples = ['rm -rf /tmp/build', 'a--b\t\tc..d', 'naïve café—ok', 'x@y.com:8080/p?q=1', '\u0001ctl\u007fdel', '日本語 emoji😀 end', 'C++ & [x] {y} `z` ~w |v| ^u', ''];
    const sql = await raw.query<{ n: string }>('SELECT search3.search_normalize(t) AS n FROM unnest($1::text[]) WITH ORDINALITY AS u(t, o) ORDER BY o', [samples]);
    expect(sql.rows.map((r) => r.n)).toEqual(samples.map(searchNormalize));
    // 520 events in one batch (chunks of 500): a call on each side of the boundary, its result on
    // the other; call id c1 used again later under another tool name (the latest name is kept).
    await app.createSession(ACME, { id: 'long', pairingGuard: false });
    const events = Array.from({ length: 520 }, (_, i) => user(`u${i}`, `filler ${i}`));
    events[498] = assistant('a1', 'Looking.', [['c1', 'grep', '{}']]);
    events[501] = result('r1', 'c1', 'grep found the walrus');
    events[510] = assistant('a2', 'Again.', [['c1', 'find', '{}']]);
    events[511] = result('r2', 'c1', 'find found the walrus');
    for (let i = 0; i < events.length; i += 130) await app.append(ACME, 'long', events.slice(i, i + 130));
    expect(await index.followBatch(10_000)).toEqual({ events: 520, caughtUp: true });
    expect(await allHits(app, ACME, { query: 'walrus tool:grep' })).toEqual(['long@501']);
    expect(await allHits(app, ACME, { query: 'walrus tool:find' })).toEqual(['long@511']);
    expect((await raw.query("SELECT name FROM search3.search_calls WHERE session_id = 'acme/long'")).rows).toEqual([{ name: 'find' }]);
    expect(await index.verifyIndex()).toEqual({ events: 520, problems: [] });
    // verify compares the written tsvector too.
    await raw.query("UPDATE search3.search_docs SET tsv = to_tsvector('simple', 'other') WHERE session_id = 'acme/long' AND seq = 7");
    // `palimpsest verify --db postgres://…` reports it too, with the lag.
    const cli = await verifyPostgres(db!.url, 'search3');
    expect(cli.problems.map((p) => p.problem)).toEqual([
      'search index: session "acme/long" seq 7 is missing or differs from its event (run palimpsest reindex)',
      'search index: session "acme/long" seq 7 is indexed but differs from the events (run palimpsest reindex)',
    ]);
    expect(cli.searchIndexLag).toEqual({ events: 0, seconds: 0 });
    expect((await index.verifyIndex()).problems).toEqual([
      'search index: session "acme/long" seq 7 is missing or differs from its event (run palimpsest reindex)',
      'search index: session "acme/long" seq 7 is indexed but differs from the events (run palimpsest reindex)',
    ]);
    await raw.end();
    await app.close();
  });

  it(`migration ${tsvWritten.version} from the version before: search_docs.tsv keeps its values and is written, no longer generated`, async () => {
    const pg = await import('pg');
    const raw = new pg.default.Client({ connectionString: db!.url });
    await raw.connect();
    const migrate = async (to: number): Promise<void> => {
      await raw.query('BEGIN');
      await prepareSchema(raw, 'search4', 'test', {}, MIGRATIONS.filter((m) => m.version <= to));
      await raw.query('COMMIT');
    };
    const generated = async (): Promise<string> => (await raw.query<{ g: string }>(
      "SELECT attgenerated AS g FROM pg_attribute WHERE attrelid = 'search4.search_docs'::regclass AND attname = 'tsv'")).rows[0]!.g;
    await migrate(tsvWritten.version - 1);
    expect(await generated()).toBe('s');
    await raw.query("INSERT INTO search4.search_docs (session_id, seq, type, time, entered, replace, tools, text) VALUES ('x', 0, 'user/message', 1, true, false, '{}', 'rm -rf /tmp/build')");
    await migrate(tsvWritten.version);
    expect(await generated()).toBe('');
    expect((await raw.query("SELECT tsv::text AS t FROM search4.search_docs WHERE session_id = 'x'")).rows).toEqual([{ t: "'build':4 'rf':2 'rm':1 'tmp':3" }]);
    await raw.end();
  });
});
