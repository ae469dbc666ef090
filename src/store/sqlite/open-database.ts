/**
 * Opening a database file: identity and version checks (application_id + user_version; a
 * foreign file, or one of a newer or too old schema version, is refused and left exactly as it
 * was), creation of a fresh file, in-place migration of an older one (migrate.ts), connection
 * pragmas, and the removal of pending imports whose lease passed.
 */
import Database from 'better-sqlite3';
import { StoreOpenError } from '../store-errors.js';
import { newerSchemaMessage, noMigrateMessage, tooOldMessage, type MigrationOptions } from '../migration-options.js';
import { createSchema, migrateDatabase, underMigrationLock } from './migrate.js';
import { OLDEST_MIGRATABLE } from './migrations/index.js';
import { APPLICATION_ID, SCHEMA_VERSION } from './schema.js';
import { registerSearchFunctions } from './search-schema.js';
import { BOUND_FRAMES } from './wal-checkpointer.js';

/** What opening needs of the store options. */
export interface OpenOptions extends MigrationOptions {
  readonly path: string;
  readonly durability?: 'full' | 'normal';
  readonly busyTimeoutMs?: number;
  /** 'thread': appends are written by the writer thread, which also runs the checkpoints (wal-checkpointer.ts). */
  readonly appendWriter?: 'thread' | 'inline';
}

/** The busy timeout of the store's connections, ms (default 5000). */
export function busyTimeoutMs(options: OpenOptions): number {
  return Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000));
}

/**
 * The settings of the store's read-write connections, its own and its writer thread's
 * (append-thread-worker.ts); `journal_mode = WAL` is the file's, set once by the store.
 *
 * - synchronous: FULL for durability 'full' when SQLite syncs inside COMMIT; NORMAL otherwise
 *   (background sync: SQLite writes WAL frames without fsync and WalSync makes them durable).
 * - temp_store = MEMORY: the statement journal in memory. An append call of more than one
 *   statement runs in its own SAVEPOINT inside the group transaction (group-commit.ts), and while
 *   a SAVEPOINT is open each INSERT of the call journals the pages it changes that existed when
 *   it started (the b-trees' last leaves and their parents), again for every statement, so the
 *   journal grows by ~3 KB per event until the call's RELEASE truncates it. Past 64 KiB SQLite
 *   spills it to a temporary file: with the default temp store, 100-event calls wrote ~3 KB more
 *   per event there, four times the WAL's own writes, in ~1.4 more write(2) calls per event
 *   (bench/README.md, tenth round). In memory it is a memcpy bounded by the call (~3 KB per event of
 *   it, ~3 MB at the default max_batch_events of 1,000; plus the old contents of freed pages it
 *   reuses), freed at the RELEASE. Nothing else of this store uses temporary storage at that
 *   scale: creates, imports and deletes run outside any SAVEPOINT (a cascading delete of a
 *   200,000-event session journals nothing), its sorts follow indexes, and its IN lists come
 *   from one request.
 */
export function configureConnection(db: Database.Database, durability: 'full' | 'normal', backgroundSync: boolean): void {
  db.pragma(`synchronous = ${durability === 'normal' || backgroundSync ? 'NORMAL' : 'FULL'}`);
  db.pragma('foreign_keys = ON');
  db.pragma('temp_store = MEMORY');
  // The search index's trigger computes an event's searchable text in JavaScript (issue #40).
  registerSearchFunctions(db);
}

/** Opens the file, checks it is a Palimpsest database of this schema version, configures the connection. */
export function openDatabase(options: OpenOptions, backgroundSync: boolean, now: () => number): Database.Database {
  const path = options.path;
  let db: Database.Database;
  try {
    db = new Database(path);
  } catch (cause) {
    throw new StoreOpenError('CANNOT_OPEN', path, `cannot open database ${path}: ${(cause as Error).message}`, { cause });
  }
  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs(options)}`);
    // Inspect before changing anything: a foreign file (or one refused) must be left exactly as it was.
    const found = checkIdentity(db, path, options.noMigrate === true);
    db.pragma('journal_mode = WAL');
    configureConnection(db, options.durability ?? 'full', backgroundSync);
    // With the writer thread, the WAL's checkpoints are its (off the thread, wal-checkpointer.ts):
    // this connection's rare commits (creates, deletes, imports) checkpoint only past the same
    // bound, not in the event loop each time the WAL holds 1,000 frames between two of them.
    if (options.appendWriter === 'thread') db.pragma(`wal_autocheckpoint = ${BOUND_FRAMES}`);
    prepareFile(db, options, found);
    // A streamed import whose owner's lease passed was abandoned (crash): drop it (cascades) and
    // take it off its tenant's counters. Another live process's import in progress stays.
    const expired = db.prepare('SELECT id, tenant, data_bytes FROM sessions WHERE pending = 1 AND lease_until < ?').raw();
    const drop = db.prepare('DELETE FROM sessions WHERE id = ?');
    const uncount = db.prepare('UPDATE tenants SET session_count = session_count - 1, data_bytes = data_bytes - ? WHERE tenant = ?');
    db.transaction(() => {
      for (const [id, tenant, bytes] of expired.all(now()) as [string, string, number][]) {
        drop.run(id);
        uncount.run(bytes, tenant);
      }
    }).immediate();
    return db;
  } catch (cause) {
    db.close();
    if (cause instanceof StoreOpenError) throw cause;
    const code = (cause as { code?: unknown }).code;
    if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') {
      throw new StoreOpenError('NOT_A_DATABASE', path, `${path} is not a Palimpsest database (not an SQLite file, or corrupt)`, {
        cause,
      });
    }
    throw new StoreOpenError('CANNOT_OPEN', path, `cannot open database ${path}: ${(cause as Error).message}`, { cause });
  }
}

/**
 * Brings the file `db` (found at version `found` by checkIdentity, 0 for a fresh file) to this
 * build's schema: creates it on a fresh file, migrates an older one. A fresh file is re-checked
 * under the write lock and what that finds is acted on: another process may have initialised it
 * meanwhile, and an older build at version 4, which this one then migrates.
 */
export function prepareFile(db: Database.Database, options: OpenOptions, found: number): void {
  const path = options.path;
  const busy = busyTimeoutMs(options);
  let version = found;
  if (version === 0) {
    version = underMigrationLock(db, path, busy, options, () => {
      const again = checkIdentity(db, path, options.noMigrate === true);
      if (again !== 0) return again;
      createSchema(db, options.build ?? 'unknown');
      return SCHEMA_VERSION;
    });
  }
  if (version < SCHEMA_VERSION) {
    const report = migrateDatabase(db, path, version, { ...options, busyTimeoutMs: busy });
    if (report !== undefined) options.onMigrated?.(report);
  }
}

/**
 * The schema version of a Palimpsest file this build opens (older ones are migrated), 0 for a
 * fresh empty file; throws StoreOpenError for a foreign file, a newer schema, one older than this
 * build migrates from, or (`noMigrate`) any older one.
 */
export function checkIdentity(db: Database.Database, path: string, noMigrate: boolean): number {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  const userVersion = db.pragma('user_version', { simple: true }) as number;
  if (applicationId === APPLICATION_ID) {
    if (userVersion > SCHEMA_VERSION) {
      throw new StoreOpenError('SCHEMA_VERSION_MISMATCH', path, newerSchemaMessage(`database ${path}`, userVersion, SCHEMA_VERSION));
    }
    if (userVersion < OLDEST_MIGRATABLE) {
      throw new StoreOpenError('SCHEMA_VERSION_MISMATCH', path, tooOldMessage(`database ${path}`, userVersion, SCHEMA_VERSION, OLDEST_MIGRATABLE));
    }
    if (userVersion < SCHEMA_VERSION && noMigrate) {
      throw new StoreOpenError('SCHEMA_VERSION_MISMATCH', path, noMigrateMessage(`database ${path}`, userVersion, SCHEMA_VERSION));
    }
    return userVersion;
  }
  if (applicationId !== 0) {
    throw new StoreOpenError(
      'FOREIGN_DATABASE',
      path,
      `${path} belongs to another application (application_id 0x${(applicationId >>> 0).toString(16).padStart(8, '0')}, ` +
        `Palimpsest uses 0x${APPLICATION_ID.toString(16)}); refusing to open it`,
    );
  }
  const objects = db.prepare('SELECT count(*) FROM sqlite_schema').pluck().get() as number;
  if (userVersion !== 0 || objects !== 0) {
    throw new StoreOpenError(
      'FOREIGN_DATABASE',
      path,
      `${path} is an SQLite database but not a Palimpsest one (no application_id, user_version ${userVersion}, ` +
        `${objects} schema objects); refusing to open it`,
    );
  }
  return 0;
}
