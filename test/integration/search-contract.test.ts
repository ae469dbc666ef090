import { describe, expect, it } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import { BlobbingStore } from '../../src/app/blobbing-store.js';
import { DEFAULT_BLOB_MIN_BYTES } from '../../src/domain/blobs.js';
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
  const app = new SessionService(new BlobbingStore(new MemorySessionStore(), DEFAULT_BLOB_MIN_BYTES), undefined, clock());
  await writeScenario(app);
  const out = await answers(app, ACME);
  await app.close();
  return out;
}

describe('search contract', () => {
  it('memory (the reference scan): append, search, delete, search again, tenants apart', async () => {
    const app = new SessionService(new BlobbingStore(new MemorySessionStore(), DEFAULT_BLOB_MIN_BYTES), undefined, clock());
    await searchContract(app);
    expect(await allHits(app, ACME, { query: 'zebra' })).toEqual([]); // kept as a blob: not searchable
    await app.close();
  });

  it.each(['inline', 'thread'] as const)('SQLite (%s writer) finds what the memory store finds, and forgets a deleted session', async (appendWriter) => {
    const path = dirs.freshPath();
    const app = new SessionService(new BlobbingStore(new SqliteSessionStore({ path, appendWriter }), DEFAULT_BLOB_MIN_BYTES), undefined, clock());
    const index = new SqliteSearchIndex(path);
    app.search.useIndex(index);
    const got = await searchContract(app);
    expect(await allHits(app, ACME, { query: 'zebra' })).toEqual([]);
    expect(got).toEqual(await memoryAnswers());
    expect(await index.verifyIndex()).toEqual({ events: 12, problems: [] });
    expect(await index.reindex()).toEqual({ sessions: 5, events: 12 });
    expect(await index.verifyIndex()).toEqual({ events: 12, problems: [] });
    await app.close();
  });

  it('SQLite: verify finds an index that lost an entry, reindex repairs it; migrating a version-6 file indexes its events', async () => {
    const path = dirs.freshPath();
    let app = new SessionService(new BlobbingStore(new SqliteSessionStore({ path }), DEFAULT_BLOB_MIN_BYTES), undefined, clock());
    await writeScenario(app);
    await app.close();
    // Nothing followed yet: the lag is no problem for verify.
    expect(verifyFile(path).problems).toEqual([]);
    let index = new SqliteSearchIndex(path);
    expect(await index.lag()).toMatchObject({ events: 16 });
    expect(await index.followBatch(1)).toEqual({ events: expect.any(Number) as number, caughtUp: false });
    while (!(await index.followBatch(1000)).caughtUp);
    expect(await index.lag()).toEqual({ events: 0, seconds: 0 });
    await index.close();
    expect(verifyFile(path).problems).toEqual([]);
    const raw = new Database(path);
    raw.prepare("DELETE FROM search_docs WHERE session_id = 'acme/billing' AND seq = 1").run();
    raw.close();
    expect(verifyFile(path).problems).toEqual(['search index: session "acme/billing" seq 1 is missing (run palimpsest reindex)']);
    index = new SqliteSearchIndex(path);
    expect(await index.reindex()).toEqual({ sessions: 5, events: 16 });
    await index.close();
    expect(verifyFile(path).problems).toEqual([]);
    // A version-6 database (written before the index existed): migration 7 indexes its events.
    const old = new Database(path);
    old.exec('DROP TRIGGER search_sessions_ad; DROP TABLE search_fts; DROP TABLE search_docs; DROP TABLE search_calls; DROP TABLE search_follow; DROP TABLE search_progress;');
    old.exec('DROP TABLE feed_pruned; DELETE FROM schema_migrations WHERE version >= 7; PRAGMA user_version = 6;');
    old.close();
    app = new SessionService(new BlobbingStore(new SqliteSessionStore({ path }), DEFAULT_BLOB_MIN_BYTES), undefined, clock());
    index = new SqliteSearchIndex(path);
    app.search.useIndex(index);
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    expect(await index.verifyIndex()).toEqual({ events: 16, problems: [] });
    await app.close();
  });
});
