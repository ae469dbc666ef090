/**
 * The PostgreSQL schema migrations, in version order (the runner is ../migrate.ts).
 *
 * The tables of a schema are the base of ../schema.ts (baseSchemaSql: version 3, frozen) plus
 * every migration above it, applied in order: a fresh schema runs them right after the base in its
 * creation transaction, an older one (version 2 on) the ones above its `schema_version`, in one
 * transaction under the schema's advisory lock. The functions and the trigger (schema.ts
 * functionsSql) are then replaced from the running build.
 *
 * How to add a migration (a change of tables, columns, indexes or data; or of a function, see 3):
 * 1. Add `NNNN-what-it-does.ts` here, NNNN the new version (one more than the last below, four
 *    digits), exporting `migration: PostgresMigration` with that `version`, a one-line
 *    `description` and `up(client, s)`: the statements from the previous version, every object
 *    qualified with the schema `s`. It runs inside the migrating transaction (no BEGIN/COMMIT, no
 *    CREATE INDEX CONCURRENTLY); document the new objects in the file.
 * 2. Append it to MIGRATIONS below and set SCHEMA_VERSION in ../schema.ts to its version.
 * 3. Functions: edit functionsSql in ../schema.ts (CREATE OR REPLACE; a changed argument list or
 *    result type needs a `DROP FUNCTION` of the old signature in your migration first), and bump
 *    the version with a migration (its `up` may do nothing) so existing schemas get the new text.
 * 4. Never edit a migration that has shipped; fix forward with a new one. A migration is frozen
 *    text: do not build it from DDL that may change later.
 * 5. Tests: test/integration/schema-migrations-postgres.test.ts migrates the version-2 and
 *    version-3 fixtures (test/fixtures/schema/) through every migration, compares the result with
 *    a fresh schema (catalog: columns, indexes, constraints, functions, triggers) and runs the
 *    store contract on a migrated schema. Renumbering (two branches took the same number) is a
 *    rename of the file, the `version` and the list order.
 */
import { migration as m0003 } from './0003-session-feed.js';
import { migration as m0004 } from './0004-history.js';
import { migration as m0005 } from './0005-search-index.js';
import { migration as m0006 } from './0006-lock-order.js';
import { migration as m0007 } from './0007-search-follower.js';
import { migration as m0008 } from './0008-blobs.js';
import { migration as m0009 } from './0009-no-key-update.js';
import { migration as m0010 } from './0010-search-tsv-written.js';
import type { PostgresMigration } from './migration.js';

export type { MigrationClient, PostgresMigration } from './migration.js';

/** The oldest schema version this build migrates from (older schemas: export with their build, import). */
export const OLDEST_MIGRATABLE = 2;

/** The base schema's version (schema.ts baseSchemaSql): a fresh schema is created at it, then migrated. */
export const BASE_VERSION = 3;

/** Every migration, in version order: from OLDEST_MIGRATABLE + 1 on (those up to BASE_VERSION only run on older schemas). */
export const MIGRATIONS: readonly PostgresMigration[] = [m0003, m0004, m0005, m0006, m0007, m0008, m0009, m0010];
