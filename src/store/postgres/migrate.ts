/**
 * Creating and migrating the PostgreSQL schema in place (docs/operations.md, "Schema
 * migrations"; the steps are the files of ./migrations/, whose index says how to add one).
 *
 * Runs inside the opening transaction, which holds `pg_advisory_xact_lock` on a key derived from
 * the schema name (open-database.ts): replicas started together take turns, and each reads the
 * version only once it holds the lock, so the first migrates and the others find the schema
 * current. PostgreSQL DDL is transactional: a failing step rolls everything back (the schema stays
 * at its version, as it was). A schema of a newer version is refused, naming both versions.
 */
import { StoreOpenError } from '../store-errors.js';
import {
  newerSchemaMessage, noMigrateMessage, targetOf, tooOldMessage, type MigrationOptions, type MigrationReport,
} from '../migration-options.js';
import { BASE_VERSION, MIGRATIONS, OLDEST_MIGRATABLE, type MigrationClient, type PostgresMigration } from './migrations/index.js';
import { baseSchemaSql, functionsSql } from './schema.js';

/** Runs the migrations above `from`, records them, replaces the functions and sets the version. */
async function runSteps(client: MigrationClient, s: string, from: number, migrations: readonly PostgresMigration[], build: string): Promise<void> {
  const applied: PostgresMigration[] = [];
  for (const m of migrations) {
    if (m.version <= from) continue;
    try {
      await m.up(client, s);
    } catch (cause) {
      throw new Error(`migration ${m.version} (${m.description}) failed: ${(cause as Error).message}`, { cause });
    }
    applied.push(m);
  }
  // The history table exists from version 4 on (0004 creates it): the rows go in after the steps.
  const to = targetOf(migrations, BASE_VERSION);
  for (const m of applied) {
    await client.query(`INSERT INTO ${s}.schema_migrations (version, build, description) VALUES ($1, $2, $3)`, [m.version, build, m.description]);
  }
  await client.query(functionsSql(s));
  await client.query(`UPDATE ${s}.schema_version SET version = $1`, [to]);
}

/**
 * Creates, checks or migrates schema `s` (see the module comment); call inside a transaction that
 * holds the schema's advisory lock. `where` names the database for messages. Returns the report
 * when it migrated an existing schema.
 */
export async function prepareSchema(
  client: MigrationClient, s: string, where: string, options: MigrationOptions, migrations: readonly PostgresMigration[] = MIGRATIONS,
): Promise<MigrationReport | undefined> {
  const started = Date.now();
  const to = targetOf(migrations, BASE_VERSION);
  const build = options.build ?? 'unknown';
  const found = (await client.query(
    `SELECT to_regclass($1) AS versions, (SELECT count(*)::int FROM pg_tables WHERE schemaname = $2) AS tables,
            EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $2) AS exists`,
    [`${s}.schema_version`, s],
  )) as { rows: { versions: string | null; tables: number; exists: boolean }[] };
  const row = found.rows[0]!;
  if (row.versions === null) {
    if (row.tables > 0) {
      throw new StoreOpenError('FOREIGN_DATABASE', where, `schema ${s} of ${where} holds ${row.tables} tables but no Palimpsest schema_version; refusing to use it (pick another schema)`);
    }
    // A schema the operator created (and granted) is used as is: CREATE SCHEMA needs the
    // CREATE privilege on the database, which such a role need not have.
    if (!row.exists) await client.query(`CREATE SCHEMA ${s}`);
    await client.query(baseSchemaSql(s));
    await runSteps(client, s, BASE_VERSION, migrations, build);
    return undefined;
  }
  const versions = (await client.query(`SELECT version FROM ${s}.schema_version`)) as { rows: { version: number }[] };
  const version = versions.rows[0]?.version;
  const what = `PostgreSQL store ${where} (schema ${s})`;
  if (version === to) return undefined;
  if (version === undefined) {
    throw new StoreOpenError('SCHEMA_VERSION_MISMATCH', where, `${what} has no schema version row; refusing to use it`);
  }
  if (version > to) throw new StoreOpenError('SCHEMA_VERSION_MISMATCH', where, newerSchemaMessage(what, version, to));
  if (version < OLDEST_MIGRATABLE) {
    throw new StoreOpenError('SCHEMA_VERSION_MISMATCH', where, tooOldMessage(what, version, to, OLDEST_MIGRATABLE));
  }
  if (options.noMigrate === true) throw new StoreOpenError('SCHEMA_VERSION_MISMATCH', where, noMigrateMessage(what, version, to));
  try {
    await runSteps(client, s, version, migrations, build);
  } catch (cause) {
    throw new StoreOpenError('MIGRATION_FAILED', where,
      `${what}: ${(cause as Error).message}; rolled back, the schema is unchanged at version ${version}`, { cause });
  }
  return { from: version, to, ms: Date.now() - started };
}
