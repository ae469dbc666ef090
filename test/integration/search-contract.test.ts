import { describe, expect, it } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { SqliteSearchIndex } from '../../src/store/sqlite/search.js';
import Database from 'better-sqlite3';
import { verifyFile } from '../../src/store/sqlite/verify.js';
import { tempDbDir } from '../support/temp-db.js';
import { ACME, allHits, answers, searchContract, writeScenario } from './search-contract.js';

const dirs = tempDbDir('palimpsest-search-');

function clock(): () => number {
  let t = 1_700_000_000_000;
  return () => (t += 1000);
}

async function memoryAnswers(): Promise<Record<string, string[]>> {
  const app = new SessionService(new MemorySessionStore(), undefined, clock());
  await writeScenario(app);
  const out = await answers(app, ACME);
  await app.close();
  return out;
}

describe('search contract', () => {
  it('memory (the reference scan): append, search, delete, search again, tenants apart', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, clock());
    await searchContract(app);
    await app.close();
  });

  it.each(['inline', 'thread'] as const)('SQLite (%s writer) finds what the memory store finds, and forgets a deleted session', async (appendWriter) => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path, appendWriter }), undefined, clock());
    const index = new SqliteSearchIndex(path);
    app.search.useIndex(index);
    const got = await searchContract(app);
    expect(got).toEqual(await memoryAnswers());
    expect(await index.verifyIndex()).toEqual({ events: 11, problems: [] });
    expect(await index.reindex()).toEqual({ sessions: 4, events: 11 });
    expect(await index.verifyIndex()).toEqual({ events: 11, problems: [] });
    await app.close();
  });

  it('SQLite: verify finds an index that lost an entry, reindex repairs it; migrating a version-5 file indexes its events', async () => {
    const path = dirs.freshPath();
    let app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    await writeScenario(app);
    await app.close();
    expect(verifyFile(path).problems).toEqual([]);
    const raw = new Database(path);
    raw.prepare("DELETE FROM search_docs WHERE session_id = 'acme/billing' AND seq = 1").run();
    raw.close();
    expect(verifyFile(path).problems).toEqual(['search index: session "acme/billing" seq 1 is missing (run palimpsest reindex)']);
    let index = new SqliteSearchIndex(path);
    expect(await index.reindex()).toEqual({ sessions: 4, events: 15 });
    await index.close();
    expect(verifyFile(path).problems).toEqual([]);
    // A version-5 database (written before the index existed): migration 6 indexes its events.
    const old = new Database(path);
    old.exec('DROP TRIGGER search_events_ai; DROP TRIGGER search_sessions_ad; DROP TABLE search_fts; DROP TABLE search_docs; DROP TABLE search_calls;');
    old.exec('DELETE FROM schema_migrations WHERE version = 6; PRAGMA user_version = 5;');
    old.close();
    app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    index = new SqliteSearchIndex(path);
    app.search.useIndex(index);
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    expect(await index.verifyIndex()).toEqual({ events: 15, problems: [] });
    await app.close();
  });
});
