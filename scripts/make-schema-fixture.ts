/**
 * Writes test/fixtures/schema/sqlite-v4.db (+ its -heads record) and sqlite-v4.expected.json: a
 * small SQLite database exactly as the build of schema version 4 (before in-place migrations)
 * wrote it, and what its sessions read back as. test/integration/schema-migrations-sqlite.test.ts
 * migrates a copy and checks every session still reads back the same.
 *
 * The older build runs from a copy of its tree (87ddffc: the last build of SQLite schema 4, before
 * in-place migrations; the commands that made the committed fixture):
 *   git archive 87ddffc src gen package.json | (mkdir -p /tmp/old-v3 && tar -x -C /tmp/old-v3); ln -s $PWD/node_modules /tmp/old-v3/
 *   npx tsx scripts/make-schema-fixture.ts /tmp/old-v3
 * Contents: sessions in two tenants; the rich session (images, parallel tool calls, a compaction
 * replace and a pruned result), a fork of it, labels set and changed (UpdateSession), an imported
 * session (reference JSONL), a deleted session (its feed record), an idempotent append.
 */
import { mkdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import type { SessionService as App } from '../src/app/session-service.js';
import type { CallContext } from '../src/app/app-types.js';
import type { SqliteSessionStore as Store, SqliteStoreOptions } from '../src/store/sqlite/sqlite-store.js';
import { richSessionBatches } from '../test/support/rich-session.js';

const root = process.argv[2];
if (root === undefined) throw new Error('usage: make-schema-fixture.ts OLD_TREE');
const { SessionService } = await import(resolve(root, 'src/app/session-service.ts')) as { SessionService: new (store: Store, limits?: undefined, clock?: () => number) => App };
const { SqliteSessionStore } = await import(resolve(root, 'src/store/sqlite/sqlite-store.ts')) as { SqliteSessionStore: new (o: SqliteStoreOptions) => Store };

const dir = join(import.meta.dirname, '..', 'test', 'fixtures', 'schema');
const file = join(dir, 'sqlite-v4.db');

async function lines(gen: AsyncGenerator<string[]>): Promise<string[]> {
  const out: string[] = [];
  for await (const batch of gen) out.push(...batch);
  return out;
}

async function* chunks(text: string): AsyncGenerator<Uint8Array> {
  yield Buffer.from(text, 'utf8');
}

async function main(): Promise<void> {
  mkdirSync(dir, { recursive: true });
  for (const suffix of ['', '-wal', '-shm', '-heads']) rmSync(file + suffix, { force: true });
  let clock = Date.UTC(2026, 11, 1, 12, 0, 0);
  const store = new SqliteSessionStore({ path: file, appendWriter: 'inline' });
  const app = new SessionService(store, undefined, () => (clock += 1000));
  const acme: CallContext = { tenant: 'acme' };
  const anon: CallContext = { tenant: '' };

  await app.createSession(acme, { id: 'rich', labels: { team: 'core', env: 'prod' }, cwd: '/work' });
  let last = -1;
  for (const batch of richSessionBatches()) {
    const r = await app.append(acme, 'rich', batch, { expectedLastSeq: last });
    last = r.seqs[r.seqs.length - 1]!;
  }
  await app.fork(acme, 'rich', { atSeq: 11, childId: 'rich-fork', labels: { forked: 'yes' } });
  await app.updateSession(acme, 'rich', { setLabels: { env: 'staging', reviewed: 'true' }, removeLabels: ['team'] });
  const exported = (await lines(app.exportJsonl(acme, 'rich'))).join('\n') + '\n';
  await app.importJsonl(anon, chunks(exported), { id: 'imported', labels: { source: 'import' } });
  await app.createSession(anon, { id: 'plain', labels: { kind: 'plain' } });
  await app.append(anon, 'plain', [
    { type: 'user/message', data: { id: 'm0', role: 'user', content: [{ type: 'text', text: 'héllo ✓' }], source: { kind: 'user' } }, surfaceOp: 'append' },
  ], { expectedLastSeq: -1, idempotencyKey: 'key-1' });
  await app.createSession(anon, { id: 'doomed' });
  await app.deleteSession(anon, 'doomed');

  await app.close();
  // What a cold open reads back (the migrated copy is read cold too).
  const cold = new SessionService(new SqliteSessionStore({ path: file, appendWriter: 'inline' }));
  const expected: Record<string, unknown> = {};
  for (const [ctx, id] of [[acme, 'rich'], [acme, 'rich-fork'], [anon, 'imported'], [anon, 'plain']] as const) {
    const view = await cold.getSession(ctx, id);
    expected[`${ctx.tenant}/${id}`] = {
      session: JSON.parse(JSON.stringify(view)) as unknown,
      surface: await cold.getSurface(ctx, id),
      export: await lines(cold.exportJsonl(ctx, id)),
    };
  }
  await cold.close();
  if (existsSync(`${file}-wal`)) throw new Error('the WAL was not checkpointed at close');
  const check = new Database(file, { readonly: true });
  const version = check.pragma('user_version', { simple: true });
  check.close();
  if (version !== 4) throw new Error(`the build at ${root} wrote schema version ${String(version)}, not 4`);
  writeFileSync(join(dir, 'sqlite-v4.expected.json'), JSON.stringify(expected, null, 1) + '\n');
  console.log(`wrote ${file}`);
}

await main();
