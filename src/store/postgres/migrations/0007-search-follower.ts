/**
 * Version 7: the search index is kept by a follower of the session feed instead of the writer
 * (issue #40; ../search-follow.ts), one indexer at a time across replicas (an advisory lock).
 *
 * - The search_index_event trigger (and its function) are dropped: appends no longer index.
 * - search_follow: per tenant, `position`: the tenant's feed records at or below it are indexed
 *   (a tenant's positions are given under its feed_heads row lock, so they commit in order).
 * - search_progress: per session, `next_seq`: its events below it are indexed.
 * - search_forget_session() also forgets the session's progress.
 *
 * The index the trigger kept was complete: marks start at feed_heads, progress at next_seq.
 */
import type { PostgresMigration } from './migration.js';

export const migration: PostgresMigration = {
  version: 7,
  description: 'search index kept by a feed follower: search_index_event dropped, search_follow, search_progress',
  async up(client, s) {
    await client.query(`
DROP TRIGGER search_index_event ON ${s}.events;
DROP FUNCTION ${s}.search_index_event();

CREATE TABLE ${s}.search_follow (
  tenant   text   NOT NULL PRIMARY KEY,
  position bigint NOT NULL
);
CREATE TABLE ${s}.search_progress (
  session_id text   COLLATE "C" NOT NULL PRIMARY KEY,
  next_seq   bigint NOT NULL
);
INSERT INTO ${s}.search_follow (tenant, position) SELECT tenant, position FROM ${s}.feed_heads;
INSERT INTO ${s}.search_progress (session_id, next_seq) SELECT id, next_seq FROM ${s}.sessions WHERE next_seq > 0;

CREATE OR REPLACE FUNCTION ${s}.search_forget_session() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  DELETE FROM ${s}.search_docs WHERE session_id = OLD.id;
  DELETE FROM ${s}.search_calls WHERE session_id = OLD.id;
  DELETE FROM ${s}.search_progress WHERE session_id = OLD.id;
  RETURN NULL;
END
$fn$;
`);
  },
};
