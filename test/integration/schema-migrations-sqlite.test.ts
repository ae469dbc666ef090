/**
 * In-place schema migration of SQLite files (src/store/sqlite/migrate.ts) on a database written
 * by the build of schema 4 (test/fixtures/schema/sqlite-v4.db, scripts/make-schema-fixture.ts):
 * the data reads back the same, the backup beside the file opens as the old version, the result
 * matches a fresh file, a failing step leaves the file as it was, a process that meets a file
 * migrated meanwhile does nothing, --no-migrate and a too old file are refused; and the store
 * contract on a migrated file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import type { MigrationReport } from '../../src/store/migration-options.js';
import { backupName, createSchema, migrateDatabase } from '../../src/store/sqlite/migrate.js';
import { checkIdentity, prepareFile } from '../../src/store/sqlite/open-database.js';
import { BASE_VERSION, MIGRATIONS, type SqliteMigration } from '../../src/store/sqlite/migrations/index.js';
import { APPLICATION_ID, SCHEMA_VERSION } from '../../src/store/sqlite/schema.js';
import { SqliteSessionStore, type SqliteStoreOptions } from '../../src/store/sqlite/sqlite-store.js';
import { StoreOpenError } from '../../src/store/store-errors.js';
import { backupDatabase } from '../../src/store/sqlite/backup.js';
import { verifyFile } from '../../src/store/sqlite/verify.js';
import { parseServeArgs } from '../../src/cli/serve.js';
import { openStore as openConfiguredStore } from '../../src/main.js';
import type { Logger } from '../../src/server/logger.js';
import { SCHEMA_FIXTURES, expectFixtureSessions } from '../support/schema-fixtures.js';
import { tempDbDir } from '../support/temp-db.js';
import { storeContract } from './store-contract.js';

const tmp = tempDbDir('palimpsest-migrate-');
const FIXTURE = join(SCHEMA_FIXTURES, 'sqlite-v4.db');

/** A copy of the schema-4 fixture (with its heads record unless `heads` is false). */
function copyFixture(heads = true): string {
  const path = tmp.freshPath();
  copyFileSync(FIXTURE, path);
  if (heads) copyFileSync(`${FIXTURE}-heads`, `${path}-heads`);
  return path;
}

function backupsOf(path: string): string[] {
  return readdirSync(dirname(path)).filter((f) => f.startsWith(`${basename(path)}.v`)).map((f) => join(dirname(path), f));
}

/** What a migration may change, as text: schema objects, version, every row of every table. */
function contents(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    const objects = db.prepare("SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_autoindex%' ORDER BY name").all() as { type: string; name: string }[];
    const rows = objects.filter((o) => o.type === 'table').map((o) => db.prepare(`SELECT * FROM "${o.name}"`).raw().all());
    return JSON.stringify({ version: db.pragma('user_version', { simple: true }), objects, rows });
  } finally {
    db.close();
  }
}

function open(path: string, options: Partial<SqliteStoreOptions> = {}): SqliteSessionStore {
  return new SqliteSessionStore({ path, appendWriter: 'inline', ...options });
}

function openError(path: string, options: Partial<SqliteStoreOptions> = {}): StoreOpenError {
  try {
    open(path, options);
  } catch (e) {
    expect(e).toBeInstanceOf(StoreOpenError);
    return e as StoreOpenError;
  }
  throw new Error('the store opened');
}

/**
 * Another process holding the write lock of `path` (BEGIN IMMEDIATE), as one migrating it does
 * for the whole backup copy: resolves once it holds it; it releases it after `releaseMs`, or
 * holds it until killed.
 */
async function lockHolder(path: string, releaseMs?: number): Promise<ChildProcess> {
  const release = releaseMs === undefined ? 'setInterval(() => {}, 60000);' : `setTimeout(() => { db.exec('COMMIT'); db.close(); }, ${releaseMs});`;
  const script = `const db = new (require('better-sqlite3'))(process.argv[1]); db.exec('BEGIN IMMEDIATE'); process.stdout.write('locked\\n'); ${release}`;
  const child = spawn(process.execPath, ['-e', script, path], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the lock holder exited (${code})`)));
  });
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}

describe('SQLite schema migrations', () => {
  it('lists the migrations in version order, one per version from the base on, the last one SCHEMA_VERSION', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(Array.from({ length: MIGRATIONS.length }, (_, i) => BASE_VERSION + 1 + i));
    expect(MIGRATIONS.at(-1)!.version).toBe(SCHEMA_VERSION);
  });

  it('migrates a schema-4 file in place after a backup beside it: the sessions read back the same, the feed goes on, one history row', async () => {
    const path = copyFixture();
    const reports: MigrationReport[] = [];
    const store = open(path, { build: 'test-build', onMigrated: (r) => reports.push(r) });
    const app = new SessionService(store);
    try {
      expect(reports).toEqual([{ from: 4, to: SCHEMA_VERSION, backup: expect.stringMatching(/\.v4-backup-\d{8}T\d{6}Z$/) as string, ms: expect.any(Number) as number }]);
      await expectFixtureSessions(app, 'sqlite-v4');
      const end = await store.feedEnd('acme');
      await app.updateSession({ tenant: 'acme' }, 'rich', { setLabels: { migrated: 'yes' } });
      expect((await store.readFeed({ tenant: 'acme', after: end, limit: 10 })).map((r) => [r.kind, r.sessionId, r.labels['migrated']])).toEqual([
        ['labels_changed', 'acme/rich', 'yes'],
      ]);
    } finally {
      await app.close();
    }
    const db = new Database(path, { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(db.prepare('SELECT version, build, backup FROM schema_migrations').all()).toEqual(
      MIGRATIONS.map((m) => ({ version: m.version, build: 'test-build', backup: reports[0]!.backup })));
    db.close();

    // The backup is the file as it was: schema 4, every row of the fixture, and it is the only one.
    const backup = reports[0]!.backup!;
    expect(backupsOf(path)).toEqual([backup]);
    expect(contents(backup)).toBe(contents(FIXTURE));
    const old = new Database(backup, { readonly: true });
    expect([old.pragma('application_id', { simple: true }), old.pragma('user_version', { simple: true })]).toEqual([APPLICATION_ID, 4]);
    old.close();

    // Opening again migrates nothing more.
    const again = open(path, { onMigrated: (r) => reports.push(r) });
    await again.close();
    expect(reports).toHaveLength(1);
    expect(backupsOf(path)).toHaveLength(1);
  });

  it('a migrated file has exactly the schema of a fresh one', async () => {
    const migrated = copyFixture();
    await open(migrated).close();
    const fresh = tmp.freshPath();
    await open(fresh).close();
    const schema = (path: string): unknown => {
      const db = new Database(path, { readonly: true });
      try {
        return [db.pragma('user_version', { simple: true }), db.prepare('SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name').all()];
      } finally {
        db.close();
      }
    };
    expect(schema(migrated)).toEqual(schema(fresh));
  });

  it('a failing migration step rolls everything back: the file stays at version 4, as it was (the backup stays)', () => {
    const path = copyFixture();
    const before = contents(path);
    const failing: SqliteMigration = {
      version: SCHEMA_VERSION + 1,
      description: 'a step that fails halfway',
      up(db) {
        db.exec('CREATE TABLE half_done (x INTEGER)');
        db.exec('INSERT INTO no_such_table VALUES (1)');
      },
    };
    const db = new Database(path);
    let error: unknown;
    try {
      error = (() => {
        try {
          migrateDatabase(db, path, 4, {}, [...MIGRATIONS, failing]);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
    } finally {
      db.close();
    }
    expect(error).toBeInstanceOf(StoreOpenError);
    expect((error as StoreOpenError).reason).toBe('MIGRATION_FAILED');
    const [backup] = backupsOf(path);
    expect((error as Error).message).toBe(
      `database ${path}: migration ${SCHEMA_VERSION + 1} (a step that fails halfway) failed: no such table: no_such_table; ` +
        `rolled back, the file is unchanged at schema version 4; the backup made before it is ${backup}`,
    );
    expect(contents(path)).toBe(before);
    expect(contents(backup!)).toBe(before);
  });

  it('a process that read version 4 before another migrated the file finds it migrated under the write lock: no second backup or history row', async () => {
    const path = copyFixture();
    const late = new Database(path);
    expect(late.pragma('user_version', { simple: true })).toBe(4); // what this "process" saw at its open
    await open(path).close(); // the other process migrates meanwhile
    expect(migrateDatabase(late, path, 4, {})).toBeUndefined();
    expect(late.prepare('SELECT count(*) FROM schema_migrations').pluck().get()).toBe(MIGRATIONS.length);
    late.close();
    expect(backupsOf(path)).toHaveLength(1);
  });

  it('waits for another process holding the write lock (a migration\'s backup copy takes long) past the busy timeout, says so, then migrates', async () => {
    const path = copyFixture();
    const holder = await lockHolder(path, 1000);
    const waiting: string[] = [];
    const reports: MigrationReport[] = [];
    const store = open(path, { busyTimeoutMs: 100, onWaiting: (m) => waiting.push(m), onMigrated: (r) => reports.push(r) });
    await store.close();
    await exited(holder);
    expect(waiting).toEqual([`database ${path}: another process holds the write lock (migrating the file?); waiting up to 600000 ms for it`]);
    expect(reports).toMatchObject([{ from: 4, to: SCHEMA_VERSION }]);
    expect(backupsOf(path)).toHaveLength(1);
    const db = new Database(path, { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    db.close();
  });

  it('past lockWaitMs it fails saying another process holds the write lock and the version the file is at, never "unchanged"; the file stays as it was', async () => {
    const path = copyFixture();
    const before = contents(path);
    const holder = await lockHolder(path);
    let error: StoreOpenError;
    try {
      error = openError(path, { lockWaitMs: 200 });
    } finally {
      holder.kill();
      await exited(holder);
    }
    expect(error.reason).toBe('CANNOT_OPEN');
    expect(error.message).toBe(`database ${path}: another process holds the write lock (migrating it?) and did not release it within 200 ms; ` +
      'the file is at schema version 4 now: start again once that process is done, or stop it');
    expect(contents(path)).toBe(before);
    expect(backupsOf(path)).toEqual([]);
  });

  it('a fresh file another process initialised while this one waited for the lock: at this version it is left alone, at version 4 (an older build) it is migrated', () => {
    for (const [migrations, migrated] of [[MIGRATIONS, false], [[], true]] as const) {
      const path = tmp.freshPath();
      const late = new Database(path);
      const found = checkIdentity(late, path, false); // what this "process" saw at its open: a fresh file
      expect(found).toBe(0);
      const other = new Database(path);
      other.transaction(() => createSchema(other, 'other build', migrations)).immediate(); // the other process, meanwhile
      other.close();
      const reports: MigrationReport[] = [];
      prepareFile(late, { path, onMigrated: (r) => reports.push(r) }, found);
      expect(late.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      expect(late.prepare('SELECT count(*) FROM schema_migrations').pluck().get()).toBe(MIGRATIONS.length);
      late.close();
      expect(reports).toMatchObject(migrated ? [{ from: 4, to: SCHEMA_VERSION }] : []);
      expect(backupsOf(path)).toHaveLength(migrated ? 1 : 0);
    }
  });

  it('--no-migrate refuses a schema-4 file, saying to run without it or back up first, and leaves the file byte for byte', () => {
    const path = copyFixture();
    const bytes = readFileSync(path);
    const error = openError(path, { noMigrate: true });
    expect(error.reason).toBe('SCHEMA_VERSION_MISMATCH');
    expect(error.message).toBe(
      `database ${path} has schema version 4, this build needs ${SCHEMA_VERSION}; refusing to migrate it under --no-migrate ` +
        '(PALIMPSEST_NO_MIGRATE): run without --no-migrate to migrate it in place (SQLite copies the file beside itself first), ' +
        'or back it up first (SQLite: `palimpsest backup` of the build that wrote it; PostgreSQL: pg_dump) and then run without it',
    );
    expect(readFileSync(path).equals(bytes)).toBe(true);
    expect(backupsOf(path)).toEqual([]);
  });

  it('refuses a file older than this build migrates from, saying what to do, and leaves it byte for byte', () => {
    const path = copyFixture(false);
    const raw = new Database(path);
    raw.pragma('user_version = 3');
    raw.close();
    const bytes = readFileSync(path);
    const error = openError(path);
    expect(error.reason).toBe('SCHEMA_VERSION_MISMATCH');
    expect(error.message).toBe(`database ${path} has schema version 3, this build needs ${SCHEMA_VERSION} and migrates from version 4 on: ` +
      'export with the build that wrote it and import with this one');
    expect(readFileSync(path).equals(bytes)).toBe(true);
  });

  it('serve --no-migrate and PALIMPSEST_NO_MIGRATE refuse a schema-4 file; without them serve migrates it and logs where the backup is', async () => {
    const path = copyFixture();
    await expect(openConfiguredStore(parseServeArgs(['--db', path, '--no-migrate'], {}))).rejects.toThrow(/refusing to migrate it under --no-migrate/);
    await expect(openConfiguredStore(parseServeArgs(['--db', path], { PALIMPSEST_NO_MIGRATE: '1' }))).rejects.toThrow(/refusing to migrate it under --no-migrate/);
    expect(backupsOf(path)).toEqual([]);
    const warnings: [unknown, string][] = [];
    const logger = { warn: (fields: unknown, message: string) => warnings.push([fields, message]) } as unknown as Logger;
    const store = await openConfiguredStore(parseServeArgs(['--db', path, '--no-migrate=false'], {}), logger);
    await store.close();
    const [backup] = backupsOf(path);
    expect(warnings).toEqual([[
      { schemaFrom: 4, schemaTo: SCHEMA_VERSION, backup, ms: expect.any(Number) as number },
      `migrated the database schema in place from version 4 to ${SCHEMA_VERSION}; the file as it was is backed up at ${backup}`,
    ]]);
  });

  it('palimpsest verify and backup refuse a schema-4 file (they never change a file), saying to use its build or migrate it first', async () => {
    const path = copyFixture();
    const problem = `${path} has schema version 4, older than this build's ${SCHEMA_VERSION}: use the build that wrote it, or ` +
      'let this build migrate it first (palimpsest serve on it migrates it in place, after copying it beside itself)';
    expect(verifyFile(path).problems).toEqual([problem]);
    await expect(backupDatabase(path, `${path}.copy`)).rejects.toThrow(`${path} has schema version 4, older than this build's`);
    expect(existsSync(`${path}.copy`)).toBe(false);
    expect(contents(path)).toBe(contents(FIXTURE));
  });

  it('names backups <file>.v<version>-backup-<UTC time>, never reusing a name', () => {
    const path = copyFixture(false);
    const at = new Date(Date.UTC(2026, 11, 4, 23, 5, 9, 123));
    expect(backupName(path, 4, at)).toBe(`${path}.v4-backup-20261204T230509Z`);
    copyFileSync(path, `${path}.v4-backup-20261204T230509Z`);
    expect(backupName(path, 4, at)).toBe(`${path}.v4-backup-20261204T230509Z-2`);
  });
});

// The store contract on a migrated schema-4 file: the fixture migrated once (its rows then
// deleted, the contract starts every test empty), and each store a copy of it.
let template: string | undefined;
async function migratedTemplate(): Promise<string> {
  if (template !== undefined) return template;
  const path = copyFixture(false);
  await open(path).close();
  const db = new Database(path);
  db.exec('DELETE FROM sessions; DELETE FROM tenants; DELETE FROM feed;');
  db.close();
  expect(existsSync(`${path}-wal`)).toBe(false);
  template = path;
  return path;
}
storeContract('SqliteSessionStore migrated from schema 4', {
  open: async () => {
    const path = tmp.freshPath();
    copyFileSync(await migratedTemplate(), path);
    return new SqliteSessionStore({ path });
  },
  commits: (store) => store.stats().commits,
  groupCommit: true,
  lean: true,
});
