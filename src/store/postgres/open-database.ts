/**
 * Opening the PostgreSQL store's database: the connection settings and type parsers, the schema
 * created on a fresh database or its version checked (a foreign or other-version schema is
 * refused; no migration), and the removal of pending imports whose lease passed.
 */
import pg from 'pg';
import { StoreOpenError } from '../store-errors.js';
import type { PostgresStoreOptions } from './options.js';
import { SCHEMA_VERSION, schemaSql } from './schema.js';
import type { Statements } from './statements.js';

/** int8 as number (every value the store writes is a safe integer) and int8[] as number[]. */
const TYPES = {
  getTypeParser(oid: number, format?: string): (value: string) => unknown {
    if (oid === 20) return Number;
    if (oid === 1016) return parseInt8Array;
    return (pg.types.getTypeParser as (oid: number, format?: string) => (value: string) => unknown)(oid, format);
  },
};

function parseInt8Array(text: string): number[] {
  if (text === '{}') return [];
  return text.slice(1, -1).split(',').map(Number);
}

/** The settings of the store's connections (the pool's and the head watch's LISTEN one). */
export function connectionConfig(options: PostgresStoreOptions): pg.ClientConfig {
  return {
    connectionString: options.url,
    types: TYPES,
    application_name: 'palimpsest',
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
    keepAlive: true,
  };
}

/**
 * Creates the schema on a fresh database, or checks the version of the one found (replicas
 * starting together: one creates it, the others wait and then see it). Throws StoreOpenError.
 */
export async function initialiseSchema(pool: pg.Pool, s: string, where: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // Replicas starting together: one creates the schema, the others wait and then see it.
    await client.query("SELECT pg_advisory_xact_lock(hashtext('palimpsest schema ' || $1))", [s]);
    const found = await client.query<{ versions: string | null; tables: number; exists: boolean }>(
      `SELECT to_regclass($1) AS versions, (SELECT count(*)::int FROM pg_tables WHERE schemaname = $2) AS tables,
              EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $2) AS exists`,
      [`${s}.schema_version`, s],
    );
    const row = found.rows[0]!;
    if (row.versions === null) {
      if (row.tables > 0) {
        throw new StoreOpenError('FOREIGN_DATABASE', where, `schema ${s} of ${where} holds ${row.tables} tables but no Palimpsest schema_version; refusing to use it (pick another schema)`);
      }
      // A schema the operator created (and granted) is used as is: CREATE SCHEMA needs the
      // CREATE privilege on the database, which such a role need not have.
      if (!row.exists) await client.query(`CREATE SCHEMA ${s}`);
      await client.query(schemaSql(s));
    } else {
      const versions = await client.query<{ version: number }>(`SELECT version FROM ${s}.schema_version`);
      const version = versions.rows[0]?.version;
      if (version !== SCHEMA_VERSION) {
        throw new StoreOpenError(
          'SCHEMA_VERSION_MISMATCH',
          where,
          `PostgreSQL store ${where} (schema ${s}) has schema version ${version ?? 'none'}, this build needs ${SCHEMA_VERSION}; ` +
            'no migration: export with the build that wrote it and import with this one',
        );
      }
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/**
 * Drops pending imports whose lease has passed (their importer died or gave up); imports of
 * live processes renew their lease with every chunk and are left alone. Returns how many.
 */
export async function sweepExpiredImports(sql: Statements, now: () => number): Promise<number> {
  const rows = await sql.query<{ id: string }>(
    `SELECT id FROM ${sql.s}.sessions WHERE pending_owner IS NOT NULL AND lease_until < $1`,
    [now()],
  );
  let dropped = 0;
  for (const { id } of rows) {
    // Re-checked under the row lock by the delete: a lease renewed meanwhile keeps the import.
    const done = await sql.query<{ deleted: boolean }>(
      `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${sql.s}.sessions WHERE id = $1 AND pending_owner IS NOT NULL AND lease_until < $2 FOR UPDATE)
              THEN ${sql.s}.delete_session($1) ELSE false END AS deleted`,
      [id, now()],
    );
    if (done[0]?.deleted === true) dropped++;
  }
  return dropped;
}
