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
 * feed's start (reindex semantics, online); damaged (not a database, another application's, a
 * version this build does not know, tables missing) or of another history (followed past the
 * database's feed: a database restored from a backup beside its old index), it is deleted,
 * created again and rebuilt the same way, and the opening reports why ({@link SearchFileOpened});
 * never fatal.
 *
 * Schema (SEARCH_FILE_VERSION 1):
 * - search_docs, search_calls and search_fts (FTS5, external content over search_docs.text,
 *   tokenizer `unicode61 remove_diacritics 2`, no prefix indexes: `foo*` reads the term range,
 *   see docs/search.md), as schema 7 had them in the events' file. search_fts is written by the
 *   statements that write search_docs ({@link SEARCH_FTS_INSERT}, {@link SEARCH_FTS_FORGET}), not
 *   by triggers: a trigger runs its INSERT in a statement savepoint, and FTS5 flushes its pending
 *   terms to a new segment at every savepoint, which made a row cost ~29 µs instead of ~9 µs
 *   (bench/search-profile.mjs, docs/search.md). `automerge` 8 (FTS5's default 4): a segment level
 *   is merged once it holds 8 segments, not 4, so the follower's small batches (it catches up
 *   with what the appends just wrote) feed fewer merges (~9 -> ~6 µs per row measured).
 * - search_follow: one row, `position`: every feed record at or below it is indexed.
 * - search_progress: per session incarnation (`created_at`), `next_seq`: its events below it are
 *   indexed. A session deleted and created again under the same id is another incarnation: its
 *   entries are forgotten (at the feed's `deleted` record, or on another `created_at`) before the
 *   new one's are written; reads join on `created_at` and skip sessions with a `deleted` record
 *   not followed yet (one created again in the same millisecond has the same `created_at`).
 */
import { existsSync, realpathSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type Database from 'better-sqlite3';

/** The index file's application_id ('PSRC'), distinct from the events' file's. */
export const SEARCH_FILE_APPLICATION_ID = 0x50535243;
/** The index file's schema version (its own user_version). */
export const SEARCH_FILE_VERSION = 1;
/** The schema name the index file is attached under. */
export const SEARCH_SCHEMA = 'search';

const DDL = `
CREATE TABLE search.search_docs (
  doc        INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  seq        INTEGER NOT NULL,
  type       TEXT    NOT NULL,
  time       INTEGER NOT NULL,
  entered    INTEGER NOT NULL,
  replace    INTEGER NOT NULL,
  tools      TEXT    NOT NULL,
  text       TEXT    NOT NULL
) STRICT;
CREATE UNIQUE INDEX search.search_docs_event ON search_docs (session_id, seq);
CREATE INDEX search.search_docs_newest ON search_docs (time DESC, session_id DESC, seq DESC);
CREATE INDEX search.search_docs_replaces ON search_docs (session_id) WHERE replace = 1;
CREATE TABLE search.search_calls (
  session_id TEXT NOT NULL,
  call_id    TEXT NOT NULL,
  name       TEXT NOT NULL,
  PRIMARY KEY (session_id, call_id)
) STRICT, WITHOUT ROWID;
CREATE VIRTUAL TABLE search.search_fts USING fts5(
  text, content = 'search_docs', content_rowid = 'doc', tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TABLE search.search_follow (
  id       INTEGER NOT NULL PRIMARY KEY CHECK (id = 0),
  position INTEGER NOT NULL
) STRICT;
INSERT INTO search.search_follow (id, position) VALUES (0, 0);
INSERT INTO search.search_fts (search_fts, rank) VALUES ('automerge', 8);
CREATE TABLE search.search_progress (
  session_id TEXT    NOT NULL PRIMARY KEY,
  created_at INTEGER NOT NULL,
  next_seq   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`;

/** Indexes a search_docs row in search_fts (parameters: doc, text). */
export const SEARCH_FTS_INSERT = 'INSERT INTO search.search_fts (rowid, text) VALUES (?, ?)';
/** Removes a session's search_docs rows from search_fts (parameter: session id); run before deleting the rows. */
export const SEARCH_FTS_FORGET = "INSERT INTO search.search_fts (search_fts, rowid, text) SELECT 'delete', doc, text FROM search.search_docs WHERE session_id = ?";

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

/** Why the attached file is no usable index, or undefined when it is one. */
function damage(db: Database.Database): string | undefined {
  const app = db.pragma(`${SEARCH_SCHEMA}.application_id`, { simple: true }) as number;
  const version = db.pragma(`${SEARCH_SCHEMA}.user_version`, { simple: true }) as number;
  if (app !== SEARCH_FILE_APPLICATION_ID) return `application_id ${app} is not a Palimpsest search index's`;
  if (version !== SEARCH_FILE_VERSION) return `its version ${version} is not ${SEARCH_FILE_VERSION}`;
  const have = new Set(db.prepare(`SELECT name FROM ${SEARCH_SCHEMA}.sqlite_schema WHERE type = 'table'`).pluck().all() as string[]);
  const missing = TABLES.filter((t) => !have.has(t));
  if (missing.length > 0) return `tables missing: ${missing.join(', ')}`;
  // Followed past the database's feed: the index of another history (a database restored from a
  // backup, or replaced, beside the old index file).
  const mark = db.prepare(`SELECT position FROM ${SEARCH_SCHEMA}.search_follow WHERE id = 0`).pluck().get() as number | undefined;
  const head = db.prepare("SELECT coalesce((SELECT seq FROM main.sqlite_sequence WHERE name = 'feed'), 0)").pluck().get() as number;
  return mark !== undefined && mark > head ? `it followed the feed to position ${mark}, past the database's last ${head} (a restored or replaced database)` : undefined;
}

function create(db: Database.Database): void {
  db.pragma(`${SEARCH_SCHEMA}.journal_mode = WAL`);
  db.exec('BEGIN');
  try {
    db.exec(DDL);
    db.pragma(`${SEARCH_SCHEMA}.application_id = ${SEARCH_FILE_APPLICATION_ID}`);
    db.pragma(`${SEARCH_SCHEMA}.user_version = ${SEARCH_FILE_VERSION}`);
    db.exec('COMMIT');
  } catch (e) {
    db.exec('ROLLBACK');
    throw e;
  }
}

/** The connection settings of the attached index (synchronous NORMAL: a crash loses at most the last batches, followed again). */
function configure(db: Database.Database): void {
  db.pragma(`${SEARCH_SCHEMA}.synchronous = NORMAL`);
  db.pragma(`${SEARCH_SCHEMA}.cache_size = -16000`);
}

/**
 * Attaches the index file of `db` (a connection to the events' file, `main`) as `search`.
 * `repair`: create it when missing, delete and create it again when damaged (the caller reports
 * the answer); without, a missing or damaged file is an error (a connection opened after the
 * one that repaired it: the follower's thread, `verify`).
 */
export function attachSearchFile(db: Database.Database, repair: boolean): SearchFileOpened {
  const path = searchIndexPath(db.name);
  const existed = existsSync(path);
  if (!existed && !repair) throw new Error(`the search index file ${path} is missing`);
  const attach = (): void => {
    db.prepare(`ATTACH DATABASE ? AS ${SEARCH_SCHEMA}`).run(path);
  };
  let reason: string | undefined;
  let attached = false;
  try {
    attach();
    attached = true;
    const fresh = db.prepare(`SELECT count(*) FROM ${SEARCH_SCHEMA}.sqlite_schema`).pluck().get() === 0;
    if (fresh && repair) {
      create(db);
      configure(db);
      return { state: 'created' };
    }
    reason = damage(db);
  } catch (e) {
    reason = (e as Error).message;
  }
  if (reason === undefined) {
    configure(db);
    return { state: 'opened' };
  }
  if (attached) db.exec(`DETACH DATABASE ${SEARCH_SCHEMA}`);
  if (!repair) throw new Error(`the search index file ${path} is damaged: ${reason}`);
  for (const f of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`]) rmSync(f, { force: true });
  attach();
  create(db);
  configure(db);
  return { state: 'rebuilt', reason };
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
