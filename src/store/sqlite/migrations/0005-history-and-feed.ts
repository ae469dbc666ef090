/**
 * Version 5: the migration history, and the session feed folded into the migration path.
 *
 * - schema_migrations: one row per migration applied to this file (a fresh file records every
 *   migration of its creation): the version it produced, when (ms since epoch), the Palimpsest
 *   build that applied it, its description, and the backup made beside the file before it
 *   (NULL when the file was created at that version).
 * - The session feed (issue #35, schema.ts FEED_SQL) used to be added to a version-4 file at any
 *   open by an `ensureFeed` step, without a version bump; a version-4 file written before the feed
 *   existed gets its table, columns and triggers here (every statement is idempotent: a file
 *   that already has them is unchanged).
 */
import type Database from 'better-sqlite3';
import { FEED_SQL } from '../schema.js';
import type { SqliteMigration } from './migration.js';

export const migration: SqliteMigration = {
  version: 5,
  description: 'schema_migrations history table; the session feed added by migration instead of at every open',
  up(db: Database.Database): void {
    db.exec(`
CREATE TABLE schema_migrations (
  version     INTEGER NOT NULL PRIMARY KEY,
  applied_at  INTEGER NOT NULL,
  build       TEXT    NOT NULL,
  description TEXT    NOT NULL,
  backup      TEXT
) STRICT;`);
    const column = (name: string): boolean =>
      db.prepare("SELECT 1 FROM pragma_table_info('sessions') WHERE name = ?").pluck().get(name) !== undefined;
    if (!column('surface_length')) db.exec('ALTER TABLE sessions ADD COLUMN surface_length INTEGER NOT NULL DEFAULT 0');
    if (!column('metadata_version')) db.exec('ALTER TABLE sessions ADD COLUMN metadata_version INTEGER NOT NULL DEFAULT 0');
    db.exec(FEED_SQL);
  },
};
