import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import { BlobbingStore } from '../../src/app/blobbing-store.js';
import { DEFAULT_BLOB_MIN_BYTES } from '../../src/domain/blobs.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { SqliteSearchIndex, compileSqliteSearch } from '../../src/store/sqlite/search.js';
import Database from 'better-sqlite3';
import { verifyFile } from '../../src/store/sqlite/verify.js';
import { SEARCH_FILE_VERSION, SEARCH_FTS_AUTOMERGE, searchIndexPath } from '../../src/store/sqlite/search-file.js';
import { migrateDatabase } from '../../src/store/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/store/sqlite/migrations/index.js';
import { parseSearchQuery } from '../../src/domain/search-query.js';
import { DomainError } from '../../src/domain/errors.js';
import { codeForReason } from '../../src/server/status-map.js';
import { status as Code } from '@grpc/grpc-js';
import { parseServeArgs } from '../../src/cli/serve.js';
import { composeApp } from '../../src/main.js';
import { createLogger } from '../../src/server/logger.js';
import { DEFAULT_CONFIG } from '../../src/server/config.js';
import { SCHEMA_FIXTURES } from '../support/schema-fixtures.js';
import { tempDbDir } from '../support/temp-db.js';
import { ACME, allHits, answers, assistant, recreatedContract, result, retentionGapContract, searchContract, user, writeScenario } from './search-contract.js';

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

  it('memory: a session deleted and created again in the same millisecond, or imported again from a redacted export, answers its new life only', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1_700_000_000_000);
    await recreatedContract(app, () => Promise.resolve());
    await app.close();
  });

  it.each(['inline', 'thread'] as const)('SQLite (%s writer): a session deleted and created again in the same millisecond, or imported again from a redacted export, answers its new life only', async (appendWriter) => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path, appendWriter }), undefined, () => 1_700_000_000_000);
    const index = new SqliteSearchIndex(path);
    app.search.useIndex(index);
    await recreatedContract(app, async () => {
      expect(await app.search.follower!.catchUp(2000)).toBe(true);
      expect(await index.verifyIndex()).toMatchObject({ problems: [] });
    });
    await app.close();
  });

  it('SQLite: a follower that fell behind feed retention (index off meanwhile) indexes the new life of a session deleted and created again in the same millisecond, never the old one', async () => {
    const path = dirs.freshPath();
    const store = new SqliteSessionStore({ path });
    const app = new SessionService(store, undefined, () => 1_700_000_000_000);
    let index = new SqliteSearchIndex(path, { inProcess: true });
    app.search.useIndex(index, { follow: false });
    await retentionGapContract(app, (before) => store.pruneFeed(before), {
      off: () => index.close(),
      on: () => {
        index = new SqliteSearchIndex(path, { inProcess: true });
        app.search.useIndex(index, { follow: false });
        return Promise.resolve(index);
      },
    });
    await app.close();
  });

  it('SQLite: a search finds the deleted sessions the follower has not reached through the partial index of deleted feed records, not a walk of every unfollowed record', async () => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    app.search.useIndex(new SqliteSearchIndex(path, { inProcess: true }), { follow: false });
    await writeScenario(app);
    await app.close();
    const raw = new Database(path, { readonly: true });
    raw.prepare('ATTACH DATABASE ? AS search').run(searchIndexPath(path));
    const plan = (sql: string, params: unknown[]): string => (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail).join('\n');
    for (const text of ['overdue', '-overdue invoice']) {
      const { sql, params } = compileSqliteSearch({ tenant: 'acme', query: parseSearchQuery(text), sessionIds: [], labels: {}, types: [], order: 'newest', limit: 10 });
      const p = plan(sql, params);
      expect(p).toContain('SEARCH main.feed USING COVERING INDEX feed_deletes (position>?)');
      // The one walk of feed records by position: those below the last pruned position (the
      // sessions created again behind retention), an empty range outside a catch-up.
      expect(p.match(/main\.feed USING INTEGER PRIMARY KEY.*/g)).toEqual(['main.feed USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)']);
    }
    raw.close();
  });

  it('SQLite: the follower indexes off the append path; a session deleted before it is followed leaves nothing; a plain connection writes events', async () => {
    const path = dirs.freshPath();
    const app = new SessionService(new BlobbingStore(new SqliteSessionStore({ path }), DEFAULT_BLOB_MIN_BYTES), undefined, clock());
    const index = new SqliteSearchIndex(path);
    app.search.useIndex(index, { follow: false });
    await writeScenario(app);
    const count = (sql: string): number => {
      const raw = new Database(searchIndexPath(path), { readonly: true });
      try {
        return raw.prepare(sql).pluck().get() as number;
      } finally {
        raw.close();
      }
    };
    // Appends did not index: everything is lag.
    expect(count('SELECT count(*) FROM search_docs')).toBe(0);
    expect((await index.lag()).events).toBe(16);
    // Deleted while not followed: never found, and nothing of it is indexed once followed.
    await app.deleteSession(ACME, 'billing');
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual([]);
    expect(await index.lag()).toEqual({ events: 0, seconds: 0 });
    expect(count("SELECT count(*) FROM search_docs WHERE session_id = 'acme/billing'")).toBe(0);
    expect(count("SELECT count(*) FROM search_progress WHERE session_id = 'acme/billing'")).toBe(0);
    expect(count('SELECT count(*) FROM search_docs')).toBeGreaterThan(0);
    // Read-your-writes: an acknowledged append is found by the next search.
    await app.append(ACME, 'ops', [user('u9', 'the walrus migrated')]);
    expect(await allHits(app, ACME, { query: 'walrus' })).toEqual(['ops@5']);
    // A tool result followed in a later batch than its call is indexed under the call's tool.
    await app.append(ACME, 'ops', [assistant('a9', 'Searching.', [['c9', 'grep', '{"pattern":"walrus"}']])]);
    expect(await index.followBatch(100)).toMatchObject({ caughtUp: true });
    await app.append(ACME, 'ops', [result('r9', 'c9', 'no match')]);
    expect(await allHits(app, ACME, { query: 'tool:grep' })).toEqual(['ops@7', 'ops@6']);
    await app.close();
    // A connection without Palimpsest's functions (the sqlite3 shell) can insert events: no trigger calls JavaScript.
    const plain = new Database(path);
    plain.prepare("INSERT INTO sessions (id, version, created_at) VALUES ('plain', 0, 1)").run();
    plain.prepare(`INSERT INTO events (session_id, seq, type, time, data, surface_op, scrc, dcrc)
      VALUES ('plain', 0, 'user/message', 1, '{"role":"user","content":[{"type":"text","text":"narwhal"}]}', 'append', 0, 0)`).run();
    plain.prepare("UPDATE sessions SET next_seq = 1, event_count = 1 WHERE id = 'plain'").run();
    plain.close();
    const again = new SqliteSearchIndex(path);
    expect(await again.followBatch(100)).toEqual({ events: 1, caughtUp: true });
    expect(count("SELECT d.session_id FROM search_fts JOIN search_docs d ON d.doc = search_fts.rowid WHERE search_fts MATCH 'narwhal'")).toBe('plain');
    await again.close();
  });

  it('SQLite: the background follower indexes without a search', async () => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    const index = new SqliteSearchIndex(path);
    app.search.useIndex(index, { idleMs: 5 });
    await writeScenario(app);
    await vi.waitFor(async () => expect(await index.lag()).toEqual({ events: 0, seconds: 0 }), { timeout: 5000, interval: 10 });
    const raw = new Database(searchIndexPath(path), { readonly: true });
    expect(raw.prepare("SELECT count(*) FROM search_docs WHERE session_id = 'acme/billing'").pluck().get()).toBe(2);
    raw.close();
    await app.close();
  });

  it('SQLite: verify finds an index that lost an entry, reindex repairs it; migrating a version-6 file indexes its events', async () => {
    const path = dirs.freshPath();
    let app = new SessionService(new BlobbingStore(new SqliteSessionStore({ path }), DEFAULT_BLOB_MIN_BYTES), undefined, clock());
    await writeScenario(app);
    await app.close();
    // No index file yet (the server creates it at start): verify checks the events only.
    expect(verifyFile(path).problems).toEqual([]);
    expect(verifyFile(path).searchIndexLag).toBeUndefined();
    let index = new SqliteSearchIndex(path);
    expect(index.opened).toEqual({ state: 'created' });
    // Nothing followed yet: the lag is no problem for verify, which reports it.
    expect(verifyFile(path)).toMatchObject({ problems: [], searchIndexLag: { events: 16 } });
    expect(await index.lag()).toMatchObject({ events: 16 });
    expect(await index.followBatch(1)).toEqual({ events: expect.any(Number) as number, caughtUp: false });
    while (!(await index.followBatch(1000)).caughtUp);
    expect(await index.lag()).toEqual({ events: 0, seconds: 0 });
    await index.close();
    expect(verifyFile(path)).toMatchObject({ problems: [], searchIndexLag: { events: 0, seconds: 0 } });
    const raw = new Database(searchIndexPath(path));
    raw.prepare("DELETE FROM search_docs WHERE session_id = 'acme/billing' AND seq = 1").run();
    raw.close();
    expect(verifyFile(path).problems).toEqual([
      'search index: session "acme/billing" seq 1 is missing (run palimpsest reindex)',
      'search index: 1 FTS rows have no entry (run palimpsest reindex)',
    ]);
    index = new SqliteSearchIndex(path);
    expect(await index.reindex()).toEqual({ sessions: 5, events: 16 });
    expect(await index.verifyIndex()).toEqual({ events: 16, problems: [] });
    // The FTS index itself damaged (its segments' pages gone): FTS5's check fails, reindex empties it and writes it again.
    let fts = new Database(searchIndexPath(path));
    fts.unsafeMode(true); // FTS5's shadow tables are read-only otherwise (SQLITE_DBCONFIG_DEFENSIVE)
    fts.prepare('DELETE FROM search_fts_data WHERE id > 10').run();
    fts.close();
    expect((await index.verifyIndex()).problems).toEqual([expect.stringMatching(/^search index: the FTS5 index does not match search_docs/) as string]);
    // A reindex interrupted right after emptying the damaged index (its first session's callback
    // throws) leaves no entry marked indexed without its FTS rows: the follower completes it.
    await expect(index.reindex(() => {
      throw new Error('interrupted');
    })).rejects.toThrow('interrupted');
    expect(await index.verifyIndex()).toEqual({ events: 2, problems: [] }); // the first session's 2 events
    while (!(await index.followBatch!(1000)).caughtUp);
    expect(await index.verifyIndex()).toEqual({ events: 16, problems: [] });
    fts = new Database(searchIndexPath(path));
    fts.unsafeMode(true);
    fts.prepare('DELETE FROM search_fts_data WHERE id > 10').run();
    fts.close();
    expect(await index.reindex()).toEqual({ sessions: 5, events: 16 });
    expect(await index.verifyIndex()).toEqual({ events: 16, problems: [] });
    await index.close();
    expect(verifyFile(path).problems).toEqual([]);
    // A version-6 database (written before the index existed, its index file gone): migrated, the
    // follower builds the index file from the feed's start.
    for (const f of ['', '-wal', '-shm']) rmSync(`${searchIndexPath(path)}${f}`, { force: true });
    const old = new Database(path);
    old.exec('DROP INDEX events_structure; ALTER TABLE events DROP COLUMN tokens; ALTER TABLE events DROP COLUMN usage;');
    old.exec('CREATE INDEX events_structure ON events (session_id, seq, type, surface_op, source_event_seqs, ignorable, scrc, dcrc);');
    old.exec('DROP INDEX feed_deletes; DROP TABLE feed_pruned; DELETE FROM schema_migrations WHERE version >= 7; PRAGMA user_version = 6;');
    old.close();
    app = new SessionService(new BlobbingStore(new SqliteSessionStore({ path }), DEFAULT_BLOB_MIN_BYTES), undefined, clock());
    index = new SqliteSearchIndex(path);
    app.search.useIndex(index);
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    expect(await index.verifyIndex()).toEqual({ events: 16, problems: [] });
    await app.close();
  });

  it('SQLite index file: created beside the database, reopened as left; damaged or missing, rebuilt from the events and reported', async () => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    let index = new SqliteSearchIndex(path);
    expect(index.opened).toEqual({ state: 'created' });
    expect(existsSync(`${path}-search`)).toBe(true);
    app.search.useIndex(index, { follow: false });
    await writeScenario(app);
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    await index.close();
    // A file with another FTS5 automerge (an older build's 8): set at opening, no rebuild.
    const automerge = (): unknown => {
      const raw = new Database(searchIndexPath(path));
      try {
        return raw.prepare("SELECT v FROM search_fts_config WHERE k = 'automerge'").pluck().get();
      } finally {
        raw.close();
      }
    };
    expect(automerge()).toBe(SEARCH_FTS_AUTOMERGE);
    const older = new Database(searchIndexPath(path));
    older.exec("INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', 8)");
    older.close();
    expect(automerge()).toBe(8);
    index = new SqliteSearchIndex(path);
    expect(index.opened).toEqual({ state: 'opened' });
    expect(automerge()).toBe(SEARCH_FTS_AUTOMERGE);
    expect(await index.lag()).toEqual({ events: 0, seconds: 0 });
    await index.close();
    // A file of the version before (1: the text kept in search_docs as FTS5's external content): rebuilt from the events.
    const v1 = new Database(searchIndexPath(path));
    v1.pragma('user_version = 1');
    v1.close();
    index = new SqliteSearchIndex(path);
    expect(index.opened).toEqual({ state: 'rebuilt', reason: `its version 1 is not ${SEARCH_FILE_VERSION}` });
    app.search.useIndex(index, { follow: false });
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    expect(await index.verifyIndex()).toEqual({ events: 16, problems: [] });
    await index.close();
    // Damaged (not a database any more): deleted, created again, built from the feed's start.
    writeFileSync(`${path}-search`, 'x'.repeat(8192));
    rmSync(`${path}-search-wal`, { force: true });
    rmSync(`${path}-search-shm`, { force: true });
    expect(verifyFile(path).problems).toEqual([expect.stringMatching(/^search index: the search index file .*-search is damaged: .*\(the server rebuilds it at start; or run palimpsest reindex\)$/) as string]);
    index = new SqliteSearchIndex(path);
    expect(index.opened).toMatchObject({ state: 'rebuilt', reason: expect.any(String) as string });
    app.search.useIndex(index, { follow: false });
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    expect(await index.verifyIndex()).toEqual({ events: 16, problems: [] });
    await index.close();
    // Damaged past its header and schema (pages 3 on overwritten): found by reading every page, rebuilt.
    const bytes = readFileSync(`${path}-search`);
    expect(bytes.length).toBeGreaterThan(3 * 4096);
    bytes.fill(0x78, 2 * 4096);
    writeFileSync(`${path}-search`, bytes);
    index = new SqliteSearchIndex(path);
    expect(index.opened).toMatchObject({ state: 'rebuilt', reason: expect.any(String) as string });
    app.search.useIndex(index, { follow: false });
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    await index.close();
    // Missing: created and built again the same way.
    for (const f of ['', '-wal', '-shm']) rmSync(`${path}-search${f}`, { force: true });
    index = new SqliteSearchIndex(path);
    expect(index.opened).toEqual({ state: 'created' });
    app.search.useIndex(index, { follow: false });
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    await app.close();
    // Another history beside the old index (the database replaced by an empty one): rebuilt.
    for (const f of ['', '-wal', '-shm', '-heads']) rmSync(`${path}${f}`, { force: true });
    await new SqliteSessionStore({ path }).close();
    const inode = statSync(`${path}-search`).ino;
    index = new SqliteSearchIndex(path);
    expect(index.opened).toEqual({ state: 'rebuilt', reason: expect.stringContaining('past the database') as string });
    expect(statSync(`${path}-search`).ino).toBe(inode); // emptied in place: another process's connections stay on it
    expect(await index.verifyIndex()).toEqual({ events: 0, problems: [] });
    await index.close();
  });

  it('SQLite index file: a store opening it while another connection is creating it waits, never deletes it; a lock held too long fails the opening and leaves the file; both end on one file', async () => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    // Another process mid-way through creating the index file (its write lock held).
    const other = new Database(`${path}-search`);
    other.pragma('journal_mode = WAL');
    const inode = statSync(`${path}-search`).ino;
    other.exec('BEGIN IMMEDIATE');
    other.exec('CREATE TABLE search_follow (id INTEGER NOT NULL PRIMARY KEY, position INTEGER NOT NULL)');
    expect(() => new SqliteSearchIndex(path, { busyTimeoutMs: 50, inProcess: true })).toThrow(/search index file .*-search.*(locked|busy)/);
    expect(statSync(`${path}-search`).ino).toBe(inode);
    other.exec('ROLLBACK');
    // Two stores open it: one creates it, the other opens what the first created; one file.
    const first = new SqliteSearchIndex(path, { inProcess: true });
    const second = new SqliteSearchIndex(path, { inProcess: true });
    expect([first.opened, second.opened]).toEqual([{ state: 'created' }, { state: 'opened' }]);
    expect(statSync(`${path}-search`).ino).toBe(inode);
    app.search.useIndex(first, { follow: false });
    await writeScenario(app);
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    const q = { tenant: 'acme', query: parseSearchQuery('overdue'), sessionIds: [], labels: {}, types: [], order: 'newest' as const, limit: 10 };
    expect((await second.searchCandidates(q)).map((c) => c.seq)).toEqual([1, 0]);
    expect(other.prepare('SELECT count(*) FROM search_docs').pluck().get()).toBe(16);
    other.close();
    await second.close();
    await app.close();
  });

  it('SQLite index file: one that is no database, while the database\'s write lock is held past the busy timeout, is left as it is and the opening says which file, what happened and what to do', async () => {
    const path = dirs.freshPath();
    const store = new SqliteSessionStore({ path });
    await store.close();
    writeFileSync(searchIndexPath(path), 'not a database, not at all: '.repeat(200));
    const before = readFileSync(searchIndexPath(path));
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE'); // another process writing the database
    let error: Error | undefined;
    try {
      new SqliteSearchIndex(path, { busyTimeoutMs: 50, inProcess: true }).close();
    } catch (e) {
      error = e as Error;
    }
    other.exec('ROLLBACK');
    other.close();
    expect(error?.message).toMatch(new RegExp(`^could not open the search index file ${searchIndexPath(path).replaceAll(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: `));
    expect(error?.message).toContain('it is no database (file is not a database)');
    expect(error?.message).toContain('the database\'s write lock, needed to delete it, was held past the busy timeout (database is locked)');
    expect(error?.message).toContain('start again once the other process is done');
    expect(readFileSync(searchIndexPath(path))).toEqual(before);
    // Once the lock is free, the next opening deletes it and creates it again.
    const index = new SqliteSearchIndex(path, { inProcess: true });
    expect(index.opened).toEqual({ state: 'rebuilt', reason: 'file is not a database' });
    await index.close();
  });

  it.each(['a later', 'the same'] as const)('SQLite: a session deleted and created again under its id (%s millisecond) is never answered from the old entries, even before the follower forgot them', async (when) => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, when === 'the same' ? () => 1_700_000_000_000 : clock());
    const index = new SqliteSearchIndex(path);
    app.search.useIndex(index, { follow: false });
    await writeScenario(app);
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    await app.deleteSession(ACME, 'billing');
    await app.createSession(ACME, { id: 'billing', labels: { team: 'money' } });
    await app.append(ACME, 'billing', [user('u1', 'invoice 4712 was paid')]);
    // Straight from the index, the follower not run: the old incarnation's entries are still there, never answered.
    const q = { tenant: 'acme', query: parseSearchQuery('overdue'), sessionIds: [], labels: {}, types: [], order: 'newest' as const, limit: 10 };
    expect(await index.searchCandidates(q)).toEqual([]);
    expect(await index.verifyIndex()).toMatchObject({ problems: [] }); // lag, not damage
    expect((await index.lag()).events).toBe(1); // the new life's one event
    expect(await allHits(app, ACME, { query: 'paid' })).toEqual(['billing@0']);
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual([]);
    const raw = new Database(searchIndexPath(path), { readonly: true });
    expect(raw.prepare("SELECT count(*) FROM search_docs WHERE session_id = 'acme/billing'").pluck().get()).toBe(1);
    raw.close();
    expect(await index.verifyIndex()).toMatchObject({ problems: [] });
    await app.close();
  });

  it('SQLite: a page makes the text of the hits it returns only: one event parsed per hit, none for the candidate past the page', async () => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    const index = new SqliteSearchIndex(path, { inProcess: true });
    app.search.useIndex(index, { follow: false });
    await app.createSession(ACME, { id: 'zoo' });
    await app.append(ACME, 'zoo', [0, 1, 2, 3, 4, 5].map((i) => user(`u${i}`, `the tapir number ${i}`)));
    expect(await allHits(app, ACME, { query: 'tapir' })).toHaveLength(6); // indexed (the follower parses every event)
    const parse = vi.spyOn(JSON, 'parse');
    try {
      // Newest first: 3 hits of the 4 candidates asked for (one more than a page).
      const page = await app.search.search(ACME, { query: 'tapir', pageSize: 3 });
      expect(page.hits.map((h) => [h.seq, h.snippet.text])).toEqual([[5, 'the tapir number 5'], [4, 'the tapir number 4'], [3, 'the tapir number 3']]);
      expect(page.nextPageToken).not.toBe('');
      expect(parse.mock.calls.filter(([t]) => typeof t === 'string' && t.includes('tapir number')).length).toBe(3);
    } finally {
      parse.mockRestore();
    }
    await app.close();
  });

  it('SQLite: an entry the index holds for an event the search\'s snapshot of the events does not see is no hit (never one with an empty text)', async () => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    const index = new SqliteSearchIndex(path, { inProcess: true });
    app.search.useIndex(index, { follow: false });
    await app.createSession(ACME, { id: 'zoo' });
    await app.append(ACME, 'zoo', [user('u0', 'the tapir')]);
    expect(await allHits(app, ACME, { query: 'tapir' })).toEqual(['zoo@0']);
    // What the follower may have indexed after the search's statement opened its snapshot of the
    // events (SQLite opens main's before search's): an entry for seq 1, which that snapshot has not.
    const raw = new Database(searchIndexPath(path));
    const doc = raw.prepare("INSERT INTO search_docs (session_id, seq, type, time, entered, replace, tools) VALUES ('acme/zoo', 1, 'user/message', 1900000000000, 1, 0, '[]')").run().lastInsertRowid;
    raw.prepare('INSERT INTO search_fts (rowid, text) VALUES (?, ?)').run(doc, 'the tapir ahead');
    raw.close();
    const q = { tenant: 'acme', query: parseSearchQuery('tapir'), sessionIds: [], labels: {}, types: [], order: 'newest' as const, limit: 10 };
    expect((await index.searchCandidates(q)).map((c) => [c.seq, c.text])).toEqual([[0, 'the tapir']]);
    expect((await index.searchCandidates({ ...q, order: 'score' })).map((c) => [c.seq, c.text])).toEqual([[0, 'the tapir']]);
    const page = await app.search.search(ACME, { query: 'tapir', pageSize: 10 });
    expect(page.hits.map((h) => [h.seq, h.snippet.text.includes('tapir')])).toEqual([[0, true]]);
    await app.close();
  });

  it('SQLite: a candidate whose session was deleted and created again before its text is read gives an empty text, never the new life\'s', async () => {
    const path = dirs.freshPath();
    let now = 1_800_000_000_000;
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, () => now);
    const index = new SqliteSearchIndex(path, { inProcess: true });
    app.search.useIndex(index, { follow: false });
    await app.createSession(ACME, { id: 'zoo' });
    await app.append(ACME, 'zoo', [user('u0', 'the old tapir')]);
    expect(await allHits(app, ACME, { query: 'tapir' })).toEqual(['zoo@0']);
    const q = { tenant: 'acme', query: parseSearchQuery('tapir'), sessionIds: [], labels: {}, types: [], order: 'newest' as const, limit: 10 };
    const [old] = await index.searchCandidates(q);
    // Between the query and the text: the session deleted and created again (a later millisecond), seq 0 another text.
    await app.deleteSession(ACME, 'zoo');
    now += 1;
    await app.createSession(ACME, { id: 'zoo' });
    await app.append(ACME, 'zoo', [user('u0', 'a new okapi')]);
    expect(old!.text).toBe('');
    await app.close();
  });

  it('SQLite: the index file\'s migration (11) drops the in-file index of a database of the version before; the index file is built from its events', async () => {
    const path = dirs.freshPath();
    copyFileSync(join(SCHEMA_FIXTURES, 'sqlite-v4.db'), path);
    copyFileSync(join(SCHEMA_FIXTURES, 'sqlite-v4.db-heads'), `${path}-heads`);
    // The version before the index file's migration (found by what it does: renumbering moves it).
    const fileMigration = MIGRATIONS.find((m) => m.description.startsWith('search index in its own file'))!;
    const v10 = new Database(path);
    migrateDatabase(v10, path, 4, {}, MIGRATIONS.filter((m) => m.version < fileMigration.version));
    const inFile = (db: Database.Database): string[] => db.prepare("SELECT name FROM sqlite_schema WHERE name LIKE 'search%' ORDER BY name").pluck().all() as string[];
    expect(inFile(v10)).toContain('search_fts');
    const indexed = v10.prepare('SELECT count(*) FROM search_docs').pluck().get() as number;
    expect(indexed).toBeGreaterThan(0);
    v10.close();
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    const check = new Database(path, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(MIGRATIONS.at(-1)!.version);
    expect(inFile(check)).toEqual([]);
    check.close();
    const index = new SqliteSearchIndex(path);
    expect(index.opened).toEqual({ state: 'created' });
    app.search.useIndex(index, { follow: false });
    await app.search.follower!.catchUp(10_000);
    expect(await index.verifyIndex()).toEqual({ events: indexed, problems: [] });
    await app.close();
  });

  it('SQLite verify: damage inside the index file is reported as the search index\'s (its integrity_check apart from the database\'s)', async () => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path }), undefined, clock());
    const index = new SqliteSearchIndex(path, { inProcess: true });
    app.search.useIndex(index, { follow: false });
    await writeScenario(app);
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
    await app.close();
    // The index search_docs_event says its columns are the other way round: its entries no longer match.
    const raw = new Database(`${path}-search`);
    raw.unsafeMode(true);
    raw.pragma('writable_schema = ON');
    raw.prepare("UPDATE sqlite_schema SET sql = 'CREATE UNIQUE INDEX search_docs_event ON search_docs (seq, session_id)' WHERE name = 'search_docs_event'").run();
    raw.close();
    const problems = verifyFile(path).problems;
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.filter((p) => !p.startsWith('search index: '))).toEqual([]);
    expect(problems).toContainEqual(expect.stringMatching(/^search index: integrity_check: .*search_docs_event.*\(stop the server and delete .*-search\*: the server builds it again at start\)$/) as string);
  });

  it('serve: an index file that cannot be opened (no damage: here a directory in its place) leaves it, logs an error and starts; SearchEvents answers FAILED_PRECONDITION SEARCH_INDEX_UNAVAILABLE saying why', async () => {
    const path = dirs.freshPath();
    await new SqliteSessionStore({ path }).close();
    mkdirSync(`${path}-search`);
    const logger = createLogger('silent');
    const logged = vi.spyOn(logger, 'error');
    const app = await composeApp({ ...DEFAULT_CONFIG, db: path }, logger);
    expect(logged).toHaveBeenCalledWith(expect.anything(), expect.stringContaining('SEARCH_INDEX_UNAVAILABLE'));
    await app.createSession(ACME, { id: 'ops' });
    await app.append(ACME, 'ops', [user('u1', 'walrus')]);
    const e = await app.search.search(ACME, { query: 'walrus' }).then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(DomainError);
    expect((e as DomainError).reason).toBe('SEARCH_INDEX_UNAVAILABLE');
    expect((e as DomainError).message).toMatch(/could not open the search index file .*-search.*restart/);
    expect(codeForReason('SEARCH_INDEX_UNAVAILABLE')).toBe(Code.FAILED_PRECONDITION);
    expect(statSync(`${path}-search`).isDirectory()).toBe(true);
    await app.close();
  });

  it('serve --search-index off: no index file, no follower; SearchEvents answers FAILED_PRECONDITION SEARCH_INDEX_OFF saying how to turn it on', async () => {
    expect(parseServeArgs([], {}).searchIndex).toBe(true);
    expect(parseServeArgs(['--search-index', 'off'], {}).searchIndex).toBe(false);
    expect(parseServeArgs(['--search-index=on'], {}).searchIndex).toBe(true);
    expect(() => parseServeArgs(['--search-index', 'maybe'], {})).toThrow('--search-index must be on or off, got "maybe"');
    const path = dirs.freshPath();
    const app = await composeApp({ ...DEFAULT_CONFIG, db: path, searchIndex: false }, createLogger('silent'));
    await app.createSession(ACME, { id: 'ops' });
    await app.append(ACME, 'ops', [user('u1', 'walrus')]);
    const e = await app.search.search(ACME, { query: 'walrus' }).then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(DomainError);
    expect((e as DomainError).reason).toBe('SEARCH_INDEX_OFF');
    expect((e as DomainError).message).toContain('--search-index on');
    expect(codeForReason('SEARCH_INDEX_OFF')).toBe(Code.FAILED_PRECONDITION);
    expect(app.search.follower).toBeUndefined();
    expect(existsSync(`${path}-search`)).toBe(false);
    await app.close();
  });
});
