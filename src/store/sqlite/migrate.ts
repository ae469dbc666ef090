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
import { existsSync, rmSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { StoreOpenError } from '../store-errors.js';
import {
  DEFAULT_LOCK_WAIT_MS, newerSchemaMessage, targetOf, tooOldMessage, type MigrationOptions, type MigrationReport,
} from '../migration-options.js';
import { fsyncPath } from './fsync-path.js';
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
  if (version < OLDEST_MIGRATABLE) return tooOldMessage(what, version, SCHEMA_VERSION, OLDEST_MIGRATABLE);
  return `${what} has schema version ${version}, older than this build's ${SCHEMA_VERSION}: use the build that wrote it, or ` +
    'let this build migrate it first (palimpsest serve on it migrates it in place, after copying it beside itself)';
}

const RECORD_SQL = 'INSERT INTO schema_migrations (version, applied_at, build, description, backup) VALUES (?, ?, ?, ?, ?)';

/** Runs the migrations above `from` (inside the caller's transaction) and sets user_version. */
function runSteps(db: Database.Database, from: number, migrations: readonly SqliteMigration[], build: string, backup: string | null): void {
  // Prepared once the first step ran: every migration from version 5 on has the history table (0005 creates it).
  let record: Database.Statement | undefined;
  for (const m of migrations) {
    if (m.version <= from) continue;
    try {
      m.up(db);
    } catch (cause) {
      throw new MigrationStepError(m, cause);
    }
    record ??= db.prepare(RECORD_SQL);
    record.run(m.version, Date.now(), build, m.description, backup);
  }
  db.pragma(`user_version = ${targetOf(migrations, BASE_VERSION)}`);
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
  fsyncPath(to);
  // The new directory entry too: a crash must not lose the backup's name once a step ran.
  fsyncPath(dirname(to));
  return to;
}

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_BUSY_SNAPSHOT' || code === 'SQLITE_LOCKED';
}

/**
 * Takes the file's write lock (`BEGIN IMMEDIATE`) to create or migrate its schema. Another
 * process may hold it for a whole migration (the backup copy included), far longer than the busy
 * timeout of ordinary writes: when it is taken, this says so (onWaiting) and waits up to
 * `lockWaitMs` (the connection's busy timeout raised for that BEGIN only). Past it: a
 * StoreOpenError CANNOT_OPEN naming the other process and the version the file is at now.
 */
export function takeMigrationLock(db: Database.Database, path: string, busyTimeoutMs: number, options: MigrationOptions): void {
  const wait = Math.max(0, Math.floor(options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS));
  try {
    db.pragma('busy_timeout = 0');
    try {
      db.exec('BEGIN IMMEDIATE');
      return;
    } catch (error) {
      if (!isBusy(error)) throw error;
    }
    options.onWaiting?.(`database ${path}: another process holds the write lock (migrating the file?); waiting up to ${wait} ms for it`);
    db.pragma(`busy_timeout = ${wait}`);
    try {
      db.exec('BEGIN IMMEDIATE');
    } catch (error) {
      if (!isBusy(error)) throw error;
      const now = db.pragma('user_version', { simple: true }) as number;
      throw new StoreOpenError('CANNOT_OPEN', path,
        `database ${path}: another process holds the write lock (migrating it?) and did not release it within ${wait} ms; ` +
          `the file is at schema version ${now} now: start again once that process is done, or stop it`, { cause: error });
    }
  } finally {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  }
}

/**
 * Runs `body` in a transaction under the migration lock (takeMigrationLock): committed when it
 * returns, rolled back when it throws.
 */
export function underMigrationLock<T>(db: Database.Database, path: string, busyTimeoutMs: number, options: MigrationOptions, body: () => T): T {
  takeMigrationLock(db, path, busyTimeoutMs, options);
  try {
    const result = body();
    db.exec('COMMIT');
    return result;
  } catch (error) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw error;
  }
}

/**
 * Migrates `db` (the file `path`, found at version `from`, older than the migrations' target) in
 * place; see the module comment. Returns undefined when another process migrated it meanwhile.
 * Throws StoreOpenError MIGRATION_FAILED (the file left as it was) when a step fails, CANNOT_OPEN
 * when another process kept the write lock past `lockWaitMs`.
 */
export function migrateDatabase(
  db: Database.Database, path: string, from: number, options: MigrationOptions & { readonly busyTimeoutMs?: number },
  migrations: readonly SqliteMigration[] = MIGRATIONS,
): MigrationReport | undefined {
  const started = Date.now();
  const to = targetOf(migrations, BASE_VERSION);
  const busy = options.busyTimeoutMs ?? 5000;
  let backup: string | undefined;
  let found = from;
  try {
    const migrated = underMigrationLock(db, path, busy, options, (): boolean => {
      // Re-read under the write lock: another process may have migrated the file meanwhile.
      found = db.pragma('user_version', { simple: true }) as number;
      if (found > to) throw new StoreOpenError('SCHEMA_VERSION_MISMATCH', path, newerSchemaMessage(`database ${path}`, found, to));
      if (found === to) return false;
      backup = backupBeside(path, found, busy);
      runSteps(db, found, migrations, options.build ?? 'unknown', backup);
      return true;
    });
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
