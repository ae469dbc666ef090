/**
 * Creating and migrating the schema of a SQLite database in place (docs/operations.md, "Schema
 * migrations"; the steps are the files of ./migrations/, whose index says how to add one).
 *
 * - A fresh file gets the base schema (schema.ts, version 4) and then every migration, in its
 *   creation transaction: fresh and migrated files take the same path to every version.
 * - A file of an older version (OLDEST_MIGRATABLE or later) is migrated when it opens: in ONE
 *   `BEGIN IMMEDIATE` transaction, which first re-reads the version (another process may have
 *   migrated it while this one waited for the write lock: then there is nothing to do), then
 *   copies the file as it is to `<file>.v<old>-backup-<UTC time>` beside it, then runs the steps,
 *   records each in schema_migrations and sets `PRAGMA user_version`. A failing step rolls all of
 *   it back: the file stays at its version, exactly as it was, and the backup stays too.
 * - The backup is SQLite's online copy (`VACUUM INTO`, from a second connection, which reads the
 *   last committed state while this one holds the write lock; better-sqlite3's `db.backup()` is
 *   asynchronous and opening a store is not): one consistent snapshot, fsynced before any step.
 */
import { closeSync, existsSync, fsyncSync, openSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import { StoreOpenError } from '../store-errors.js';
import { newerSchemaMessage, type MigrationOptions, type MigrationReport } from '../migration-options.js';
import { BASE_VERSION, MIGRATIONS, OLDEST_MIGRATABLE, type SqliteMigration } from './migrations/index.js';
import { APPLICATION_ID, SCHEMA_SQL, SCHEMA_VERSION } from './schema.js';

/**
 * Why a tool that reads a file as this build's schema (verify, backup) cannot read `what` of
 * schema `version`, undefined when it can: a newer file, or an older one (which only a store open
 * migrates: the tools never change the file).
 */
export function versionProblem(what: string, version: number): string | undefined {
  if (version === SCHEMA_VERSION) return undefined;
  if (version > SCHEMA_VERSION) return newerSchemaMessage(what, version, SCHEMA_VERSION);
  if (version < OLDEST_MIGRATABLE) {
    return `${what} has schema version ${version}, this build needs ${SCHEMA_VERSION} and migrates from version ${OLDEST_MIGRATABLE} on: ` +
      'use the build that wrote it (export with it and import with this one)';
  }
  return `${what} has schema version ${version}, older than this build's ${SCHEMA_VERSION}: use the build that wrote it, or ` +
    'let this build migrate it first (palimpsest serve on it migrates it in place, after copying it beside itself)';
}

/** The version the migrations lead to. */
function targetOf(migrations: readonly SqliteMigration[]): number {
  return migrations.length === 0 ? BASE_VERSION : migrations[migrations.length - 1]!.version;
}

function record(db: Database.Database, m: SqliteMigration, build: string, backup: string | null): void {
  db.prepare('INSERT INTO schema_migrations (version, applied_at, build, description, backup) VALUES (?, ?, ?, ?, ?)')
    .run(m.version, Date.now(), build, m.description, backup);
}

/** Runs the migrations above `from` (inside the caller's transaction) and sets user_version. */
function runSteps(db: Database.Database, from: number, migrations: readonly SqliteMigration[], build: string, backup: string | null): void {
  for (const m of migrations) {
    if (m.version <= from) continue;
    try {
      m.up(db);
    } catch (cause) {
      throw new MigrationStepError(m, cause);
    }
    // Every migration from version 5 on has the history table (0005 creates it).
    record(db, m, build, backup);
  }
  db.pragma(`user_version = ${targetOf(migrations)}`);
}

class MigrationStepError extends Error {
  constructor(readonly migration: SqliteMigration, cause: unknown) {
    super(`migration ${migration.version} (${migration.description}) failed: ${(cause as Error).message}`, { cause });
  }
}

/** Creates the schema of a fresh file; call inside the creation transaction. */
export function createSchema(db: Database.Database, build: string, migrations: readonly SqliteMigration[] = MIGRATIONS): void {
  db.exec(SCHEMA_SQL);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  runSteps(db, BASE_VERSION, migrations, build, null);
}

/** `<file>.v<version>-backup-<UTC time>` (an absolute path, for the log), with a counter when that name is taken. */
export function backupName(path: string, version: number, now: Date = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const base = `${resolve(path)}.v${version}-backup-${stamp}`;
  let name = base;
  for (let i = 2; existsSync(name); i++) name = `${base}-${i}`;
  return name;
}

/** Copies the last committed state of `path` to a new file beside it (see the module comment). */
function backupBeside(path: string, version: number, busyTimeoutMs: number): string {
  const to = backupName(path, version);
  const reader = new Database(path, { readonly: true, fileMustExist: true });
  try {
    reader.pragma(`busy_timeout = ${busyTimeoutMs}`);
    reader.prepare('VACUUM INTO ?').run(to);
  } catch (cause) {
    rmSync(to, { force: true });
    throw new Error(`could not copy it to ${to} before migrating (the copy needs as much free space as the file): ${(cause as Error).message}`, { cause });
  } finally {
    reader.close();
  }
  const fd = openSync(to, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return to;
}

/**
 * Migrates `db` (the file `path`, found at version `from`, older than the migrations' target) in
 * place; see the module comment. Returns undefined when another process migrated it meanwhile.
 * Throws StoreOpenError MIGRATION_FAILED (the file left as it was) when a step fails.
 */
export function migrateDatabase(
  db: Database.Database, path: string, from: number, options: MigrationOptions & { readonly busyTimeoutMs?: number },
  migrations: readonly SqliteMigration[] = MIGRATIONS,
): MigrationReport | undefined {
  const started = Date.now();
  const to = targetOf(migrations);
  let backup: string | undefined;
  let found = from;
  try {
    const migrated = db.transaction((): boolean => {
      // Re-read under the write lock: another process may have migrated the file meanwhile.
      found = db.pragma('user_version', { simple: true }) as number;
      if (found > to) throw new StoreOpenError('SCHEMA_VERSION_MISMATCH', path, newerSchemaMessage(`database ${path}`, found, to));
      if (found === to) return false;
      backup = backupBeside(path, found, options.busyTimeoutMs ?? 5000);
      runSteps(db, found, migrations, options.build ?? 'unknown', backup);
      return true;
    }).immediate();
    if (!migrated) return undefined;
  } catch (cause) {
    if (cause instanceof StoreOpenError) throw cause;
    const kept = backup === undefined ? '' : `; the backup made before it is ${backup}`;
    const what = cause instanceof MigrationStepError ? cause.message : `migration failed: ${(cause as Error).message}`;
    throw new StoreOpenError('MIGRATION_FAILED', path,
      `database ${path}: ${what}; rolled back, the file is unchanged at schema version ${found}${kept}`, { cause });
  }
  return { from: found, to, ms: Date.now() - started, ...(backup === undefined ? {} : { backup }) };
}
