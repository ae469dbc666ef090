/**
 * What both SQL stores take and report about in-place schema migrations (docs/operations.md,
 * "Schema migrations"; the runners are src/store/sqlite/migrate.ts and
 * src/store/postgres/migrate.ts, the steps the files of each store's `migrations/` folder).
 */

/** Options of a store open that concern migrations. */
export interface MigrationOptions {
  /**
   * Refuse a database of an older schema version instead of migrating it (serve `--no-migrate`);
   * SCHEMA_VERSION_MISMATCH, saying to run without --no-migrate or to back up first.
   */
  readonly noMigrate?: boolean;
  /** The Palimpsest version recorded with each applied migration (default 'unknown'). */
  readonly build?: string;
  /** Called once a migration committed (the composition root logs it). */
  readonly onMigrated?: (report: MigrationReport) => void;
  /**
   * How long an open waits for the migration lock another process (SQLite: its write lock) or
   * replica (PostgreSQL: the schema's advisory lock) holds while it migrates, ms (default
   * 600000, ten minutes: a migration copies a SQLite file first, and a PostgreSQL step may
   * rewrite a large table). Past it the open fails, saying another process holds the lock.
   */
  readonly lockWaitMs?: number;
  /** Called once when the open has to wait for that lock (the composition root logs it). */
  readonly onWaiting?: (message: string) => void;
}

/** The default of MigrationOptions.lockWaitMs: ten minutes. */
export const DEFAULT_LOCK_WAIT_MS = 600_000;

/** The version a list of migrations leads to (`base` when it is empty). */
export function targetOf(migrations: readonly { readonly version: number }[], base: number): number {
  return migrations.length === 0 ? base : migrations[migrations.length - 1]!.version;
}

/** A migration that committed. */
export interface MigrationReport {
  /** The schema version the database had. */
  readonly from: number;
  /** The schema version it has now. */
  readonly to: number;
  /** SQLite: the backup of the file as it was, made beside it before migrating. */
  readonly backup?: string;
  /** How long the migration (backup included) took, ms. */
  readonly ms: number;
}

/** The message of a refusal under --no-migrate. */
export function noMigrateMessage(what: string, from: number, to: number): string {
  return `${what} has schema version ${from}, this build needs ${to}; refusing to migrate it under --no-migrate ` +
    '(PALIMPSEST_NO_MIGRATE): run without --no-migrate to migrate it in place (SQLite copies the file beside itself first), ' +
    "or back it up first (SQLite: `palimpsest backup` of the build that wrote it; PostgreSQL: pg_dump) and then run without it";
}

/** The message of a database written by a newer schema than this build knows. */
export function newerSchemaMessage(what: string, found: number, needs: number): string {
  return `${what} has schema version ${found}, this build needs ${needs}: it was migrated by a newer Palimpsest, and a build ` +
    'never migrates a schema back; run that build (or a newer one), or restore the backup made before the migration';
}

/** The message of a database older than the oldest version this build migrates from. */
export function tooOldMessage(what: string, found: number, needs: number, oldest: number): string {
  return `${what} has schema version ${found}, this build needs ${needs} and migrates from version ${oldest} on: ` +
    'export with the build that wrote it and import with this one';
}
