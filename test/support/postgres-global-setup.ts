/**
 * vitest globalSetup: one throwaway PostgreSQL cluster for the whole run (test/support/pg-cluster.ts),
 * its admin URL provided to the test files as `pgAdminUrl` (test/support/postgres.ts).
 *
 * Without PostgreSQL the PG tests skip, except under CI=true, where a missing PostgreSQL fails the
 * run (never a silent skip).
 */
import { findPgBin, startCluster } from './pg-cluster.js';

/** vitest globalSetup: one cluster for the whole run. */
export default async function setup(project: { provide(key: 'pgAdminUrl', value: string): void }): Promise<() => void> {
  const bin = findPgBin();
  if (bin === undefined) {
    if (process.env.CI === 'true') {
      throw new Error('PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run .ci/system-deps');
    }
    project.provide('pgAdminUrl', '');
    return () => undefined;
  }
  const cluster = await startCluster(bin);
  project.provide('pgAdminUrl', cluster.adminUrl);
  return () => cluster.stop();
}

