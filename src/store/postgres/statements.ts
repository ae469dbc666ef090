/**
 * How the PostgreSQL store runs its statements: every statement is a named prepared statement
 * (parsed and planned once per connection, the name derived from the text), so the server only
 * binds and executes on the hot paths.
 */
import type pg from 'pg';
import { StoreClosedError } from '../store-errors.js';
import { mapError } from './pg-errors.js';

/**
 * SQLSTATEs after which PostgreSQL has rolled the statement's whole transaction back, so running
 * it again is safe: 40P01 deadlock_detected, 40001 serialization_failure. Every statement here is
 * one autocommitted call (a write function), never part of a wider transaction. The soak
* (bench/soak.md) met 40P01 between two replicas' writes of one tenant (a create's quota shard
 * and an append's feed position taken in opposite orders): 36 INTERNAL answers in 30 minutes.
 */
const RETRIED_SQLSTATES: ReadonlySet<string> = new Set(['40P01', '40001']);
/** Attempts of a statement that keeps failing with one of them (then the error goes up as it is). */
export const STATEMENT_ATTEMPTS = 4;

/** A statement run again after a deadlock or serialization failure (for the log). */
export interface StatementRetry {
  /** 40P01 (deadlock_detected) or 40001 (serialization_failure). */
  readonly sqlstate: string;
  /** The attempt that failed (1 = the first run). */
  readonly attempt: number;
  /** The statement's text, whitespace folded, cut to 120 characters. */
  readonly statement: string;
}

/** Prepared-statement names by statement text (texts are few: built from a fixed set per schema). */
const STATEMENT_NAMES = new Map<string, string>();

export function statementName(text: string): string {
  let name = STATEMENT_NAMES.get(text);
  if (name === undefined) {
    name = `pal${STATEMENT_NAMES.size}`;
    STATEMENT_NAMES.set(text, name);
  }
  return name;
}

/** The store's statements on its pool, with the queries in flight (close() lets them finish). */
export class Statements {
  /** The PostgreSQL schema holding the tables. */
  readonly s: string;
  /** Queries in flight: close() lets them finish before ending the pool. */
  readonly inFlight = new Set<Promise<unknown>>();
  /** The pool is gone (after close() let every call issued before it finish). */
  ended = false;
  /**
   * Statements run again after 40P01 / 40001 (see RETRIED_SQLSTATES): a safety net that the lock
   * order of schema.ts should leave unused, so every use is counted (stats().statementRetries)
   * and reported (onRetry: the server logs it).
   */
  retries = 0;
  readonly #pool: pg.Pool;
  readonly #onRetry: ((retry: StatementRetry) => void) | undefined;

  constructor(pool: pg.Pool, schema: string, onRetry?: (retry: StatementRetry) => void) {
    this.#pool = pool;
    this.s = schema;
    this.#onRetry = onRetry;
  }

  /**
   * Runs a query on the pool, mapping an unreachable database to StoreUnavailableError, as a
   * named prepared statement. The call is one promise in `inFlight` from its first attempt to its
   * answer, pauses between attempts included: close() waits for it whole.
   */
  async query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]> {
    if (this.ended) throw new StoreClosedError();
    const call = this.#attempts<R>(text, values ?? []);
    this.inFlight.add(call);
    try {
      return await call;
    } finally {
      this.inFlight.delete(call);
    }
  }

  async #attempts<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<R[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.#pool.query<R>({ name: statementName(text), text, values })).rows;
      } catch (error) {
        const code = (error as { code?: unknown } | undefined)?.code;
        if (attempt < STATEMENT_ATTEMPTS && typeof code === 'string' && RETRIED_SQLSTATES.has(code)) {
          // Rolled back whole: run it again after a short random pause (the other party finishes).
          this.retries++;
          this.#onRetry?.({ sqlstate: code, attempt, statement: text.replace(/\s+/g, ' ').slice(0, 120) });
          await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
          continue;
        }
        return mapError(error);
      }
    }
  }

  /** The visibility check and the read in one statement (one snapshot, one round trip). */
  visible(param: string): string {
    return `EXISTS (SELECT 1 FROM ${this.s}.sessions WHERE id = ${param} AND pending_owner IS NULL)`;
  }
}
