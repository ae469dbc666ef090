/**
 * Version 3 (issue #35): the session feed. Version-2 sessions get `surface_length` (0 until their
 * next append: it is only reported on feed records) and `metadata_version` (0), and the feed
 * tables appear empty: a version-2 schema had no feed, so its history starts at the migration.
 * The feed_record trigger and update_labels are functions (schema.ts functionsSql, replaced after
 * every migration).
 */
import type { PostgresMigration } from './migration.js';

export const migration: PostgresMigration = {
  version: 3,
  description: 'session feed: sessions.surface_length and metadata_version, feed and feed_heads tables',
  async up(client, s) {
    await client.query(`
ALTER TABLE ${s}.sessions
  ADD COLUMN surface_length   bigint NOT NULL DEFAULT 0,
  ADD COLUMN metadata_version bigint NOT NULL DEFAULT 0;

CREATE TABLE ${s}.feed (
  tenant          text    NOT NULL,
  position        bigint  NOT NULL,
  session_id      text    COLLATE "C" NOT NULL,
  kind            text    NOT NULL,
  created_at      bigint  NOT NULL,
  next_seq        bigint  NOT NULL,
  event_count     bigint  NOT NULL,
  surface_length  bigint  NOT NULL,
  event_types     text[]  NOT NULL,
  labels          jsonb   NOT NULL,
  previous_labels jsonb,
  time            bigint  NOT NULL,
  PRIMARY KEY (tenant, position)
);

CREATE TABLE ${s}.feed_heads (
  tenant   text   NOT NULL PRIMARY KEY,
  position bigint NOT NULL
);`);
  },
};
