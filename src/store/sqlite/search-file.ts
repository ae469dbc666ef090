/**
 * The SQLite search index's own database file (issue #40, since schema 11): `<db>-search` beside
 * the events' file (symlinks resolved, as `<db>-heads`), with its `-wal` and `-shm`. Indexing
 * never takes the events' write lock: the follower's and reindex's transactions write only this
 * file, and only read the events'.
 *
 * Every connection that uses it (the follower's thread, the search reader, `reindex`, `verify`)
 * opens the events' file as `main` and ATTACHes this one as schema `search`: a query joins the
 * index with `sessions` (a deleted session's entries are never returned, even before the
 * follower forgot them) and a batch reads the events and writes the index at one snapshot. Those
 * connections never write `main`, and their transactions are DEFERRED with a write to `search`
 * first: BEGIN IMMEDIATE would take the write lock of every attached file, the events' too.
 *
 * The file is derived data: missing, it is created empty and the follower builds it from the
 * feed's start (reindex semantics, online); damaged (another application's, a version this build
 * does not know, tables missing) or of another history (followed past the database's feed: a
 * database restored from a backup beside its old index), it is emptied and created again in
 * place, and rebuilt the same way; not a database at all, it is deleted and created again. The
 * opening reports why ({@link SearchFileOpened}). Several processes may open one database at
 * once: the check and the creation run on a connection to the file itself inside one BEGIN
 * IMMEDIATE ({@link settleSearchFile}), so a second process waits and finds it created, and no
 * process ever deletes a file another one uses as its index; any other error (a lock held past
 * the busy timeout, no file descriptors, a full disk) is thrown, the file left as it is.
 *
 * Schema (SEARCH_FILE_VERSION 2; version 1 kept the text twice, see below):
 * - search_docs (an indexed event's fields, no text), search_calls and search_fts: FTS5,
 *   contentless (`content=''`, `contentless_delete=1`: a row is deleted by its rowid alone),
 *   rowid = search_docs.doc, tokenizer `unicode61 remove_diacritics 2`, no prefix indexes
 *   (`foo*` reads the term range, see docs/search.md). The text is not stored in this file: a
 *   search reads its hits' events (the page's, not every match's) and makes their text again
 *   (search.ts); version 1 kept it in search_docs.text as FTS5's external content, a second copy
 *   of every event's text that each indexed event wrote (~0.7 µs of the follower's CPU per event
 *   and ~45% of the file). search_fts is written by the statements that write search_docs
 *   ({@link SEARCH_FTS_INSERT}, {@link SEARCH_FTS_FORGET}), not by triggers: a trigger runs its
 *   INSERT in a statement savepoint, and FTS5 flushes its pending terms to a new segment at every
 *   savepoint, which made a row cost ~29 µs instead of ~9 µs (bench/search-profile.mjs,
 *   docs/search.md). `automerge` {@link SEARCH_FTS_AUTOMERGE}: see there.
 * - search_follow: one row, `position`: every feed record at or below it is indexed.
 * - search_progress: per session incarnation (`created_at`), `next_seq`: its events below it are
 *   indexed. A session deleted and created again under the same id is another incarnation: its
 *   entries are forgotten (at the feed's `deleted` record, or on another `created_at`) before the
 *   new one's are written; reads join on `created_at` and skip sessions with a `deleted` record
 *   not followed yet (one created again in the same millisecond has the same `created_at`).
 */
import { existsSync, realpathSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';

/** The index file's application_id ('PSRC'), distinct from the events' file's. */
export const SEARCH_FILE_APPLICATION_ID = 0x50535243;
/** The index file's schema version (its own user_version). */
export const SEARCH_FILE_VERSION = 2;
/** The schema name the index file is attached under. */
export const SEARCH_SCHEMA = 'search';

/** The index file's schema, run on a connection to the file itself (schema `main`); idempotent. */
const DDL = `
CREATE TABLE IF NOT EXISTS search_docs (
  doc        INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  seq        INTEGER NOT NULL,
  type       TEXT    NOT NULL,
  time       INTEGER NOT NULL,
  entered    INTEGER NOT NULL,
  replace    INTEGER NOT NULL,
  tools      TEXT    NOT NULL
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS search_docs_event ON search_docs (session_id, seq);
CREATE INDEX IF NOT EXISTS search_docs_newest ON search_docs (time DESC, session_id DESC, seq DESC);
CREATE INDEX IF NOT EXISTS search_docs_replaces ON search_docs (session_id) WHERE replace = 1;
CREATE TABLE IF NOT EXISTS search_calls (
  session_id TEXT NOT NULL,
  call_id    TEXT NOT NULL,
  name       TEXT NOT NULL,
  PRIMARY KEY (session_id, call_id)
) STRICT, WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5(
  text, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS search_follow (
  id       INTEGER NOT NULL PRIMARY KEY CHECK (id = 0),
  position INTEGER NOT NULL
) STRICT;
INSERT OR IGNORE INTO search_follow (id, position) VALUES (0, 0);
CREATE TABLE IF NOT EXISTS search_progress (
  session_id TEXT    NOT NULL PRIMARY KEY,
  created_at INTEGER NOT NULL,
  next_seq   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`;

/**
 * FTS5's `automerge` of the index (its default is 4): a segment level is merged once it holds this
 * many segments. Every batch of the follower flushes its terms to a new segment at its commit, and
 * the merges rewrite them: 4 -> 8 took a row from ~9 to ~6 µs, 8 -> 16 the commit from ~4.5 to
 * ~3.5 µs per row (batches of 1,000 rows; more made no difference, FTS5's crisismerge bounds a
 * level at 16), for a few more segments per level that a query reads. Set on creation and, when it
 * differs, at every opening (a setting stored in search_fts_config, not a schema change: no rebuild).
 */
export const SEARCH_FTS_AUTOMERGE = 16;

/** Sets {@link SEARCH_FTS_AUTOMERGE} on the index file of `conn` (its `main`) when it holds another value. */
function setAutomerge(conn: Database.Database): void {
  const v = conn.prepare("SELECT v FROM main.search_fts_config WHERE k = 'automerge'").pluck().get();
  if (v !== SEARCH_FTS_AUTOMERGE) conn.exec(`INSERT INTO main.search_fts (search_fts, rank) VALUES ('automerge', ${SEARCH_FTS_AUTOMERGE})`); // FTS5 refuses a bound value here
}

/** Indexes a search_docs row in search_fts (parameters: doc, text). */
export const SEARCH_FTS_INSERT = 'INSERT INTO search.search_fts (rowid, text) VALUES (?, ?)';
/** Removes a session's search_docs rows from search_fts (parameter: session id); run before deleting the rows. */
export const SEARCH_FTS_FORGET = 'DELETE FROM search.search_fts WHERE rowid IN (SELECT doc FROM search.search_docs WHERE session_id = ?)';

const TABLES = ['search_calls', 'search_docs', 'search_follow', 'search_fts', 'search_progress'];

/** The index file of the events' file at `dbPath`. */
export function searchIndexPath(dbPath: string): string {
  let real = dbPath;
  try {
    real = realpathSync(dbPath);
  } catch {
    // Not there (yet): the name as given.
  }
  return join(dirname(real), `${basename(real)}-search`);
}

/** How opening found the index file. */
export interface SearchFileOpened {
  /** 'opened': as left; 'created': there was none; 'rebuilt': it was damaged and is created again. */
  readonly state: 'opened' | 'created' | 'rebuilt';
  /** Why it was rebuilt. */
  readonly reason?: string;
}

/** Why the index file (schema `schema` of `db`) is no usable index, or undefined when it is one. */
function damage(db: Database.Database, schema: string, feedHead: () => number): string | undefined {
  const app = db.pragma(`${schema}.application_id`, { simple: true }) as number;
  const version = db.pragma(`${schema}.user_version`, { simple: true }) as number;
  if (app !== SEARCH_FILE_APPLICATION_ID) return `application_id ${app} is not a Palimpsest search index's`;
  if (version !== SEARCH_FILE_VERSION) return `its version ${version} is not ${SEARCH_FILE_VERSION}`;
  const have = new Set(db.prepare(`SELECT name FROM ${schema}.sqlite_schema WHERE type = 'table'`).pluck().all() as string[]);
  const missing = TABLES.filter((t) => !have.has(t));
  if (missing.length > 0) return `tables missing: ${missing.join(', ')}`;
  // Followed past the database's feed: the index of another history (a database restored from a
  // backup, or replaced, beside the old index file). The head is read after the mark: the feed
  // only grows, so a follower elsewhere moving the mark meanwhile never looks past it.
  const mark = db.prepare(`SELECT position FROM ${schema}.search_follow WHERE id = 0`).pluck().get() as number | undefined;
  const head = feedHead();
  return mark !== undefined && mark > head ? `it followed the feed to position ${mark}, past the database's last ${head} (a restored or replaced database)` : undefined;
}

/** The feed's last position in the events' file (`db`'s `main`). */
function feedHeadOf(db: Database.Database): () => number {
  return () => db.prepare("SELECT coalesce((SELECT seq FROM main.sqlite_sequence WHERE name = 'feed'), 0)").pluck().get() as number;
}

/** The connection settings of the attached index (synchronous NORMAL: a crash loses at most the last batches, followed again). */
function configure(db: Database.Database): void {
  db.pragma(`${SEARCH_SCHEMA}.synchronous = NORMAL`);
  db.pragma(`${SEARCH_SCHEMA}.cache_size = -16000`);
}

/** Whether `e` is SQLite's definite finding that a file is no database or is damaged (not a lock, a full disk, a missing permission). */
function notADatabase(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT'));
}

/** Drops every table, view and trigger of the connection's `main` (virtual tables first: their shadow tables go with them). */
function dropAll(conn: Database.Database): void {
  const objects = (): { type: string; name: string; sql: string | null }[] =>
    conn.prepare("SELECT type, name, sql FROM main.sqlite_schema WHERE type IN ('table', 'view', 'trigger') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").all() as { type: string; name: string; sql: string | null }[];
  const quoted = (n: string): string => `"${n.replaceAll('"', '""')}"`;
  for (const o of objects()) if (o.type === 'trigger' || o.type === 'view') conn.exec(`DROP ${o.type.toUpperCase()} IF EXISTS ${quoted(o.name)}`);
  for (const o of objects()) if (o.sql?.toUpperCase().startsWith('CREATE VIRTUAL') === true) conn.exec(`DROP TABLE IF EXISTS ${quoted(o.name)}`);
  for (const o of objects()) conn.exec(`DROP TABLE IF EXISTS ${quoted(o.name)}`);
}

/** Whether the file at `path` is there and still no database (checked again before it is deleted). */
function stillNotADatabase(path: string): boolean {
  if (!existsSync(path)) return false;
  let conn: Database.Database | undefined;
  try {
    conn = new Database(path, { fileMustExist: true });
    conn.pragma('schema_version');
    conn.prepare('SELECT count(*) FROM main.sqlite_schema').get();
    // Damage past the schema's pages (where the failed read went): every page is read.
    return conn.pragma('quick_check', { simple: true }) !== 'ok';
  } catch (e) {
    return notADatabase(e);
  } finally {
    conn?.close();
  }
}

/**
 * Deletes the index file at `path`, found no database (`why`), under the write lock of `db` (the
 * events' file) if it is still none there; whether it did. A lock held past the busy timeout or a
 * deletion that fails is thrown saying which file, what happened and what to do.
 */
function deleteNotADatabase(db: Database.Database, path: string, why: string): boolean {
  const fail = (what: string, e: unknown): Error => new Error(`could not open the search index file ${path}: it is no database (${why}), and ${what} (${(e as Error).message}) (the index is derived data: ${
    what.startsWith('deleting') ? `stop the server, delete ${path}* and start again` : 'start again once the other process is done writing the database'}; the index is then rebuilt from the events)`, { cause: e });
  try {
    db.exec('BEGIN IMMEDIATE');
  } catch (e) {
    const busy = String((e as { code?: unknown }).code).startsWith('SQLITE_BUSY');
    throw fail(busy ? "the database's write lock, needed to delete it, was held past the busy timeout" : "the database's write lock, needed to delete it, could not be taken", e);
  }
  try {
    if (!stillNotADatabase(path)) return false;
    for (const f of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`]) rmSync(f, { force: true });
    return true;
  } catch (e) {
    throw fail('deleting it failed', e);
  } finally {
    db.exec('COMMIT');
  }
}

/**
 * Makes the index file at `path` a usable index, on a connection of its own to it, inside one
 * BEGIN IMMEDIATE (its write lock; waits up to `busyTimeoutMs` for another process creating or
 * writing it): empty, its schema is created; a whole index, it is left; otherwise (another
 * application's, another version, tables missing, another history) it is emptied and created
 * again in place, so that every other process's connection to the file stays on it. A file that
 * is no database at all (SQLITE_NOTADB, SQLITE_CORRUPT) is deleted (under the write lock of `db`,
 * the events' file, and checked again there) and created again; any other
 * error (a lock held too long, no more file descriptors, a full disk) is thrown, the file left.
 */
function settleSearchFile(db: Database.Database, path: string, busyTimeoutMs: number): SearchFileOpened {
  const feedHead = feedHeadOf(db);
  let deleted: string | undefined;
  for (let attempt = 0; ; attempt++) {
    let conn: Database.Database | undefined;
    try {
      conn = new Database(path);
      conn.pragma(`busy_timeout = ${busyTimeoutMs}`);
      conn.pragma('journal_mode = WAL');
      conn.exec('BEGIN IMMEDIATE');
      let opened: SearchFileOpened;
      if (conn.prepare('SELECT count(*) FROM main.sqlite_schema').pluck().get() === 0) {
        opened = { state: 'created' };
      } else {
        const reason = damage(conn, 'main', feedHead);
        if (reason === undefined) {
          setAutomerge(conn);
          conn.exec('COMMIT');
          return { state: 'opened' };
        }
        dropAll(conn);
        opened = { state: 'rebuilt', reason };
      }
      conn.exec(DDL);
      setAutomerge(conn);
      conn.pragma(`application_id = ${SEARCH_FILE_APPLICATION_ID}`);
      conn.pragma(`user_version = ${SEARCH_FILE_VERSION}`);
      conn.exec('COMMIT');
      return deleted === undefined ? opened : { state: 'rebuilt', reason: deleted };
    } catch (e) {
      if (conn?.inTransaction === true) conn.exec('ROLLBACK');
      if (attempt < 2 && notADatabase(e)) {
        // Not a database: nothing can have it open as an index. Deleted under the events' file's
        // write lock, checked again there: a process that deleted and created it meanwhile holds
        // it too, so a file another one just created is never deleted. Then created again.
        conn?.close();
        conn = undefined;
        if (deleteNotADatabase(db, path, (e as Error).message)) deleted = (e as Error).message;
        continue;
      }
      throw new Error(`could not open the search index file ${path}: ${(e as Error).message} (the file is left as it is: start again once the cause is gone, another process may hold its write lock; if \`palimpsest verify\` reports the file damaged, stop the server, delete ${path}* and start again: the index is rebuilt)`, { cause: e });
    } finally {
      conn?.close();
    }
  }
}

/**
 * Attaches the index file of `db` (a connection to the events' file, `main`) as `search`.
 * `repair`: create it when missing, empty it and create it again when damaged (the caller reports
 * the answer; {@link settleSearchFile}); without, a missing or damaged file is an error (a
 * connection opened after the one that repaired it: the follower's thread, `verify`).
 */
export function attachSearchFile(db: Database.Database, repair: boolean, busyTimeoutMs = 5000): SearchFileOpened {
  const path = searchIndexPath(db.name);
  let opened: SearchFileOpened = { state: 'opened' };
  if (repair) opened = settleSearchFile(db, path, busyTimeoutMs);
  else if (!existsSync(path)) throw new Error(`the search index file ${path} is missing`);
  let attached = false;
  let reason: string | undefined;
  try {
    db.prepare(`ATTACH DATABASE ? AS ${SEARCH_SCHEMA}`).run(path);
    attached = true;
    reason = damage(db, SEARCH_SCHEMA, feedHeadOf(db));
  } catch (e) {
    reason = (e as Error).message;
  }
  if (reason !== undefined) {
    if (attached) db.exec(`DETACH DATABASE ${SEARCH_SCHEMA}`);
    throw new Error(`the search index file ${path} is damaged: ${reason}`);
  }
  configure(db);
  return opened;
}

/**
 * Runs `fn` in a transaction that writes the index file only: DEFERRED, its first statement a
 * write to `search` (so the index's write lock is taken before any read, and the events' file is
 * only read, at the snapshot of its first read).
 */
export function inSearchTransaction<T>(db: Database.Database, fn: () => T): T {
  return db.transaction(() => {
    db.prepare(`UPDATE ${SEARCH_SCHEMA}.search_follow SET position = position WHERE id = 0`).run();
    return fn();
  }).deferred();
}
