/**
 * Version 11: the search index moves to a file of its own, `<db>-search` (issue #40;
 * ../search-file.ts), so that indexing never takes the events' write lock (the follower's
 * transactions and the appends' shared it: the appends waited in SQLite's busy handler).
 *
 * Dropped here: search_sessions_ad (a delete now leaves the index to the follower, which forgets
 * the session when it reaches the feed's `deleted` record; reads join the live sessions, so a
 * deleted session is never answered meanwhile), search_fts (with its shadow tables), search_docs,
 * search_calls, search_follow and search_progress. The pages they held go to the file's free list
 * (reused by later appends; `VACUUM` with the server stopped gives them back to the disk).
 *
 * The new file is created empty by the server at start and built by the follower from the feed's
 * start (reindex semantics, online: searches answer from what is built so far, and a search waits
 * for the follower as for any lag).
 */
import type Database from 'better-sqlite3';
import type { SqliteMigration } from './migration.js';

export const migration: SqliteMigration = {
  version: 11,
  description: 'search index in its own file (<db>-search): the in-file index tables and trigger dropped',
  up(db: Database.Database): void {
    db.exec(`
DROP TRIGGER search_sessions_ad;
DROP TABLE search_fts;
DROP TABLE search_docs;
DROP TABLE search_calls;
DROP TABLE search_follow;
DROP TABLE search_progress;
`);
  },
};
