/**
 * Opening the PostgreSQL store's database: the connection settings and type parsers, the schema
 * created on a fresh database or migrated in place (a foreign or newer schema is refused), and the removal of pending imports whose lease passed.
 */
import pg from 'pg';
import type { PostgresStoreOptions } from './options.js';
import { DEFAULT_LOCK_WAIT_MS, type MigrationOptions } from '../migration-options.js';
import { StoreOpenError } from '../store-errors.js';
import { describe as describeError, isUnavailable } from './pg-errors.js';
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

/** SQLSTATE lock_not_available: a wait past lock_timeout. */
const LOCK_NOT_AVAILABLE = '55P03';

function parseInt8Array(text: string): number[] {
  if (text === '{}') return [];
  return text.slice(1, -1).split(',').map(Number);
}

/**
 * Routes every connection error of `pool` to `onError`. The pool listens to its idle clients only;
 * a client checked out for a transaction (pool.connect()) whose connection breaks emits 'error' on
 * itself, and without a listener Node would end the process. The query in flight fails anyway, so
 * the caller sees the failure; this keeps the server up.
 */
export function watchPoolErrors(pool: pg.Pool, onError: (error: Error) => void): void {
  pool.on('error', onError);
  pool.on('connect', (client) => client.on('error', onError));
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
 * migrate.ts), under the schema's advisory lock: replicas starting together create or migrate it
 * once, the others wait and then see it current. Runs on a connection of its own, not the pool's:
 * the pool's query_timeout would cut off both a long step and the wait behind another replica's
 * migration. Its timeouts are deliberate: no statement_timeout (a step may rewrite a large table),
 * lock_timeout = lockWaitMs for the advisory lock and the steps' table locks. Throws StoreOpenError.
 */
export async function initialiseSchema(connection: pg.ClientConfig, s: string, where: string, options: MigrationOptions): Promise<void> {
  const wait = Math.max(0, Math.floor(options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS));
  const what = `PostgreSQL store ${where} (schema ${s})`;
  const client = new pg.Client(connection);
  // A connection that breaks is reported by the query it fails; without a listener Node would crash.
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('BEGIN');
    // At least 1 ms: lock_timeout = 0 means no limit in PostgreSQL, where lockWaitMs 0 means "do not wait".
    await client.query(`SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = ${Math.max(1, wait)}`);
    const lock = "hashtext('palimpsest schema ' || $1)";
    const tried = await client.query<{ got: boolean }>(`SELECT pg_try_advisory_xact_lock(${lock}) AS got`, [s]);
    if (tried.rows[0]?.got !== true) {
      options.onWaiting?.(`${what}: waiting up to ${wait} ms for another replica's migration (it holds the schema's advisory lock)`);
      try {
        await client.query(`SELECT pg_advisory_xact_lock(${lock})`, [s]);
      } catch (error) {
        if ((error as { code?: unknown }).code !== LOCK_NOT_AVAILABLE) throw error;
        throw new StoreOpenError('CANNOT_OPEN', where,
          `${what}: another replica holds the schema's migration lock (migrating it?) and did not release it within ${wait} ms: ` +
            'start again once it is done, or stop it', { cause: error });
      }
    }
    const migrated = await prepareSchema(client, s, where, options);
    await client.query('COMMIT');
    if (migrated !== undefined) options.onMigrated?.(migrated);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    if (error instanceof StoreOpenError) throw error;
    const why = isUnavailable(error) ? `the database is unreachable (${describeError(error)})` : describeError(error);
    throw new StoreOpenError('CANNOT_OPEN', where, `cannot open ${what}: creating or migrating its schema failed: ${why}`, { cause: error });
  } finally {
    await client.end().catch(() => undefined);
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
