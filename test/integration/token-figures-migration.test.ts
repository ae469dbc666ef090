/**
 * Issue #37: the SQLite migration that adds the token figure columns (events.tokens, events.usage)
 * backfills every existing row with the figures a new write stores, so a migrated file answers
 * GetSession's token counts from the figures exactly as they were computed from the data.
 */
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import { sessionTokens } from '../../src/app/session-tokens.js';
import type { Json } from '../../src/domain/event.js';
import { storedTokenFigures } from '../../src/domain/event-tokens.js';
import { addAssistantUsage, estimateMessageTokens, NO_USAGE } from '../../src/domain/token-estimate.js';
import { decodeSurfaceOp } from '../../src/store/sqlite/codec.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { SCHEMA_FIXTURES } from '../support/schema-fixtures.js';
import { tempDbDir } from '../support/temp-db.js';

const tmp = tempDbDir('palimpsest-token-figures-');
const FIXTURE = join(SCHEMA_FIXTURES, 'sqlite-v4.db');

describe('the token figures migration (SQLite)', () => {
  it('backfills every row of the schema-4 fixture; the migrated sessions\' counts equal the ones recomputed from their data', async () => {
    const path = tmp.freshPath();
    copyFileSync(FIXTURE, path);
    copyFileSync(`${FIXTURE}-heads`, `${path}-heads`);
    const app = new SessionService(new SqliteSessionStore({ path, appendWriter: 'inline' }));
    const sessions = new Database(path, { readonly: true }).prepare('SELECT id, tenant FROM sessions WHERE pending = 0').raw().all() as [string, string][];
    expect(sessions.length).toBeGreaterThan(0);
    let withMessages = 0;
    try {
      for (const [key, tenant] of sessions) {
        const ctx = { tenant };
        const id = tenant === '' ? key : key.slice(tenant.length + 1);
        const messages = (await app.getMessagesPage(ctx, id, 'model', 0, '', undefined)).messages;
        let usage = NO_USAGE;
        for await (const batch of app.scan(ctx, id)) for (const e of batch) if (e.type === 'assistant/message') usage = addAssistantUsage(usage, e.data);
        expect(await sessionTokens(app, ctx, id), key).toEqual({ surfaceTokens: messages.reduce((a, m) => a + estimateMessageTokens(m.message), 0), usage });
        if (messages.length > 0) withMessages++;
      }
    } finally {
      await app.close();
    }
    expect(withMessages).toBeGreaterThan(0);
    // Every row holds what a new write of it would store (NULL for no figure).
    const db = new Database(path, { readonly: true });
    const rows = db.prepare('SELECT seq, type, data, surface_op, tokens, usage FROM events').raw().all() as [number, string, string, string | null, number | null, string | null][];
    db.close();
    let figured = 0;
    for (const [seq, type, data, op, tokens, usage] of rows) {
      const f = storedTokenFigures({ seq, type, data: JSON.parse(data) as Json, surfaceOp: op === null ? undefined : decodeSurfaceOp(op) }, data);
      expect([tokens, usage], `${type} ${seq}`).toEqual([f.tokens === 0 ? null : f.tokens, f.usage ?? null]);
      if (tokens !== null) figured++;
    }
    expect(figured).toBeGreaterThan(0);
  });
});
