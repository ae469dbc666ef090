/** The options and counters of the PostgreSQL store (postgres-store.ts). */

import type { MigrationOptions } from '../migration-options.js';
import type { StatementRetry } from './statements.js';

/** Options of `PostgresSessionStore.open`. */
export interface PostgresStoreOptions extends MigrationOptions {
  /**
   * `postgresql://` / `postgres://` URL. Missing parts come from the standard PG* environment
   * variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE); TLS from `sslmode`.
   */
  readonly url: string;
  /** PostgreSQL schema holding the tables (default `palimpsest`). */
  readonly schema?: string;
  /** Pool size: connections for queries and writes (default 10). The LISTEN connection is extra. */
  readonly poolSize?: number;
  /** How long a call waits for a pooled connection (or a new one) before UNAVAILABLE, ms (default 5000). */
  readonly connectTimeoutMs?: number;
  /**
   * How long a query may go unanswered before the call fails with UNAVAILABLE, ms (default 30000):
   * a network partition that drops packets without a reset would otherwise hang calls until TCP
   * keepalive notices. A write timed out this way may still have committed (the message says so).
   */
  readonly queryTimeoutMs?: number;
  /** Slow poll of watched heads backing NOTIFY up, ms (default 2000). */
  readonly headPollMs?: number;
  /** Lease sweep period for abandoned pending imports, ms (default 60000; 0 = only at open). */
  readonly sweepIntervalMs?: number;
  /** Clock (default Date.now): idempotency rows, lease expiry. */
  readonly now?: () => number;
  /** Connection problems of the pool's idle clients and the LISTEN connection (for logs). */
  readonly onError?: (error: unknown) => void;
  /**
   * A statement PostgreSQL rolled back for a deadlock (40P01) or a serialization failure (40001),
   * run again (for logs; counted in stats().statementRetries). The lock order of schema.ts leaves
   * none: each one is worth a look.
   */
  readonly onStatementRetry?: (retry: StatementRetry) => void;
}

/** Counters for tests and metrics. */
export interface PostgresStoreStats {
  /** Write calls committed (creates, appends, chunks, publishes, deletes). */
  readonly commits: number;
  /** `append` calls that appended events. */
  readonly appends: number;
  /** Most appends of one session sent in one transaction so far. */
  readonly maxGroupSize: number;
  /** Statements run again after a deadlock or serialization failure (onStatementRetry). */
  readonly statementRetries: number;
}
