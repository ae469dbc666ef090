import { defineConfig } from 'vitest/config';

/**
 * e2e files that also run against the PostgreSQL store (project `e2e-postgres`: the same files,
 * PALIMPSEST_TEST_STORE=postgres, see test/support/test-server.ts): every RPC's cases, cross-tenant
 * security, import/export, fork, repair, idempotent replay, subscriptions, concurrency. Files
 * that inspect the SQLite file itself (fuzz, crash, shutdown) or only exercise the CLI/transport
 * stay SQLite-only, to keep the run short.
 */
const POSTGRES_E2E = [
  'test/e2e/server-rpcs.test.ts',
  'test/e2e/security.test.ts',
  'test/e2e/smoke.test.ts',
  'test/e2e/idempotent-replay-response.test.ts',
  'test/e2e/messages-paging.test.ts',
  'test/e2e/append-pipeline.test.ts',
  'test/e2e/server-concurrency.test.ts',
  'test/e2e/subscribe.test.ts',
  'test/e2e/import-lookback.test.ts',
  'test/e2e/feed-retention.test.ts',
  'test/e2e/search.test.ts',
  'test/e2e/blobs.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'main',
          include: ['test/**/*.test.ts'],
          // One throwaway PostgreSQL cluster per run for the PostgreSQL store tests (skipped
          // without PostgreSQL, except under CI=true).
          globalSetup: ['test/support/postgres-global-setup.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e-postgres',
          include: POSTGRES_E2E,
          globalSetup: ['test/support/postgres-global-setup.ts'],
          env: { PALIMPSEST_TEST_STORE: 'postgres' },
        },
      },
    ],
  },
});
