/**
 * The SQLite store's blobs beyond the store contract (issue #39): an online backup carries them
 * (the copy reads back byte for byte and verifies clean), and a database reopened by another store
 * instance serves them.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BlobbingStore } from '../../src/app/blobbing-store.js';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import { backupDatabase } from '../../src/store/sqlite/backup.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import Database from 'better-sqlite3';
import { verifyDatabase } from '../../src/store/sqlite/verify.js';

const dir = mkdtempSync(join(tmpdir(), 'palimpsest-sqlite-blobs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const image = randomBytes(100_000).toString('base64');
const text = `${'long tool output ✓ '.repeat(5000)}`;
const events: CandidateEvent[] = [
  { type: 'user/message', surfaceOp: 'append', data: { id: 'u0', role: 'user', content: [{ type: 'image', attachment: { mimeType: 'image/png', data: image } }], source: { kind: 'user' } } },
  { type: 'x/output', data: { text } },
];

describe('SQLite blobs', () => {
  it('a backup carries the blobs: the copy reads back byte for byte and verifies clean', async () => {
    const path = join(dir, 'src.db');
    const store = new SqliteSessionStore({ path });
    const app = new SessionService(new BlobbingStore(store, 65_536), DEFAULT_LIMITS);
    await app.createSession(ANONYMOUS, { id: 's' });
    await app.append(ANONYMOUS, 's', events);
    expect(await store.blobs.sessionHasBlobs('s')).toBe(true);
    const copy = join(dir, 'copy.db');
    await backupDatabase(path, copy);
    await store.close();
    // A backup has no heads record of its own: the database alone is checked.
    const db = new Database(copy, { readonly: true, fileMustExist: true });
    expect(verifyDatabase(db).problems).toEqual([]);
    db.close();
    const reopened = new SqliteSessionStore({ path: copy });
    try {
      const got = await new BlobbingStore(reopened, 65_536).readEvents('s', { fromSeq: 0, direction: 'forward', limit: 10 });
      expect(got.map((e) => JSON.stringify(e.data))).toEqual(events.map((e) => JSON.stringify(e.data)));
      const raw = await reopened.readEventTexts('s', { fromSeq: 0, direction: 'forward', limit: 10 });
      expect(raw.every((e) => e.dataText.length < 600)).toBe(true);
    } finally {
      await reopened.close();
    }
  });
});
