/**
 * The SQLite schema migrations, in version order (the runner is ../migrate.ts).
 *
 * The schema of a database is the base of ../schema.ts (SCHEMA_SQL + FEED_SQL: version 4, frozen)
 * plus every migration below, applied in order: a fresh file runs all of them in its creation
 * transaction, an older file the ones above its `PRAGMA user_version` (after a backup beside the
 * file, in one transaction). So there is one path to every version and nothing to keep in sync.
 *
 * How to add a migration (a schema change of any kind: table, column, index, trigger):
 * 1. Add `NNNN-what-it-does.ts` here, NNNN the new version (one more than the last below, four
 *    digits), exporting `migration: SqliteMigration` with that `version`, a one-line `description`
 *    and `up(db)`: the DDL (and any data rewrite) from the previous version. It runs inside the
 *    migration transaction: no BEGIN/COMMIT/VACUUM/PRAGMA journal_mode of its own; document the new
 *    objects in the file as schema.ts documents its own.
 * 2. Append it to MIGRATIONS below and set SCHEMA_VERSION in ../schema.ts to its version.
 * 3. Never edit a migration that has shipped (databases out there ran it); fix forward with a new
 *    one. Do not import DDL from elsewhere that may change later: a migration is frozen text.
 * 4. Tests: test/integration/schema-migrations-sqlite.test.ts migrates the version-4 fixture
 *    through every migration and runs the store contract on the result; add a check of what
 *    yours changed there when it rewrites data. Renumbering (two branches took the same number)
 *    is a rename of the file, the `version` and the list order.
 */
import { migration as m0005 } from './0005-history-and-feed.js';
import { migration as m0006 } from './0006-blobs.js';
import { migration as m0007 } from './0007-search-index.js';
import { migration as m0008 } from './0008-feed-pruned.js';
import { migration as m0009 } from './0009-token-figures.js';
import { migration as m0010 } from './0010-search-follower.js';
import { migration as m0011 } from './0011-search-index-file.js';
import { migration as m0012 } from './0012-feed-deletes.js';
import type { SqliteMigration } from './migration.js';

export type { SqliteMigration };

/** The oldest schema version this build migrates from (older files: export with their build, import). */
export const OLDEST_MIGRATABLE = 4;

/** The base schema's version (schema.ts): a fresh file is created at it, then migrated. */
export const BASE_VERSION = 4;

/** Every migration, in version order: versions BASE_VERSION + 1, + 2, ... */
export const MIGRATIONS: readonly SqliteMigration[] = [m0005, m0006, m0007, m0008, m0009, m0010, m0011, m0012];
