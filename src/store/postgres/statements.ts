/**
 * How the PostgreSQL store runs its statements: every statement is a named prepared statement
 * (parsed and planned once per connection, the name derived from the text), so the server only
 * binds and executes on the hot paths.
 */
import type pg from 'pg';
import { StoreClosedError } from '../store-errors.js';
import { mapError } from './pg-errors.js';

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
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool, schema: string) {
    this.#pool = pool;
    this.s = schema;
  }

  /**
   * Runs a query on the pool, mapping an unreachable database to StoreUnavailableError, as a
   * named prepared statement.
   */
  async query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]> {
    if (this.ended) throw new StoreClosedError();
    const running = this.#pool.query<R>({ name: statementName(text), text, values: values ?? [] });
    this.inFlight.add(running);
    try {
      return (await running).rows;
    } catch (error) {
      return mapError(error);
    } finally {
      this.inFlight.delete(running);
    }
  }

  /** The visibility check and the read in one statement (one snapshot, one round trip). */
  visible(param: string): string {
    return `EXISTS (SELECT 1 FROM ${this.s}.sessions WHERE id = ${param} AND pending_owner IS NULL)`;
  }
}
