/**
 * Version 8: the per-tenant feed prune mark (issue #35, src/store/sqlite/feed-retention.ts).
 *
 * - feed_pruned: one row per tenant whose feed records retention removed; `position` is the
 *   highest position removed (feed positions are global on SQLite, so a tenant's positions have
 *   holes and its oldest kept position does not tell whether a reader missed anything). A reader
 *   after position `p` missed pruned records exactly when `p < position`. Written by the prune in
 *   the transaction of its DELETE; never lowered.
 */
import type Database from 'better-sqlite3';
import type { SqliteMigration } from './migration.js';

export const migration: SqliteMigration = {
  version: 8,
  description: 'feed_pruned: the highest pruned feed position per tenant',
  up(db: Database.Database): void {
    db.exec(`
CREATE TABLE feed_pruned (
  tenant   TEXT    NOT NULL PRIMARY KEY,
  position INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`);
  },
};
