/**
 * The store contract suite against PostgreSQL (the run's throwaway cluster), multi-writer section
 * included: every store (or shared database of the multi-writer section, opened by several store
 * instances with pools of their own) is a fresh PostgreSQL schema of this file's database, so each
 * test starts empty.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';
import { storeContract } from './store-contract.js';

let db: TestDatabase | undefined;
let schemas = 0;

describe.skipIf(!hasPostgres())('PostgreSQL', () => {
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  storeContract('PostgresSessionStore', {
    open: async () => PostgresSessionStore.open({ url: db!.url, schema: `c${schemas++}`, poolSize: 4 }),
    commits: (store) => store.stats().commits,
    groupCommit: false,
    database: async () => {
      const schema = `m${schemas++}`;
      return { open: () => PostgresSessionStore.open({ url: db!.url, schema, poolSize: 4, headPollMs: 500 }) };
    },
  });
});
