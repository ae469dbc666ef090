/**
 * A schema-4 SQLite file written before the session feed (issue #35) gets the feed table, its
 * triggers and the surface_length / metadata_version columns from migration 5 at open (issue #39:
 * the feed is part of the migration path now); the stored sessions are untouched, and changes
 * from then on are recorded.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { APPLICATION_ID, SCHEMA_SQL, SCHEMA_VERSION } from '../../src/store/sqlite/schema.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'palimpsest-feed-upgrade-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

it('adds the feed to a schema-4 file when it migrates at open, keeps its sessions, and records changes from then on', async () => {
  const path = join(dir, 'old.db');
  const raw = new Database(path);
  raw.exec(SCHEMA_SQL);
  raw.pragma(`application_id = ${APPLICATION_ID}`);
  raw.pragma('user_version = 4');
  raw.prepare(`INSERT INTO sessions (id, version, created_at, labels, tenant, writer) VALUES ('old', 0, 5, '{"a":"1"}', '', 'w0')`).run();
  raw.prepare(`INSERT INTO tenants (tenant, session_count, data_bytes) VALUES ('', 1, 0)`).run();
  expect(raw.prepare("SELECT count(*) FROM sqlite_schema WHERE name = 'feed'").pluck().get()).toBe(0);
  raw.close();

  const store = new SqliteSessionStore({ path, durability: 'normal', nativeChecksums: 'off' });
  try {
    expect(await store.getSession('old')).toMatchObject({ labels: { a: '1' }, metadataVersion: 0, nextSeq: 0 });
    expect(await store.feedEnd('')).toBe(0);
    expect(await store.updateLabels('old', { a: '2' }, 0)).toEqual({ kind: 'updated' });
    expect((await store.readFeed({ tenant: '', after: 0, limit: 10 })).map((r) => [r.kind, r.sessionId, r.labels])).toEqual([
      ['labels_changed', 'old', { a: '2' }],
    ]);
  } finally {
    await store.close();
  }
  // Opened again (the feed is there now): nothing added twice, the version unchanged.
  const again = new SqliteSessionStore({ path, durability: 'normal', nativeChecksums: 'off' });
  try {
    expect(await again.feedEnd('')).toBeGreaterThan(0);
  } finally {
    await again.close();
  }
  const check = new Database(path, { readonly: true });
  expect(check.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
  expect(check.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'feed_%'").pluck().get()).toBe(5);
  check.close();
});
