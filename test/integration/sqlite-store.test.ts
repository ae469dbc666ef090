import Database from 'better-sqlite3';
import fs, { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SqliteSessionStore, type SqliteStoreOptions } from '../../src/store/sqlite/sqlite-store.js';
import { APPLICATION_ID, SCHEMA_VERSION } from '../../src/store/sqlite/schema.js';
import { decodeSeqs, encodeSeqs } from '../../src/store/sqlite/codec.js';
import { StoreOpenError } from '../../src/store/store-errors.js';
import { DataCorruptedError } from '../../src/app/storage-error.js';
import { IMPORTER, LONG_LEASE, appendAt, ev, mixedEvents, newSession, req, storeContract } from './store-contract.js';

const root = mkdtempSync(join(tmpdir(), 'palimpsest-sqlite-'));
let fileCounter = 0;
const freshPath = (): string => join(root, `store-${process.pid}-${fileCounter++}.db`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

storeContract('SqliteSessionStore (durability full, setImmediate flush)', {
  open: async () => new SqliteSessionStore({ path: freshPath() }),
  commits: (store) => store.stats().commits,
  groupCommit: true,
  // Two connections (two SqliteSessionStore) on one file, as two server processes would be.
  database: async () => {
    const path = freshPath();
    return { open: async () => new SqliteSessionStore({ path, headWatchPollMs: 10 }) };
  },
});

storeContract('SqliteSessionStore (durability full, fsync inside COMMIT)', {
  open: async () => new SqliteSessionStore({ path: freshPath(), fullSync: 'inline' }),
  commits: (store) => store.stats().commits,
  groupCommit: true,
});

storeContract('SqliteSessionStore (durability full, appends written by the writer thread)', {
  open: async () => new SqliteSessionStore({ path: freshPath(), appendWriter: 'thread' }),
  commits: (store) => store.stats().commits,
  groupCommit: true,
  database: async () => {
    const path = freshPath();
    return { open: async () => new SqliteSessionStore({ path, appendWriter: 'thread', headWatchPollMs: 10 }) };
  },
});

storeContract('SqliteSessionStore (durability normal, microtask flush)', {
  open: async () => new SqliteSessionStore({ path: freshPath(), durability: 'normal', groupCommit: 'microtask' }),
  commits: (store) => store.stats().commits,
  groupCommit: true,
  database: async () => {
    const path = freshPath();
    return { open: async () => new SqliteSessionStore({ path, durability: 'normal', groupCommit: 'microtask', headWatchPollMs: 10 }) };
  },
});

function openError(options: SqliteStoreOptions): StoreOpenError {
  try {
    new SqliteSessionStore(options);
  } catch (error) {
    expect(error).toBeInstanceOf(StoreOpenError);
    return error as StoreOpenError;
  }
  throw new Error(`expected ${options.path} to be refused`);
}

describe('SqliteSessionStore: the database file', () => {
  let path: string;
  let store: SqliteSessionStore | undefined;
  beforeEach(() => {
    path = freshPath();
  });
  afterEach(async () => {
    await store?.close();
    store = undefined;
  });

  it('stamps a fresh file with the application id and schema version, in WAL mode', async () => {
    store = new SqliteSessionStore({ path });
    await store.close();
    store = undefined;
    const raw = new Database(path, { readonly: true });
    expect(raw.pragma('application_id', { simple: true })).toBe(APPLICATION_ID);
    expect(raw.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(raw.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").pluck().all()).toEqual([
      // The search index lives in its own file (<db>-search, src/store/sqlite/search-file.ts).
      'blobs', 'event_blobs', 'events', 'feed', 'feed_pruned', 'idempotency', 'schema_migrations', 'sessions', 'sqlite_sequence', 'tenants',
    ]);
    raw.close();
  });

  it('keeps sessions, events and idempotency records across close and reopen', async () => {
    store = new SqliteSessionStore({ path });
    await store.createSession(newSession('s', { labels: { a: 'b' } }), mixedEvents(0, 5));
    expect(await appendAt(store, 's', 5, mixedEvents(5, 3), { key: 'k', requestHash: 'h', surfaceLength: 4 })).toEqual({ kind: 'appended' });
    const before = await store.getSession('s');
    await store.close();
    store = new SqliteSessionStore({ path });
    expect(await store.getSession('s')).toStrictEqual(before);
    expect(await store.readEvents('s', { fromSeq: 0, direction: 'forward', limit: 100 })).toStrictEqual(mixedEvents(0, 8));
    expect(await appendAt(store, 's', 5, mixedEvents(5, 3), { key: 'k', requestHash: 'h' })).toEqual({
      kind: 'duplicate',
      result: { seqs: [5, 6, 7], requestHash: 'h', surfaceLength: 4 },
    });
    expect(await store.getSession('s')).toMatchObject({ nextSeq: 8, eventCount: 8 });
  });

  it('drops pending sessions whose lease passed (a crash mid-import) when it opens, and only those', async () => {
    let now = 500;
    store = new SqliteSessionStore({ path, now: () => now });
    await store.createSession(newSession('half', { pending: { owner: 'crashed', leaseUntil: 900 } }), mixedEvents(0, 4));
    await store.appendPending('half', mixedEvents(4, 4), { owner: 'crashed', leaseUntil: 1_000 });
    await store.createSession(newSession('live', { pending: true }), mixedEvents(0, 3));
    await store.createSession(newSession('done', { pending: true }), mixedEvents(0, 2));
    await store.publishSession('done', IMPORTER);
    expect(await store.getTenantUsage('')).toMatchObject({ sessions: 3 });
    await store.close();
    now = 999; // the lease has not passed yet: another process opening the file leaves it alone
    store = new SqliteSessionStore({ path, now: () => now });
    expect(await store.createSession(newSession('half'), [])).toEqual({ kind: 'exists' });
    await store.close();
    now = 1_001;
    store = new SqliteSessionStore({ path, now: () => now });
    expect(await store.createSession(newSession('half'), [])).toEqual({ kind: 'created' }); // the id is free again
    expect(await store.readStructure('half', 0)).toEqual([]);
    // The live import (long lease) is still there and can finish.
    expect(await store.appendPending('live', [ev(3)], { owner: IMPORTER, leaseUntil: LONG_LEASE })).toEqual({ kind: 'appended' });
    await store.publishSession('live', IMPORTER);
    expect(await store.getSession('live')).toMatchObject({ eventCount: 4 });
    expect(await store.getTenantUsage('')).toMatchObject({ sessions: 3 });
    expect(await store.getSession('done')).toMatchObject({ eventCount: 2 });
    await store.close();
    store = undefined;
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare("SELECT count(*) FROM events WHERE session_id = 'half'").pluck().get()).toBe(0);
    raw.close();
  });

  it('refuses a database of a newer schema version, naming both versions', async () => {
    store = new SqliteSessionStore({ path });
    await store.close();
    store = undefined;
    const raw = new Database(path);
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    const error = openError({ path });
    expect(error.reason).toBe('SCHEMA_VERSION_MISMATCH');
    expect(error.message).toBe(
      `database ${path} has schema version ${SCHEMA_VERSION + 1}, this build needs ${SCHEMA_VERSION}: it was migrated by a newer Palimpsest, and a build ` +
        'never migrates a schema back; run that build (or a newer one), or restore the backup made before the migration',
    );
  });

  it('refuses an SQLite file of another application and leaves it untouched', () => {
    const raw = new Database(path);
    raw.pragma('journal_mode = DELETE');
    raw.pragma('application_id = 1234');
    raw.exec('CREATE TABLE theirs (x)');
    raw.close();
    const bytes = readFileSync(path);
    const error = openError({ path });
    expect(error.reason).toBe('FOREIGN_DATABASE');
    expect(error.message).toContain('application_id 0x000004d2');
    expect(readFileSync(path).equals(bytes)).toBe(true);
  });

  it('refuses an unversioned but non-empty SQLite file', () => {
    const raw = new Database(path);
    raw.exec('CREATE TABLE sessions (id TEXT)');
    raw.close();
    const error = openError({ path });
    expect(error.reason).toBe('FOREIGN_DATABASE');
    expect(error.message).toContain('not a Palimpsest one');
  });

  it('refuses a file that is not an SQLite database and leaves it untouched', () => {
    const content = 'this is a JSONL session, not a database\n'.repeat(200);
    writeFileSync(path, content);
    const error = openError({ path });
    expect(error.reason).toBe('NOT_A_DATABASE');
    expect(readFileSync(path, 'utf8')).toBe(content);
  });

  it('reports a path it cannot open', () => {
    const error = openError({ path: join(root, 'missing-dir', 'x.db') });
    expect(error.reason).toBe('CANNOT_OPEN');
    expect(error.message).toContain('missing-dir');
  });

  it('reads the structure without touching the data column', async () => {
    store = new SqliteSessionStore({ path });
    await store.createSession(newSession('s'), mixedEvents(0, 10));
    const raw = new Database(path);
    raw.prepare("UPDATE events SET data = 'not json' WHERE session_id = 's'").run();
    raw.close();
    expect(await store.readStructure('s', 0)).toHaveLength(10);
    await expect(store.readEvents('s', { fromSeq: 0, direction: 'forward', limit: 1 })).rejects.toThrow(DataCorruptedError);
  });

  it('rolls back only the failing call of a group when an insert fails inside it', async () => {
    store = new SqliteSessionStore({ path });
    await store.createSession(newSession('a'), []);
    await store.createSession(newSession('b'), []);
    // A trigger makes one specific insert fail inside the shared transaction.
    const raw = new Database(path);
    raw.exec("CREATE TRIGGER boom BEFORE INSERT ON events WHEN NEW.type = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END");
    raw.close();
    const results = await Promise.allSettled([
      store.append('a', req(0, [ev(0, 'ok-a')])),
      store.append('b', req(0, [ev(0, 'fine'), ev(1, 'boom')])),
      store.append('b', req(0, [ev(0, 'ok-b')])),
    ]);
    expect(results[0]).toEqual({ status: 'fulfilled', value: { kind: 'appended' } });
    expect(results[1]).toMatchObject({ status: 'rejected', reason: { message: 'boom refused' } });
    expect(results[2]).toEqual({ status: 'fulfilled', value: { kind: 'appended' } });
    expect((await store.readEvents('b', { fromSeq: 0, direction: 'forward', limit: 10 })).map((e) => e.type)).toEqual(['ok-b']);
    expect(await store.getSession('b')).toMatchObject({ nextSeq: 1, eventCount: 1 });
    expect(store.stats().groupCommits).toBe(1);
  });

  it('inserts batches of every size around its multi-row INSERT (10 rows) in order; a row failing inside a chunk or after it fails its whole call', async () => {
    store = new SqliteSessionStore({ path });
    const initial = Array.from({ length: 23 }, (_, i) => ev(i, 'init', { i, text: 'é'.repeat(i) }));
    await store.createSession(newSession('a'), initial);
    const expected = [...initial];
    let next = 23;
    for (const size of [1, 9, 10, 11, 19, 20, 21, 37]) {
      const batch = Array.from({ length: size }, (_, i) => ev(next + i, `t${size}`, { size, i }, i % 4 === 1 ? { sourceEventSeqs: [0], surfaceOp: 'append' } : {}));
      expect(await appendAt(store, 'a', next, batch)).toEqual({ kind: 'appended' });
      expected.push(...batch);
      next += size;
    }
    const back = await store.readEvents('a', { fromSeq: 0, direction: 'forward', limit: 1000 });
    expect(back).toEqual(expected);
    const raw = new Database(path);
    raw.exec("CREATE TRIGGER boom BEFORE INSERT ON events WHEN NEW.type = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END");
    raw.close();
    for (const at of [5, 12]) {
      const batch = Array.from({ length: 15 }, (_, i) => ev(next + i, i === at ? 'boom' : 'ok'));
      await expect(appendAt(store, 'a', next, batch)).rejects.toThrow('boom refused');
    }
    expect(await store.getSession('a')).toMatchObject({ nextSeq: next, eventCount: next });
    expect(await store.readEvents('a', { fromSeq: 0, direction: 'forward', limit: 1000 })).toEqual(expected);
  });

  it('rolls back only a failing single-event call (no savepoint) and counts only what was stored', async () => {
    store = new SqliteSessionStore({ path });
    await store.createSession(newSession('a'), []);
    const raw = new Database(path);
    raw.exec("CREATE TRIGGER boom BEFORE INSERT ON events WHEN NEW.type = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END");
    raw.close();
    const results = await Promise.allSettled([
      store.append('a', req(0, [ev(0, 'ok-0')], { writer: 'A' })),
      store.append('a', req(1, [ev(1, 'boom')], { expectedWriter: 'A', writer: 'B' })),
      store.append('a', req(1, [ev(1, 'ok-1')], { expectedWriter: 'A', writer: 'C' })),
      store.append('a', req(3, [ev(3, 'late')], { expectedWriter: 'C', writer: 'D' })),
      store.append('a', req(2, [ev(2, 'ok-2')], { expectedWriter: 'C', writer: 'E', idempotency: { key: 'k', requestHash: 'h' } })),
    ]);
    expect(results[0]).toEqual({ status: 'fulfilled', value: { kind: 'appended' } });
    expect(results[1]).toMatchObject({ status: 'rejected', reason: { message: 'boom refused' } });
    expect(results[2]).toEqual({ status: 'fulfilled', value: { kind: 'appended' } });
    expect(results[3]).toEqual({ status: 'fulfilled', value: { kind: 'conflict', actualNextSeq: 2 } });
    expect(results[4]).toEqual({ status: 'fulfilled', value: { kind: 'appended' } });
    expect((await store.readEvents('a', { fromSeq: 0, direction: 'forward', limit: 10 })).map((e) => e.type)).toEqual(['ok-0', 'ok-1', 'ok-2']);
    expect(await store.getSession('a')).toMatchObject({ nextSeq: 3, eventCount: 3 });
    expect(await store.getIdempotent('a', 'k')).toMatchObject({ seqs: [2], requestHash: 'h' });
    expect(store.stats().groupCommits).toBe(1);
  });

  it('encodes seq lists compactly, [] as a zero-length blob, and round-trips any safe integer', () => {
    expect(encodeSeqs([]).length).toBe(0);
    expect([...encodeSeqs([5, 6, 4])]).toEqual([5, 2, 3]);
    for (const seqs of [[0], [Number.MAX_SAFE_INTEGER, 0, Number.MAX_SAFE_INTEGER], [300, 1, 70000, 69999]]) {
      expect(decodeSeqs(encodeSeqs(seqs))).toEqual(seqs);
    }
    expect(() => decodeSeqs(Buffer.from([0x80]))).toThrow(/truncated/);
  });
});

describe('SqliteSessionStore: durability full syncs the WAL off the event loop', () => {
  let store: SqliteSessionStore | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await store?.close();
    store = undefined;
  });

  /** Holds every fdatasync until released; returns the held callbacks. */
  function holdSyncs(): { held: Array<(err: NodeJS.ErrnoException | null) => void>; release: (err?: NodeJS.ErrnoException) => void } {
    const held: Array<(err: NodeJS.ErrnoException | null) => void> = [];
    vi.spyOn(fs, 'fdatasync').mockImplementation(((_fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
      held.push(cb);
    }) as typeof fs.fdatasync);
    return { held, release: (err) => { for (const cb of held.splice(0)) cb(err ?? null); } };
  }
  const turns = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
  };

  it('settles appends and runs reads only after the sync that covers their commit', async () => {
    const path = freshPath();
    store = new SqliteSessionStore({ path });
    await store.createSession(newSession('s'), []);
    const before = store.stats().syncs;
    const syncs = holdSyncs();
    let appended = false;
    const append = store.append('s', req(0, [ev(0)], { writer: 'first' })).then((o) => {
      appended = true;
      return o;
    });
    await turns(3);
    // Committed (another connection sees it) but not yet acknowledged, and not readable here.
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare("SELECT count(*) FROM events WHERE session_id = 's'").pluck().get()).toBe(1);
    raw.close();
    expect(appended).toBe(false);
    let read = false;
    const reading = store.readEvents('s', { fromSeq: 0, direction: 'forward', limit: 10 }).then((r) => {
      read = true;
      return r;
    });
    // Commits made while a sync runs wait for the next one.
    const second = store.append('s', req(1, [ev(1)], { expectedWriter: 'first' }));
    await turns(3);
    expect(syncs.held).toHaveLength(1);
    expect(read).toBe(false);
    syncs.release();
    expect(await append).toEqual({ kind: 'appended' });
    await turns(3);
    expect(syncs.held).toHaveLength(1);
    syncs.release();
    expect(await second).toEqual({ kind: 'appended' });
    expect((await reading).map((e) => e.seq)).toEqual([0, 1]);
    expect(read).toBe(true);
    expect(store.stats().syncs - before).toBe(2);
  });

  it('fails the store when a sync fails: the waiting calls and every later one reject, and nothing more is committed', async () => {
    const path = freshPath();
    store = new SqliteSessionStore({ path });
    await store.createSession(newSession('s'), []);
    const syncs = holdSyncs();
    const append = store.append('s', req(0, [ev(0)]));
    await turns(3);
    syncs.release(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    await expect(append).rejects.toThrow('EIO');
    await expect(store.append('s', req(0, [ev(0, 'after-failure')]))).rejects.toThrow('EIO');
    await expect(store.getSession('s')).rejects.toThrow('EIO');
    // Fail-stop: the append after the failure never reached the database.
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare("SELECT count(*) FROM events WHERE type = 'after-failure'").pluck().get()).toBe(0);
    raw.close();
  });

  it('syncs the WAL of the real file when the database path is a symlink', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'palimpsest-link-'));
    mkdirSync(join(dir, 'real'));
    const real = join(dir, 'real', 'p.db');
    const link = join(dir, 'link.db');
    new Database(real).close();
    rmSync(real);
    symlinkSync(join('real', 'p.db'), link);
    // A stale file where a naive "<path>-wal" would point must not be what gets synced.
    writeFileSync(`${link}-wal`, '');
    const synced: number[] = [];
    const original = fs.fdatasync;
    vi.spyOn(fs, 'fdatasync').mockImplementation(((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
      synced.push(fd);
      original(fd, cb);
    }) as typeof fs.fdatasync);
    const openSpy = vi.spyOn(fs, 'openSync');
    store = new SqliteSessionStore({ path: link });
    await store.createSession(newSession('s'), []);
    expect(await store.append('s', req(0, [ev(0)]))).toEqual({ kind: 'appended' });
    expect(synced.length).toBeGreaterThan(0);
    const walOpens = openSpy.mock.calls.map((c) => String(c[0])).filter((p) => p.endsWith('-wal'));
    expect(walOpens).toEqual([`${realpathSync(real)}-wal`]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('does not sync at durability normal or with fullSync inline', async () => {
    for (const options of [{ durability: 'normal' as const }, { fullSync: 'inline' as const }]) {
      const s = new SqliteSessionStore({ path: freshPath(), ...options });
      const spy = vi.spyOn(fs, 'fdatasync');
      await s.createSession(newSession('s'), []);
      await s.append('s', req(0, [ev(0)]));
      expect(spy).not.toHaveBeenCalled();
      expect(s.stats().syncs).toBe(0);
      await s.close();
      vi.restoreAllMocks();
    }
  });
});
