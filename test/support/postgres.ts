/**
 * PostgreSQL in test files: the run's throwaway cluster (postgres-global-setup.ts) and one fresh
 * database per test file or per store.
 */
import pg from 'pg';
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin URL of the test cluster (database `postgres`), or '' when PostgreSQL is not installed. */
    pgAdminUrl: string;
  }
}

/** The cluster's admin URL in a test file, or '' when PostgreSQL is unavailable (tests skip). */
export function pgAdminUrl(): string {
  return inject('pgAdminUrl');
}

/** True when the PG tests can run (use with describe.skipIf(!hasPostgres())). */
export function hasPostgres(): boolean {
  return pgAdminUrl() !== '';
}

let counter = 0;

/** A database of the test cluster. */
export interface TestDatabase {
  readonly url: string;
  readonly name: string;
  drop(): Promise<void>;
}

/** Creates a fresh database; `drop()` removes it (terminating leftover connections). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const admin = pgAdminUrl();
  if (admin === '') throw new Error('PostgreSQL is not available for this test run');
  const name = `pal_${process.pid}_${Date.now().toString(36)}_${counter++}`;
  await adminQuery(admin, `CREATE DATABASE ${name}`);
  const url = admin.replace(/\/postgres$/, `/${name}`);
  return {
    url,
    name,
    drop: () => adminQuery(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
