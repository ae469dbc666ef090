/**
 * In-place schema migrations of the PostgreSQL store (src/store/postgres/migrate.ts) on schemas
 * written by older builds (test/fixtures/schema/postgres-v2.sql, -v3.sql: pg_dumps of what those
 * builds wrote): the data reads back the same, the result matches a fresh schema, replicas opening
 * together migrate once, a failing step leaves the schema as it was, a newer schema and
 * --no-migrate are refused naming both versions; and the store contract on a migrated schema.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import type { MigrationReport } from '../../src/store/migration-options.js';
import { prepareSchema } from '../../src/store/postgres/migrate.js';
import { MIGRATIONS, OLDEST_MIGRATABLE, type PostgresMigration } from '../../src/store/postgres/migrations/index.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { SCHEMA_VERSION } from '../../src/store/postgres/schema.js';
import { StoreOpenError } from '../../src/store/store-errors.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';
import { expectFixtureSessions, loadPostgresFixture } from '../support/schema-fixtures.js';
import { storeContract } from './store-contract.js';

let db: TestDatabase | undefined;
let admin: pg.Client | undefined;
let schemas = 0;

async function q<T extends pg.QueryResultRow>(text: string): Promise<T[]> {
  return (await admin!.query<T>(text)).rows;
}

async function fixture(version: number, rows = true): Promise<string> {
  const s = `mig${schemas++}`;
  await loadPostgresFixture(db!.url, version, s, rows);
  return s;
}

async function version(s: string): Promise<number> {
  return (await q<{ version: number }>(`SELECT version FROM ${s}.schema_version`))[0]!.version;
}

/** Everything of schema `s` a migration may change, with the schema name taken out. */
async function catalog(s: string): Promise<unknown> {
  const rows = async (text: string): Promise<string[]> =>
    (await admin!.query<{ r: string }>(text, [s])).rows.map((r) => r.r.replaceAll(`${s}.`, 'S.'));
  return {
    columns: await rows(`SELECT concat_ws(' ', table_name, ordinal_position, column_name, data_type, is_nullable, column_default, collation_name) AS r
      FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position`),
    indexes: await rows('SELECT indexdef AS r FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname'),
    constraints: await rows(`SELECT concat_ws(' ', c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)) AS r
      FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1 ORDER BY 1`),
    functions: await rows(`SELECT concat_ws(' ', p.proname, pg_get_function_identity_arguments(p.oid), p.prosrc) AS r
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 ORDER BY 1`),
    triggers: await rows(`SELECT pg_get_triggerdef(t.oid) AS r FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal ORDER BY 1`),
  };
}

async function history(s: string): Promise<{ version: number; build: string }[]> {
  return q(`SELECT version, build FROM ${s}.schema_migrations ORDER BY version`);
}

async function openError(options: Parameters<typeof PostgresSessionStore.open>[0]): Promise<StoreOpenError> {
  const error = await PostgresSessionStore.open(options).then(async (store) => {
    await store.close();
    return undefined;
  }, (e: unknown) => e);
  expect(error).toBeInstanceOf(StoreOpenError);
  return error as StoreOpenError;
}

describe.skipIf(!hasPostgres())('PostgreSQL schema migrations', () => {
  beforeAll(async () => {
    db = await createTestDatabase();
    admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    await db?.drop();
  });

  it('lists the migrations in version order, one per version from the oldest migratable on, the last one SCHEMA_VERSION', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(Array.from({ length: MIGRATIONS.length }, (_, i) => OLDEST_MIGRATABLE + 1 + i));
    expect(MIGRATIONS.at(-1)!.version).toBe(SCHEMA_VERSION);
  });

  for (const from of [2, 3]) {
    it(`migrates a schema-${from} database in place: its sessions read back the same, the feed works, the history has one row per version`, async () => {
      const s = await fixture(from);
      const reports: MigrationReport[] = [];
      const store = await PostgresSessionStore.open({ url: db!.url, schema: s, poolSize: 2, build: 'test-build', onMigrated: (r) => reports.push(r) });
      const app = new SessionService(store);
      try {
        expect(reports).toEqual([{ from, to: SCHEMA_VERSION, ms: expect.any(Number) as number }]);
        await expectFixtureSessions(app, `postgres-v${from}`);
        const end = await store.feedEnd('acme');
        await app.updateSession({ tenant: 'acme' }, 'rich', { setLabels: { migrated: 'yes' } });
        const records = await store.readFeed({ tenant: 'acme', after: end, limit: 10 });
        expect(records.map((r) => [r.kind, r.sessionId, r.labels['migrated']])).toEqual([['labels_changed', 'acme/rich', 'yes']]);
      } finally {
        await app.close();
      }
      expect(await version(s)).toBe(SCHEMA_VERSION);
      expect(await history(s)).toEqual(MIGRATIONS.filter((m) => m.version > from).map((m) => ({ version: m.version, build: 'test-build' })));
    });
  }

  it('a migrated schema-2 and schema-3 database has exactly the tables, indexes, constraints, functions and trigger of a fresh one', async () => {
    const fresh = `mig${schemas++}`;
    await (await PostgresSessionStore.open({ url: db!.url, schema: fresh, poolSize: 1 })).close();
    const want = await catalog(fresh);
    for (const from of [2, 3]) {
      const s = await fixture(from);
      await (await PostgresSessionStore.open({ url: db!.url, schema: s, poolSize: 1 })).close();
      expect(await catalog(s), `from schema ${from}`).toEqual(want);
    }
    expect(await history(fresh)).toEqual(MIGRATIONS.filter((m) => m.version > 3).map((m) => ({ version: m.version, build: 'unknown' })));
  });

  it('replicas opening an old schema together migrate it once (advisory lock; the version re-read under it)', async () => {
    const s = await fixture(2);
    const reports: MigrationReport[] = [];
    const stores = await Promise.all([1, 2, 3].map(() =>
      PostgresSessionStore.open({ url: db!.url, schema: s, poolSize: 1, onMigrated: (r) => reports.push(r) })));
    await Promise.all(stores.map((x) => x.close()));
    expect(reports.map((r) => [r.from, r.to])).toEqual([[2, SCHEMA_VERSION]]);
    expect((await history(s)).map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
  });

  it('a replica waits for another one\'s migration (the advisory lock) past the pool\'s query timeout, says so, then opens', async () => {
    const s = await fixture(2);
    const holder = new pg.Client({ connectionString: db!.url });
    await holder.connect();
    try {
      await holder.query("SELECT pg_advisory_lock(hashtext('palimpsest schema ' || $1))", [s]);
      const release = new Promise<void>((resolve, reject) => {
        setTimeout(() => holder.query("SELECT pg_advisory_unlock(hashtext('palimpsest schema ' || $1))", [s]).then(() => resolve(), reject), 1500);
      });
      const waiting: string[] = [];
      const reports: MigrationReport[] = [];
      const store = await PostgresSessionStore.open({
        url: db!.url, schema: s, queryTimeoutMs: 500, onWaiting: (m) => waiting.push(m), onMigrated: (r) => reports.push(r),
      });
      await store.close();
      await release;
      expect(waiting).toHaveLength(1);
      expect(waiting[0]).toMatch(new RegExp(`\\(schema ${s}\\): waiting up to 600000 ms for another replica's migration \\(it holds the schema's advisory lock\\)$`));
      expect(reports.map((r) => [r.from, r.to])).toEqual([[2, SCHEMA_VERSION]]);
      expect(await version(s)).toBe(SCHEMA_VERSION);
    } finally {
      await holder.end();
    }
  });

  it('past lockWaitMs a replica waiting for the migration lock fails saying another replica holds it; the schema stays at its version', async () => {
    const s = await fixture(2);
    const holder = new pg.Client({ connectionString: db!.url });
    await holder.connect();
    try {
      await holder.query("SELECT pg_advisory_lock(hashtext('palimpsest schema ' || $1))", [s]);
      const error = await openError({ url: db!.url, schema: s, lockWaitMs: 200 });
      expect(error.reason).toBe('CANNOT_OPEN');
      expect(error.message).toMatch(new RegExp(`\\(schema ${s}\\): another replica holds the schema's migration lock \\(migrating it\\?\\) ` +
        'and did not release it within 200 ms: start again once it is done, or stop it$'));
    } finally {
      await holder.end();
    }
    expect(await version(s)).toBe(2);
  });

  it('a failing migration step rolls everything back: the schema stays at its version, as it was', async () => {
    const s = await fixture(2);
    const before = await catalog(s);
    const failing: PostgresMigration = {
      version: SCHEMA_VERSION + 1,
      description: 'a step that fails halfway',
      async up(client, schema) {
        await client.query(`CREATE TABLE ${schema}.half_done (x int)`);
        await client.query('SELECT 1/0');
      },
    };
    const client = new pg.Client({ connectionString: db!.url });
    await client.connect();
    let error: unknown;
    try {
      await client.query('BEGIN');
      error = await prepareSchema(client, s, 'test', {}, [...MIGRATIONS, failing]).catch((e: unknown) => e);
      await client.query('ROLLBACK');
    } finally {
      await client.end();
    }
    expect(error).toBeInstanceOf(StoreOpenError);
    expect((error as StoreOpenError).reason).toBe('MIGRATION_FAILED');
    expect((error as Error).message).toContain(`migration ${SCHEMA_VERSION + 1} (a step that fails halfway) failed: division by zero`);
    expect((error as Error).message).toContain('the schema is unchanged at version 2');
    expect(await version(s)).toBe(2);
    expect(await catalog(s)).toEqual(before);
  });

  it('refuses a schema of a newer version, naming both versions, and leaves it as it was', async () => {
    const s = await fixture(3);
    await (await PostgresSessionStore.open({ url: db!.url, schema: s, poolSize: 1 })).close();
    await admin!.query(`UPDATE ${s}.schema_version SET version = ${SCHEMA_VERSION + 1}`);
    const error = await openError({ url: db!.url, schema: s, poolSize: 1 });
    expect(error.reason).toBe('SCHEMA_VERSION_MISMATCH');
    expect(error.message).toContain(`(schema ${s}) has schema version ${SCHEMA_VERSION + 1}, this build needs ${SCHEMA_VERSION}: it was migrated by a newer Palimpsest`);
    expect(await version(s)).toBe(SCHEMA_VERSION + 1);
  });

  it('--no-migrate refuses an older schema (saying to run without it or back up first) and leaves it at its version', async () => {
    const s = await fixture(3);
    const error = await openError({ url: db!.url, schema: s, poolSize: 1, noMigrate: true });
    expect(error.reason).toBe('SCHEMA_VERSION_MISMATCH');
    expect(error.message).toContain(`has schema version 3, this build needs ${SCHEMA_VERSION}; refusing to migrate it under --no-migrate`);
    expect(error.message).toContain('run without --no-migrate');
    expect(await version(s)).toBe(3);
    expect(await q(`SELECT to_regclass('${s}.schema_migrations') AS t`)).toEqual([{ t: null }]);
  });

  it('refuses a schema older than this build migrates from, saying what to do', async () => {
    const s = await fixture(2);
    await admin!.query(`UPDATE ${s}.schema_version SET version = 1`);
    const error = await openError({ url: db!.url, schema: s, poolSize: 1 });
    expect(error.reason).toBe('SCHEMA_VERSION_MISMATCH');
    expect(error.message).toContain(`has schema version 1, this build needs ${SCHEMA_VERSION} and migrates from version 2 on: export with the build`);
  });

  // The store contract on a schema-2 database migrated in place (tables and functions as the old
  // build wrote them, no rows), migrated at the first open; the contract starts every test empty,
  // so later opens empty its tables (cheaper than a new schema each time).
  let contractSchema: string | undefined;
  storeContract('PostgresSessionStore migrated from schema 2', {
    open: async () => {
      if (contractSchema === undefined) {
        contractSchema = await fixture(2, false);
      } else {
        const tables = await q<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = '${contractSchema}'
          AND tablename NOT IN ('schema_version', 'schema_migrations')`);
        await admin!.query(`TRUNCATE ${tables.map((r) => `${contractSchema}.${r.t}`).join(', ')}`);
      }
      return PostgresSessionStore.open({ url: db!.url, schema: contractSchema, poolSize: 4 });
    },
    commits: (store) => store.stats().commits,
    groupCommit: false,
    lean: true,
    blobs: false,
  });
});
