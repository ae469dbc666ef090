/**
 * Feed retention on PostgreSQL (issue #35), against the run's throwaway cluster: a prune removes a
 * prefix of each tenant's positions even when the database's clock stepped back (a later record
 * stamped with an older time), so it never leaves a hole a resuming reader would skip silently.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewSession } from '../../src/app/store-port.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';

const ev = (seq: number): SessionEvent => ({ type: 'turn/start', seq, time: 1_700_000_000_000 + seq, data: { turn: seq } });
const record = (id: string): NewSession => ({ header: { version: 1, id, createdAt: 1000 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' });

describe.skipIf(!hasPostgres())('feed retention on PostgreSQL', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('prunes by position: a record stamped earlier after a clock step back goes only with the records before it', async () => {
    const store = await PostgresSessionStore.open({ url: db.url, schema: 'r0' });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await store.createSession(record('s'), []);
      let writer = 'w0';
      for (let seq = 0; seq < 3; seq++) {
        const r = await store.append('s', { expectedNextSeq: seq, expectedWriter: writer, writer: `w${seq + 1}`, events: [ev(seq)], surfaceLength: 0 });
        expect(r.kind).toBe('appended');
        writer = `w${seq + 1}`;
      }
      // Positions 1..4; the clock stepped back before 2 was written: 1 at T, 2 at T - 10 s, 3 and 4 at T + 1 s.
      const T = 1_800_000_000_000;
      await client.query('UPDATE r0.feed SET time = CASE position WHEN 1 THEN $1::bigint WHEN 2 THEN $1::bigint - 10000 ELSE $1::bigint + 1000 END', [T]);
      // Cutoff T - 5 s: 2 is older, but 1 (before it) is not, so nothing goes (no hole after 1).
      expect(await store.pruneFeed(T - 5000)).toBe(0);
      expect((await store.readFeed({ tenant: '', after: 0, limit: 10 })).map((r) => r.position)).toEqual([1, 2, 3, 4]);
      expect(await store.feedPrunedUpTo('')).toBe(0);
      // Cutoff T + 500: everything before 3, the first record at or after it.
      expect(await store.pruneFeed(T + 500)).toBe(2);
      expect((await store.readFeed({ tenant: '', after: 0, limit: 10 })).map((r) => r.position)).toEqual([3, 4]);
      expect(await store.feedPrunedUpTo('')).toBe(2);
    } finally {
      await client.end();
      await store.close();
    }
  });
});
