/**
 * Version 4: the migration history. schema_migrations has one row per migration applied to the
 * schema (a fresh schema records the migrations of its creation): the version it produced, when,
 * the Palimpsest build that applied it, and its description. Replicas started together migrate
 * once (migrate.ts), so each version has exactly one row.
 */
import type { PostgresMigration } from './migration.js';

export const migration: PostgresMigration = {
  version: 4,
  description: 'schema_migrations history table',
  async up(client, s) {
    await client.query(`
CREATE TABLE ${s}.schema_migrations (
  version     integer     NOT NULL PRIMARY KEY,
  applied_at  timestamptz NOT NULL DEFAULT now(),
  build       text        NOT NULL,
  description text        NOT NULL
);`);
  },
};
