/**
 * Issue #17, integrity: what SQLite cannot detect itself. A byte changed in a stored event row
 * (data, type, citations, surface op, time) fails its CRC-32C on every read that returns the row
 * (DataCorruptedError: DATA_LOSS with the session and seq), the structural load fails on the
 * structural columns and on the digest, and verifyFile lists it. Commits lost from the database
 * (what a damaged WAL frame does) are caught by the heads recorded outside the database: the
 * session is refused (reads and appends), its seqs are never reused, verify reports it, and a
 * delete clears it. The untouched case next to each.
 */
import Database from 'better-sqlite3';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DataCorruptedError } from '../../src/app/storage-error.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { verifyFile } from '../../src/store/sqlite/verify.js';
import { checksumExtensionPath, type NativeChecksums } from '../../src/store/sqlite/native-checksums.js';
import { dataCrc, structuralCrc } from '../../src/store/sqlite/integrity.js';
import fc from 'fast-check';
import { crc32c } from '../../src/store/sqlite/crc32c.js';
import { readHeads } from '../../src/store/sqlite/head-record.js';
import { appendFileSync, writeFileSync } from 'node:fs';
import type { SessionEvent } from '../../src/domain/event.js';
import { appendAt, ev, newSession } from './store-contract.js';

/** A valid log (its surface replays): per 5 seqs a user message, a chunk, an assistant message citing [], a tool result replacing it, an ignorable custom event. */
function logEvents(from: number, count: number): SessionEvent[] {
  const out: SessionEvent[] = [];
  for (let seq = from; seq < from + count; seq++) {
    switch (seq % 5) {
      case 0:
        out.push(ev(seq, 'user/message', { id: `u${seq}`, role: 'user', content: [{ type: 'text', text: `hello ${seq}` }], source: { kind: 'user' } }, { surfaceOp: 'append' }));
        break;
      case 1:
        out.push(ev(seq, 'assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'é✓' } }));
        break;
      case 2:
        out.push(ev(seq, 'assistant/message', { id: `a${seq}`, role: 'assistant', content: [] }, { surfaceOp: 'append', sourceEventSeqs: [] }));
        break;
      case 3:
        out.push(ev(seq, 'tool/result', { message: { id: `t${seq}` } }, { surfaceOp: { op: 'replace', start: seq - 1, end: seq - 1 }, sourceEventSeqs: [seq - 1] }));
        break;
      default:
        out.push(ev(seq, 'x-custom/thing', null, { ignorable: true }));
    }
  }
  return out;
}
const mixedEvents = logEvents;

const root = mkdtempSync(join(tmpdir(), 'palimpsest-integrity-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshPath = (): string => join(root, `db-${n++}.db`);
let store: SqliteSessionStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

const FORWARD = { fromSeq: 0, direction: 'forward', limit: 100 } as const;

async function seeded(path: string): Promise<SqliteSessionStore> {
  return seed(new SqliteSessionStore({ path }));
}

async function seed(s: SqliteSessionStore): Promise<SqliteSessionStore> {
  await s.createSession(newSession('s'), mixedEvents(0, 10));
  await s.createSession(newSession('other'), mixedEvents(0, 5));
  return s;
}

/** Changes one column of one stored row behind the store's back (checksums untouched). */
function tamper(path: string, sql: string): void {
  const raw = new Database(path);
  raw.prepare(sql).run();
  raw.close();
}

async function corruption(p: Promise<unknown>): Promise<DataCorruptedError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(DataCorruptedError);
  return e as DataCorruptedError;
}

describe('CRC-32C', () => {
  it('is the Castagnoli CRC over UTF-8 bytes', () => {
    expect(crc32c('123456789')).toBe(0xe3069283);
    expect(crc32c('')).toBe(0);
    expect(crc32c('é✓𝄞')).not.toBe(crc32c('é✓𝄟'));
  });
});

/** The extension is built by `npm install` (scripts/build-native.mjs, needs a C compiler); CI requires it. */
const NATIVE = checksumExtensionPath() !== undefined || process.env['CI'] === 'true';

describe.skipIf(!NATIVE)('the checksum extension (native/sqlite-checksums.c)', () => {
  const path = checksumExtensionPath();
  const db = new Database(':memory:');
  if (path !== undefined) db.loadExtension(path);
  afterAll(() => db.close());
  const sql = <T>(q: string, ...args: unknown[]): T => db.prepare(q).pluck().get(...args) as T;

  it('is built (CI needs a C compiler: the store would verify in JavaScript without it)', () => {
    expect(path).toBeDefined();
  });

  it('computes exactly the JavaScript checksums over what SQLite stores (any text, seqs, ops, times)', () => {
    db.exec('CREATE TABLE r (seq INTEGER, type TEXT, time INTEGER, data TEXT, seqs BLOB, op TEXT, ign INTEGER) STRICT');
    const insert = db.prepare('INSERT INTO r VALUES (?, ?, ?, ?, ?, ?, ?)');
    const check = db.prepare('SELECT palimpsest_scrc(seq, op, seqs, ign, type), palimpsest_dcrc(time, data) FROM r WHERE rowid = ?').raw();
    fc.assert(
      fc.property(
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.string({ unit: 'grapheme', maxLength: 40 }),
        fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
        fc.string({ unit: 'binary', maxLength: 3000 }),
        fc.option(fc.uint8Array({ maxLength: 300 }), { nil: null }),
        fc.option(fc.constantFrom('append', '{"op":"replace","start":1,"end":2}', 'ü'), { nil: null }),
        fc.boolean(),
        (seq, type, time, data, seqs, op, ignorable) => {
          const blob = seqs === null ? null : Buffer.from(seqs);
          const rowid = insert.run(seq, type, time, data, blob, op, ignorable ? 1 : null).lastInsertRowid;
          expect(check.get(rowid)).toEqual([structuralCrc(seq, op, blob, ignorable ? 1 : null, type), dataCrc(time, data)]);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('palimpsest_row_check: 0 for an intact row, 1 for a structural mismatch, 2 for a data mismatch', () => {
    const scrc = structuralCrc(7, 'append', null, null, 'user/message');
    const dcrc = dataCrc(5, '{"a":1}');
    const check = (s: number, d: number, data = '{"a":1}'): number =>
      sql('SELECT palimpsest_row_check(7, ?, NULL, NULL, ?, ?, 5, ?, ?)', 'append', 'user/message', s, data, d);
    expect(check(scrc, dcrc)).toBe(0);
    expect(check(scrc ^ 1, dcrc)).toBe(1);
    expect(check(scrc, dcrc ^ 1)).toBe(2);
    expect(check(scrc, dcrc, '{"a":2}')).toBe(2);
    // A value of a storage class the schema forbids is a mismatch, never a pass.
    expect(sql('SELECT palimpsest_row_check(7, 1, NULL, NULL, ?, ?, 5, ?, ?)', 'user/message', scrc, '{"a":1}', dcrc)).toBe(1);
    expect(sql('SELECT palimpsest_row_check(7, ?, NULL, NULL, ?, ?, 5, X\'00\', ?)', 'append', 'user/message', scrc, dcrc)).toBe(2);
  });
});

describe.each<[string, NativeChecksums]>([
  ...(NATIVE ? [['in SQLite (the checksum extension)', 'require'] as [string, NativeChecksums]] : []),
  ['in JavaScript', 'off'],
])('SqliteSessionStore: event row checksums verified %s', (_how, nativeChecksums) => {
  const open = (path: string): SqliteSessionStore => new SqliteSessionStore({ path, nativeChecksums });
  const seeded = async (path: string): Promise<SqliteSessionStore> => seed(open(path));

  it('reads verify where the mode says', async () => {
    store = open(freshPath());
    expect(store.checksumsInSqlite).toBe(nativeChecksums === 'require');
  });

  it('reads back every field shape exactly: types with tabs, commas and astral characters, negative times, long citation lists, replace ops', async () => {
    const odd = [
      ev(0, 'x\tcustom,type \u{1f600}\u{1d11e}', { s: 'é✓ \u{1f600} tab\t,comma', n: [1, 2.5, null] }, { time: -1_234 }),
      ev(1, '', 'just a string', { time: 0, ignorable: true }),
      ev(2, 'assistant/message', { id: 'a2', role: 'assistant', content: [] }, { surfaceOp: 'append', sourceEventSeqs: [] }),
      ev(3, '日本語', [], { surfaceOp: { op: 'replace', start: 2, end: 2 }, sourceEventSeqs: [0, 1, 2], time: Number.MAX_SAFE_INTEGER }),
      ev(4, 'bulk', { big: 'x'.repeat(70_000) }, { sourceEventSeqs: Array.from({ length: 4 }, (_, i) => i), ignorable: true }),
    ];
    const path = freshPath();
    store = open(path);
    await store.createSession(newSession('odd'), odd);
    const texts = (await store.readEventTexts('odd', FORWARD)).map(({ dataBytes: _, ...t }) => t);
    expect(texts).toEqual(odd.map(({ data, ...rest }) => ({ ...rest, dataText: JSON.stringify(data) })));
    expect(await store.readEvents('odd', FORWARD)).toEqual(odd);
    expect(await store.readEvents('odd', { fromSeq: 4, direction: 'backward', limit: 2 })).toEqual([odd[4], odd[3]]);
    expect(await store.getEvents('odd', [0, 3])).toEqual([odd[0], odd[3]]);
  });

  it('an untouched database reads, loads and verifies clean', async () => {
    const path = freshPath();
    store = await seeded(path);
    expect(await store.readEvents('s', FORWARD)).toHaveLength(10);
    expect(await store.readStructure('s', 0)).toHaveLength(10);
    await store.close();
    store = open(path);
    expect(await store.readEvents('s', FORWARD)).toEqual(mixedEvents(0, 10));
    await store.close();
    store = undefined;
    expect(verifyFile(path)).toMatchObject({ sessions: 2, events: 15, problems: [] });
  });

  it('a changed data byte: every read path refuses the row (session, seq); other rows and sessions still read; verify finds it', async () => {
    const path = freshPath();
    store = await seeded(path);
    await store.close();
    tamper(path, "UPDATE events SET data = replace(data, 'hello 5', 'hellp 5') WHERE session_id = 's' AND seq = 5");
    store = open(path);
    const e = await corruption(store.readEvents('s', FORWARD));
    expect(e).toMatchObject({ sessionId: 's', seq: 5 });
    expect(e.message).toMatch(/seq 5 failed its data checksum/);
    await corruption(store.readEventTexts('s', { fromSeq: 5, direction: 'backward', limit: 1 }));
    await corruption(store.getEvents('s', [5]));
    await corruption(store.readEvents('s', { ...FORWARD, types: ['user/message'] }));
    await corruption((async () => { for await (const batch of store!.scanEvents('s', 0, 3)) void batch; })());
    // The rows before it, and the other session, are served.
    expect((await store.readEvents('s', { fromSeq: 0, direction: 'forward', limit: 5 })).map((x) => x.seq)).toEqual([0, 1, 2, 3, 4]);
    expect(await store.readEvents('other', FORWARD)).toHaveLength(5);
    await store.close();
    store = undefined;
    expect(verifyFile(path).problems).toEqual(['session "s": event 5 fails its data checksum']);
  });

  it.each([
    ['type', "UPDATE events SET type = 'assistant/chunl' WHERE session_id = 's' AND seq = 6"],
    ['citations', "UPDATE events SET source_event_seqs = X'07' WHERE session_id = 's' AND seq = 7"],
    ['surface op', "UPDATE events SET surface_op = '{\"op\":\"replace\",\"start\":0,\"end\":0}' WHERE session_id = 's' AND seq = 8"],
  ])('a changed %s: reads and the structural load (cold open) refuse it; verify finds it', async (_what, sql) => {
    const path = freshPath();
    store = await seeded(path);
    await store.close();
    tamper(path, sql);
    store = open(path);
    const e = await corruption(store.readStructure('s', 0));
    expect(e.message).toMatch(/structural checksum/);
    await corruption(store.readEvents('s', FORWARD));
    expect(await store.readStructure('other', 0)).toHaveLength(5);
    await store.close();
    store = undefined;
    expect(verifyFile(path).problems.join('\n')).toMatch(/session "s": event [678] fails its structural checksum/);
  });

  it('a row gone or rewritten with matching checksums fails the session digest on the structural load', async () => {
    const path = freshPath();
    store = await seeded(path);
    await store.close();
    // The last row dropped and the counters adjusted: every remaining row is self-consistent
    // (and the heads file gone too, so only the digest can tell).
    rmSync(`${path}-heads`);
    tamper(path, "DELETE FROM events WHERE session_id = 's' AND seq = 9");
    tamper(path, "UPDATE sessions SET next_seq = 9, event_count = 9 WHERE id = 's'");
    store = open(path);
    const e = await corruption(store.readStructure('s', 0));
    expect(e.message).toMatch(/do not match the session's digest/);
    expect(e.seq).toBeUndefined();
    await store.close();
    store = undefined;
    expect(verifyFile(path).problems.join('\n')).toMatch(/session "s": the stored events do not match the session digest/);
  });
});

describe('readHeads', () => {
  const line = (json: unknown[]): string => `${crc32c(JSON.stringify(json))} ${JSON.stringify(json)}\n`;
  it('keeps the highest head per incarnation, applies deletes, skips damaged and torn lines', () => {
    const path = join(root, 'heads-parse');
    writeFileSync(path, line(['a', 1, 5]) + line(['a', 1, 3]) + line(['b', 1, 2]) + line(['b', 1, null]) + line(['c', 1, 4]) + line(['c', 2, 1]));
    appendFileSync(path, line(['a', 1, 9]).replace('9', '8'));
    appendFileSync(path, line(['d', 1, 7]).slice(0, 10));
    expect([...readHeads(path)]).toEqual([['a', { createdAt: 1, nextSeq: 5 }], ['c', { createdAt: 2, nextSeq: 1 }]]);
    expect(readHeads(join(root, 'no-such-heads')).size).toBe(0);
  });
});

describe('SqliteSessionStore: heads recorded outside the database', () => {
  it('a database that lost acknowledged commits: the session is refused (reads, appends, re-create), never reusing its seqs; verify reports it; delete clears it', async () => {
    const path = freshPath();
    store = await seeded(path);
    await store.close();
    // The database as it was before the later commits (what dropping WAL frames leaves).
    copyFileSync(path, `${path}.before`);
    store = new SqliteSessionStore({ path });
    expect(await appendAt(store, 's', 10, logEvents(10, 5))).toEqual({ kind: 'appended' });
    await store.close();
    copyFileSync(`${path}.before`, path);
    rmSync(`${path}-wal`, { force: true });

    store = new SqliteSessionStore({ path });
    expect(store.damagedSessions.map((d) => d.sessionId)).toEqual(['s']);
    const e = await corruption(store.readEvents('s', FORWARD));
    expect(e.message).toMatch(/session s has head 9 in the database but its recorded head is 14: acknowledged commits were lost/);
    await corruption(store.readStructure('s', 0));
    // Seq 10 was acknowledged before: it is never handed out again.
    await corruption(appendAt(store, 's', 10, logEvents(10, 1)));
    expect((await store.readEvents('s', FORWARD).catch(() => [])).length).toBe(0);
    // The untouched session is served and appended to.
    expect(await store.readEvents('other', FORWARD)).toHaveLength(5);
    expect(await appendAt(store, 'other', 5, logEvents(5, 1))).toEqual({ kind: 'appended' });
    await store.close();
    store = undefined;
    expect(verifyFile(path).problems.join('\n')).toMatch(/session "s": head 9 is below the recorded head 14/);

    // Still refused after a restart; a conditional delete (retention's) that does not match
    // leaves it refused; deleting it clears it.
    store = new SqliteSessionStore({ path });
    await corruption(store.readEvents('s', FORWARD));
    expect(await store.deleteSession('s', { nextSeq: 999, createdAt: 0 })).toBe(false);
    expect(store.damagedSessions.map((d) => d.sessionId)).toEqual(['s']);
    await corruption(store.readEvents('s', FORWARD));
    expect(await store.deleteSession('s')).toBe(true);
    await store.createSession(newSession('s'), []);
    expect(await store.readEvents('s', FORWARD)).toEqual([]);
    await store.close();
    store = undefined;
    expect(verifyFile(path).problems).toEqual([]);
  });
});
