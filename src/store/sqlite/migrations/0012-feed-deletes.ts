/**
 * Version 12: an index of the feed's `deleted` records (issue #40).
 *
 * - feed_deletes: a partial index of feed (position, session_id) WHERE kind = 'deleted'. Every
 *   search (and the lag, and the follower's catch-up behind retention) asks which sessions have a
 *   `deleted` record after the search follower's mark (src/store/sqlite/search-follow.ts
 *   sqliteDeletedUnfollowedSql): without it that is a walk of every record after the mark, all of
 *   them while the follower builds its index file from the feed's start; with it, of the deleted
 *   ones only (the index covers the query). A few bytes per deleted session.
 */
import type Database from 'better-sqlite3';
import type { SqliteMigration } from './migration.js';

export const migration: SqliteMigration = {
  version: 12,
  description: "feed_deletes: the feed's deleted records by position (a partial index)",
  up(db: Database.Database): void {
    db.exec("CREATE INDEX feed_deletes ON feed (position, session_id) WHERE kind = 'deleted';");
  },
};
