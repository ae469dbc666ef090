/**
 * Opening the PostgreSQL store's database: the connection settings and type parsers, the schema
 * created on a fresh database or migrated in place (a foreign or newer schema is refused), and the removal of pending imports whose lease passed.
 */
import pg from 'pg';
import type { PostgresStoreOptions } from './options.js';
import type { MigrationOptions } from '../migration-options.js';
import { prepareSchema } from './migrate.js';
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
 * Creates the schema on a fresh database, or migrates an older one in place (src/store/postgres/
 * migrate.ts), under an advisory lock: replicas starting together create or migrate it once, the
 * others wait and then see it current. Throws StoreOpenError.
 */
export async function initialiseSchema(pool: pg.Pool, s: string, where: string, options: MigrationOptions): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query("SELECT pg_advisory_xact_lock(hashtext('palimpsest schema ' || $1))", [s]);
    const migrated = await prepareSchema(client, s, where, options);
    await client.query('COMMIT');
    if (migrated !== undefined) options.onMigrated?.(migrated);
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
