/**
 * Which driver errors mean "the database is unreachable" (a StoreUnavailableError, UNAVAILABLE to
 * clients) rather than a bug: network errors of the socket, the driver's own connection errors,
 * and the SQLSTATEs of a server that is shutting down, starting up, out of connections or gone.
 */
import { StorageError } from '../../app/storage-error.js';
import { StoreUnavailableError, StoreUsageError } from '../store-errors.js';

/** Node socket error codes of an unreachable or vanished server. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'ECONNABORTED']);

/**
 * SQLSTATE classes/codes: 08 connection exception, 57P01 admin_shutdown, 57P02 crash_shutdown,
 * 57P03 cannot_connect_now (starting up / recovering), 53300 too_many_connections, 3D000 the
 * database does not exist (dropped under us), 25006 read_only_sql_transaction (a standby after a
 * failover that has not switched yet), 55000 when the database is "not currently accepting
 * connections" (ALTER DATABASE ... ALLOW_CONNECTIONS false during maintenance).
 */
function unavailableSqlState(code: string, message: string): boolean {
  return (
    code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300' || code === '3D000' || code === '25006' ||
    (code === '55000' && /not currently accepting connections/.test(message))
  );
}

/** Driver messages of a lost connection or pool timeout (these carry no code). */
const DRIVER_MESSAGES = [/connection terminated/i, /timeout exceeded when trying to connect/i, /connection is not open|client has encountered a connection error/i, /Client was closed/i, /Query read timeout/i];

/** True when `error` means the database cannot be reached. */
export function isUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || unavailableSqlState(code, error.message))) return true;
  if (error instanceof AggregateError) return error.errors.some(isUnavailable);
  return DRIVER_MESSAGES.some((re) => re.test(error.message));
}

/** Short description of an unreachable-database error for messages: "connect ECONNREFUSED 127.0.0.1:5432". */
export function describe(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return describe(error.errors[0]);
  if (error instanceof Error) return error.message || (error as { code?: string }).code || error.name;
  return String(error);
}

/** Maps a driver error to the store's errors; anything else is rethrown as is. */
export function mapError(error: unknown): never {
  if (isUnavailable(error)) {
    throw new StoreUnavailableError(
      `the PostgreSQL database is unreachable (${describe(error)}); a write in flight may or may not have committed: ` +
        'retry later with the same idempotency key, or on another replica',
      { cause: error },
    );
  }
  // The database server is out of disk (53100 disk_full; 53200 out_of_memory is not a disk
  // matter): the same STORAGE_FULL as a full SQLite disk, nothing of the transaction was stored.
  if (error instanceof Error && (error as { code?: unknown }).code === '53100') throw new StorageError('full', '53100', error.message, { cause: error });
  // RAISE EXCEPTION in the write functions: a broken precondition of the port.
  if (error instanceof Error && (error as { code?: unknown }).code === 'P0001') throw new StoreUsageError(error.message);
  throw error;
}
