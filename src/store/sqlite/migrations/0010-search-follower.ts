/**
 * Version 10: the search index is kept by a follower of the session feed instead of the writer
 * (issue #40; ../search-follow.ts).
 *
 * - search_events_ai (the trigger that indexed a message event in its append transaction, calling
 *   JavaScript functions) is dropped: appends no longer pay for the index, and a connection
 *   without Palimpsest's functions (the `sqlite3` shell) can insert events again.
 * - search_follow: one row, `position`: the feed position the index has followed (every feed
 *   record at or below it is indexed).
 * - search_progress: per session, `next_seq`: the session's events below it are indexed.
 * - search_sessions_ad is recreated to also forget the session's progress (a deleted session
 *   leaves nothing in the index, in the delete's transaction).
 *
 * The index the trigger kept was complete up to this migration: the mark starts at the feed's
 * last position and every session's progress at its next_seq.
 */
import type Database from 'better-sqlite3';
import type { SqliteMigration } from './migration.js';

export const migration: SqliteMigration = {
  version: 10,
  description: 'search index kept by a feed follower: search_events_ai dropped, search_follow and search_progress',
  up(db: Database.Database): void {
    db.exec(`
DROP TRIGGER search_events_ai;
CREATE TABLE search_follow (
  id       INTEGER NOT NULL PRIMARY KEY CHECK (id = 0),
  position INTEGER NOT NULL
) STRICT;
CREATE TABLE search_progress (
  session_id TEXT    NOT NULL PRIMARY KEY,
  next_seq   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO search_follow (id, position) VALUES (0, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'feed'), 0));
INSERT INTO search_progress (session_id, next_seq) SELECT id, next_seq FROM sessions WHERE next_seq > 0;
DROP TRIGGER search_sessions_ad;
CREATE TRIGGER search_sessions_ad AFTER DELETE ON sessions BEGIN
  DELETE FROM search_docs WHERE session_id = OLD.id;
  DELETE FROM search_calls WHERE session_id = OLD.id;
  DELETE FROM search_progress WHERE session_id = OLD.id;
END;
`);
  },
};
