/**
 * Writes test/fixtures/schema/postgres-v<N>.sql and postgres-v<N>.expected.json: a PostgreSQL
 * schema exactly as an older build wrote it (its own code: tables, functions and rows, through its
 * store and app), dumped with pg_dump (--inserts, no owner or privileges), and what its sessions
 * read back as. test/integration/schema-migrations-postgres.test.ts loads a dump into a fresh
 * schema, migrates it and checks every session still reads back the same.
 *
 * The older build runs from a copy of its tree (the commands that made the committed fixtures):
 *   git archive 87ddffc src gen package.json | (mkdir -p /tmp/old-v3 && tar -x -C /tmp/old-v3); ln -s $PWD/node_modules /tmp/old-v3/
 *   npx tsx scripts/make-schema-fixture-postgres.ts /tmp/old-v3 3
 *   git archive b1d4529 src gen package.json | (mkdir -p /tmp/old-v2 && tar -x -C /tmp/old-v2); ln -s $PWD/node_modules /tmp/old-v2/
 *   npx tsx scripts/make-schema-fixture-postgres.ts /tmp/old-v2 2
 * (87ddffc: the last schema-3 build; b1d4529: the last schema-2 build, before the session feed.)
 * A throwaway cluster is started for the run (test/support/pg-cluster.ts). The schema is named
 * `fixture_schema`; the test replaces that name.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { findPgBin, startCluster } from '../test/support/pg-cluster.js';
import { richSessionBatches } from '../test/support/rich-session.js';

interface App {
  createSession(ctx: { tenant: string }, req: Record<string, unknown>): Promise<unknown>;
  append(ctx: { tenant: string }, id: string, events: unknown[], opts: Record<string, unknown>): Promise<{ seqs: number[] }>;
  fork(ctx: { tenant: string }, id: string, req: Record<string, unknown>): Promise<unknown>;
  updateSession?(ctx: { tenant: string }, id: string, req: Record<string, unknown>): Promise<unknown>;
  importJsonl(ctx: { tenant: string }, chunks: AsyncIterable<Uint8Array>, opts: Record<string, unknown>): Promise<unknown>;
  exportJsonl(ctx: { tenant: string }, id: string): AsyncGenerator<string[]>;
  deleteSession(ctx: { tenant: string }, id: string): Promise<unknown>;
  getSession(ctx: { tenant: string }, id: string): Promise<unknown>;
  getSurface(ctx: { tenant: string }, id: string): Promise<unknown>;
  close(): Promise<void>;
}

const [root, version] = process.argv.slice(2);
if (root === undefined || version === undefined) throw new Error('usage: make-schema-fixture-postgres.ts OLD_TREE VERSION');
const out = join(import.meta.dirname, '..', 'test', 'fixtures', 'schema');
const SCHEMA = 'fixture_schema';

async function lines(gen: AsyncGenerator<string[]>): Promise<string[]> {
  const all: string[] = [];
  for await (const batch of gen) all.push(...batch);
  return all;
}

async function* chunks(text: string): AsyncGenerator<Uint8Array> {
  yield Buffer.from(text, 'utf8');
}

async function open(url: string): Promise<App> {
  const { PostgresSessionStore } = await import(resolve(root!, 'src/store/postgres/postgres-store.ts')) as { PostgresSessionStore: { open(o: object): Promise<unknown> } };
  const { SessionService } = await import(resolve(root!, 'src/app/session-service.ts')) as { SessionService: new (...a: unknown[]) => App };
  let clock = Date.UTC(2026, 11, 1, 12, 0, 0);
  return new SessionService(await PostgresSessionStore.open({ url, schema: SCHEMA, poolSize: 2 }), undefined, () => (clock += 1000));
}

async function main(): Promise<void> {
  const bin = findPgBin();
  if (bin === undefined) throw new Error('no PostgreSQL binaries');
  const cluster = await startCluster(bin);
  try {
    const admin = new pg.Client({ connectionString: cluster.adminUrl });
    await admin.connect();
    await admin.query('CREATE DATABASE fixture');
    await admin.end();
    const url = cluster.adminUrl.replace(/\/postgres$/, '/fixture');
    const app = await open(url);
    const acme = { tenant: 'acme' };
    const anon = { tenant: '' };
    await app.createSession(acme, { id: 'rich', labels: { team: 'core', env: 'prod' }, cwd: '/work' });
    let last = -1;
    for (const batch of richSessionBatches()) {
      const r = await app.append(acme, 'rich', batch, { expectedLastSeq: last });
      last = r.seqs[r.seqs.length - 1]!;
    }
    await app.fork(acme, 'rich', { atSeq: 11, childId: 'rich-fork', labels: { forked: 'yes' } });
    // UpdateSession came with schema 3.
    if (app.updateSession !== undefined) await app.updateSession(acme, 'rich', { setLabels: { env: 'staging', reviewed: 'true' }, removeLabels: ['team'] });
    const exported = (await lines(app.exportJsonl(acme, 'rich'))).join('\n') + '\n';
    await app.importJsonl(anon, chunks(exported), { id: 'imported', labels: { source: 'import' } });
    await app.createSession(anon, { id: 'plain', labels: { kind: 'plain' } });
    await app.append(anon, 'plain', [
      { type: 'user/message', data: { id: 'm0', role: 'user', content: [{ type: 'text', text: 'héllo ✓' }], source: { kind: 'user' } }, surfaceOp: 'append' },
    ], { expectedLastSeq: -1, idempotencyKey: 'key-1' });
    await app.createSession(anon, { id: 'doomed' });
    await app.deleteSession(anon, 'doomed');
    await app.close();

    const cold = await open(url);
    const expected: Record<string, unknown> = {};
    for (const [ctx, id] of [[acme, 'rich'], [acme, 'rich-fork'], [anon, 'imported'], [anon, 'plain']] as const) {
      expected[`${ctx.tenant}/${id}`] = {
        session: JSON.parse(JSON.stringify(await cold.getSession(ctx, id))) as unknown,
        surface: await cold.getSurface(ctx, id),
        export: await lines(cold.exportJsonl(ctx, id)),
      };
    }
    await cold.close();
    const dump = execFileSync(join(bin, 'pg_dump'), ['--schema', SCHEMA, '--no-owner', '--no-privileges', '--inserts', '-d', url], { encoding: 'utf8' });
    if (!dump.includes(`INSERT INTO ${SCHEMA}.schema_version VALUES (${version});`)) throw new Error(`the build at ${root} did not write schema version ${version}`);
    writeFileSync(join(out, `postgres-v${version}.sql`), dump);
    writeFileSync(join(out, `postgres-v${version}.expected.json`), JSON.stringify(expected, null, 1) + '\n');
    console.log(`wrote postgres-v${version}.sql`);
  } finally {
    cluster.stop();
  }
}

await main();
