/**
 * The schema fixtures of test/fixtures/schema/ (databases written by older builds, see
 * scripts/make-schema-fixture*.ts) and what their sessions read back as.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { expect } from 'vitest';
import { ANONYMOUS, type CallContext } from '../../src/app/app-types.js';
import type { SessionService } from '../../src/app/session-service.js';

/** The fixture folder. */
export const SCHEMA_FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'schema');

/**
 * Loads the pg_dump of an older build's schema (postgres-v<version>.sql) into schema `s` of the
 * database at `url`; `rows: false` keeps only the schema version row (an empty database).
 */
export async function loadPostgresFixture(url: string, version: number, s: string, rows = true): Promise<void> {
  const text = readFileSync(join(SCHEMA_FIXTURES, `postgres-v${version}.sql`), 'utf8')
    .split('\n')
    // psql meta-commands (\restrict) are not SQL; without rows, only the version row stays.
    .filter((line) => !line.startsWith('\\') && (rows || !line.startsWith('INSERT INTO ') || line.includes('.schema_version ')))
    .join('\n')
    .replaceAll('fixture_schema', s);
  // The dump empties search_path for its connection: a connection of its own.
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

async function lines(gen: AsyncGenerator<string[]>): Promise<string[]> {
  const out: string[] = [];
  for await (const batch of gen) out.push(...batch);
  return out;
}

/**
 * Checks that every fixture session reads back (session, surface, reference JSONL export) as the
 * build that wrote it read it (`<name>.expected.json`); fields and export lines the older build
 * did not have are not compared.
 */
export async function expectFixtureSessions(app: SessionService, name: string): Promise<void> {
  const expected = JSON.parse(readFileSync(join(SCHEMA_FIXTURES, `${name}.expected.json`), 'utf8')) as Record<string, { session: unknown; surface: unknown; export: string[] }>;
  expect(Object.keys(expected).length).toBeGreaterThan(3);
  for (const [key, want] of Object.entries(expected)) {
    const slash = key.indexOf('/');
    const ctx: CallContext = slash === 0 ? ANONYMOUS : { tenant: key.slice(0, slash) };
    const id = key.slice(slash + 1);
    expect(JSON.parse(JSON.stringify(await app.getSession(ctx, id))), key).toMatchObject(want.session as object);
    expect(await app.getSurface(ctx, id), key).toEqual(want.surface);
    // Exports of builds before the session-metadata line (#35) end without it.
    const METADATA = '{"type":"palimpsest/session-metadata"';
    const exported = (await lines(app.exportJsonl(ctx, id))).filter((l) => !l.startsWith(METADATA) || want.export.some((w) => w.startsWith(METADATA)));
    expect(exported, key).toEqual(want.export);
  }
}
