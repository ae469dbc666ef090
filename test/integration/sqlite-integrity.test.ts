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
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DataCorruptedError } from '../../src/app/storage-error.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { verifyFile } from '../../src/store/sqlite/verify.js';
import { checksumExtensionPath, loadChecksumExtension, type NativeChecksums } from '../../src/store/sqlite/sqlite-ext.js';
import { EVENT_COLUMNS, EVENT_LINE, LINE_FORMAT, decodeEventLine, decodeEventTextLine, encodeEvents } from '../../src/store/sqlite/row-codec.js';
import { TOKEN_COLUMNS } from '../../src/store/sqlite/token-figures.js';
import type { Json } from '../../src/domain/event.js';
import { columnsOfRows, type StructuralColumns } from '../../src/domain/structural-columns.js';
import fc from 'fast-check';
import { CRC_INIT, crc32c, crcByte, crcFinal, crcString } from '../../src/store/sqlite/crc32c.js';
import { readHeads } from '../../src/store/sqlite/head-record.js';
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import type { SessionEvent } from '../../src/domain/event.js';
import { appendAt, ev, newSession, req } from './store-contract.js';
import { dataCrc, digestStep, structuralCrc } from '../../src/store/sqlite/integrity.js';
import { digestOf } from '../../src/store/sqlite/session-writes.js';
import { tempDbDir } from '../support/temp-db.js';

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

const { root, freshPath } = tempDbDir('palimpsest-integrity-');
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

/** The extension is built by `npm install` (scripts/build-sqlite-ext.mjs, needs a C compiler); CI requires it. */
const NATIVE = checksumExtensionPath() !== undefined || process.env['CI'] === 'true';

describe.skipIf(!NATIVE)('the checksum extension (sqlite-ext/sqlite-checksums.c)', () => {
  const path = checksumExtensionPath();
  const db = new Database(':memory:');
  if (path !== undefined) db.loadExtension(path);
  db.exec(`CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
    source_event_seqs BLOB, surface_op TEXT, ignorable INTEGER, scrc INTEGER NOT NULL, dcrc INTEGER NOT NULL, tokens INTEGER, usage TEXT)`);
  afterAll(() => db.close());
  const insert = db.prepare(`INSERT INTO events (session_id, ${EVENT_COLUMNS}, ${TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const lineOf = db.prepare(`SELECT ${EVENT_LINE} FROM events WHERE rowid = ?`).pluck();
  /** The line SQLite writes for `row` as the store binds it (EventRow from encodeEvents), optionally changed first. */
  const line = (row: unknown[], change = ''): string => {
    const rowid = insert.run(row).lastInsertRowid;
    if (change !== '') db.prepare(`UPDATE events SET ${change} WHERE rowid = ?`).run(rowid);
    return lineOf.get(rowid) as string;
  };
  const text = (data: Json): string => JSON.stringify(data);

  it('is built (CI needs a C compiler: the store would verify in JavaScript without it)', () => {
    expect(path).toBeDefined();
    expect(db.prepare('SELECT palimpsest_checksums_format()').pluck().get()).toBe(LINE_FORMAT);
  });

  it('checks exactly the checksums the store writes, and the line decodes back to the event (any type, time, data, citations, op)', () => {
    const event = fc.record(
      {
        type: fc.oneof(fc.string({ unit: 'grapheme', maxLength: 30 }), fc.constantFrom('', 'a\tb,c', ',', '\t', 'x\u0000y', '\u{1f600}\u{1d11e}')),
        seq: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        time: fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
        data: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.parse(JSON.stringify(v)) as Json),
        sourceEventSeqs: fc.array(fc.nat({ max: Number.MAX_SAFE_INTEGER }), { maxLength: 40 }),
        surfaceOp: fc.oneof(fc.constant('append' as const), fc.record({ op: fc.constant('replace' as const), start: fc.nat(), end: fc.nat() })),
        ignorable: fc.constant(true as const),
      },
      { requiredKeys: ['type', 'seq', 'time', 'data'] },
    );
    fc.assert(
      fc.property(event, (e) => {
        const [row] = encodeEvents('s', [e as SessionEvent]).rows;
        expect(decodeEventLine('s', line(row!))).toStrictEqual(JSON.parse(JSON.stringify(e)));
        const t = decodeEventTextLine('s', line(row!));
        expect(t.dataBytes).toBe(Buffer.byteLength(text(e.data), 'utf8'));
        expect(t.dataText).toBe(text(e.data));
        // Either checksum off by one bit: the row is refused, naming which.
        const scrcOff = [...row!];
        scrcOff[8] = ((row![8] as number) ^ 1) >>> 0;
        expect(line(scrcOff)).toBe(`!1,${e.seq}`);
        const dcrcOff = [...row!];
        dcrcOff[9] = ((row![9] as number) ^ (1 << 31)) >>> 0;
        expect(line(dcrcOff)).toBe(`!2,${e.seq}`);
      }),
      { numRuns: 300 },
    );
  });

  it("computes the writer's checksums and digest bit for bit as JavaScript does (palimpsest_scrc, palimpsest_dcrc, palimpsest_digest)", () => {
    const scrc = db.prepare('SELECT palimpsest_scrc(?, ?, ?, ?, ?)').pluck();
    const dcrc = db.prepare('SELECT palimpsest_dcrc(?, ?)').pluck();
    const event = fc.record(
      {
        type: fc.oneof(fc.string({ unit: 'grapheme', maxLength: 30 }), fc.constantFrom('', 'a\tb,c', '\u{1f600}\u{1d11e}', 'é✓'.repeat(40))),
        seq: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        time: fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
        // Short and long texts (the JS CRC takes another path from 48 characters on), astral characters included.
        data: fc.oneof(fc.jsonValue({ maxDepth: 4 }), fc.string({ unit: 'grapheme', minLength: 40, maxLength: 400 })).map((v) => JSON.parse(JSON.stringify(v)) as Json),
        sourceEventSeqs: fc.array(fc.nat({ max: Number.MAX_SAFE_INTEGER }), { maxLength: 40 }),
        surfaceOp: fc.oneof(fc.constant('append' as const), fc.record({ op: fc.constant('replace' as const), start: fc.nat(), end: fc.nat() })),
        ignorable: fc.constant(true as const),
      },
      { requiredKeys: ['type', 'seq', 'time', 'data'] },
    );
    fc.assert(
      fc.property(fc.array(event, { minLength: 1, maxLength: 8 }), (events) => {
        const { rows } = encodeEvents('s', events as SessionEvent[]);
        for (const r of rows) {
          expect(scrc.get(r[1], r[6], r[5], r[7], r[2])).toBe(r[8]);
          expect(dcrc.get(r[3], r[4])).toBe(r[9]);
        }
        // The digest from any start over the rows in seq order (rows inserted out of order: the subquery orders them).
        const start = rows[0]![1] % 2 === 0 ? 0 : 0xdeadbeef;
        const sorted = [...rows].sort((a, b) => a[1] - b[1]).filter((r, i, all) => i === 0 || all[i - 1]![1] !== r[1]);
        db.exec('DELETE FROM events');
        for (const r of [...sorted].reverse()) insert.run(r);
        const digest = db.prepare('SELECT palimpsest_digest(?, seq, scrc, dcrc) FROM (SELECT seq, scrc, dcrc FROM events ORDER BY seq)').pluck();
        expect(digest.get(start)).toBe(digestOf(start, sorted));
      }),
      { numRuns: 200 },
    );
    db.exec('DELETE FROM events');
  });

  it('palimpsest_digest refuses rows out of seq order and values not integers; no rows is NULL; the checksums refuse what no row holds', () => {
    const rows = encodeEvents('s', [ev(1, 'a', { a: 1 }), ev(2, 'b', [2])]).rows;
    db.exec('DELETE FROM events');
    for (const r of rows) insert.run(r);
    const over = (order: string) => db.prepare(`SELECT palimpsest_digest(7, seq, scrc, dcrc) FROM (SELECT seq, scrc, dcrc FROM events ORDER BY seq ${order})`).pluck();
    expect(over('ASC').get()).toBe(digestOf(7, rows));
    expect(() => over('DESC').get()).toThrow(/palimpsest_digest: rows out of seq order/);
    expect(db.prepare("SELECT palimpsest_digest(7, seq, scrc, dcrc) FROM events WHERE type = 'none'").pluck().get()).toBeNull();
    expect(() => db.prepare("SELECT palimpsest_digest(7, seq, 'x', dcrc) FROM events").pluck().get()).toThrow(/not an integer/);
    expect(() => db.prepare("SELECT palimpsest_scrc(1.5, NULL, NULL, NULL, 't')").get()).toThrow(/palimpsest_scrc: not an event row/);
    expect(() => db.prepare("SELECT palimpsest_scrc(1, NULL, NULL, NULL, x'61')").get()).toThrow(/palimpsest_scrc: not an event row/);
    expect(() => db.prepare("SELECT palimpsest_dcrc(1, x'61')").get()).toThrow(/palimpsest_dcrc: not an event row/);
    db.exec('DELETE FROM events');
  });

  it('a value of a class the schema forbids, or an empty surface op, is damage, never a pass', () => {
    const [row] = encodeEvents('s', [ev(7, 'user/message', { a: 1 }, { surfaceOp: 'append' })]).rows;
    expect(decodeEventLine('s', line(row!))).toEqual(ev(7, 'user/message', { a: 1 }, { surfaceOp: 'append' }));
    expect(line(row!, 'type = CAST(type AS BLOB)')).toBe('!1,7');
    expect(line(row!, 'surface_op = CAST(surface_op AS BLOB)')).toBe('!1,7');
    expect(line(row!, "surface_op = ''")).toBe('!1,7');
    expect(line(row!, 'data = CAST(data AS BLOB)')).toBe('!2,7');
    expect(line(row!, 'time = 1.5')).toBe('!2,7');
    expect(() => decodeEventLine('s', '!2,7')).toThrow(/seq 7 failed its data checksum/);
  });

  it('a type that is not well-formed UTF-8 is damage even when its checksum matches (its JS length would be wrong)', () => {
    const [row] = encodeEvents('s', [ev(9, 'ab', { a: 1 })]).rows;
    // The bytes 61 ED A0 80 (what a lone surrogate becomes on disk), with a CRC over exactly those bytes.
    const bytes = Buffer.from([0x61, 0xed, 0xa0, 0x80]);
    let c = crcString(CRC_INIT, '9:\t-\t\t');
    for (const b of bytes) c = crcByte(c, b);
    const crafted = [...row!];
    crafted[8] = crcFinal(c);
    const rowid = insert.run(crafted).lastInsertRowid;
    db.prepare('UPDATE events SET type = CAST(? AS TEXT) WHERE rowid = ?').run(bytes, rowid);
    expect(lineOf.get(rowid)).toBe('!1,9');
  });

  it('a line this build cannot parse is refused as damage, not served in part', () => {
    for (const bad of ['7,5,,3,2,-,', '7,5,,300,2,-,\tabc{}', '7,5', 'x,5,,1,2,-,\ta{}', '']) {
      expect(() => decodeEventTextLine('s', bad)).toThrow(DataCorruptedError);
    }
  });
});

describe('loading the checksum extension', () => {
  const env = process.env['PALIMPSEST_SQLITE_EXTENSION'];
  afterEach(() => {
    if (env === undefined) delete process.env['PALIMPSEST_SQLITE_EXTENSION'];
    else process.env['PALIMPSEST_SQLITE_EXTENSION'] = env;
  });

  it("an extension that cannot be loaded: 'auto' verifies in JavaScript and says why, 'require' refuses to open", () => {
    process.env['PALIMPSEST_SQLITE_EXTENSION'] = join(root, 'no-such-extension.so');
    const db = new Database(':memory:');
    const got = loadChecksumExtension(db, 'auto', LINE_FORMAT);
    expect(got.loaded).toBe(false);
    expect(got.problem).toMatch(/cannot load the SQLite checksum extension .*no-such-extension\.so.*verified in JavaScript/);
    expect(() => loadChecksumExtension(db, 'require', LINE_FORMAT)).toThrow(/cannot load the SQLite checksum extension/);
    expect(loadChecksumExtension(db, 'off', LINE_FORMAT)).toEqual({ loaded: false });
    db.close();
    expect(() => new SqliteSessionStore({ path: freshPath(), nativeChecksums: 'require' })).toThrow(/cannot load the SQLite checksum extension/);
    const fallback = new SqliteSessionStore({ path: freshPath() });
    expect(fallback.checksumsInSqlite).toBe(false);
    expect(fallback.checksumExtension.problem).toBeDefined();
    void fallback.close();
  });

  it.skipIf(!NATIVE)('a build of another line format is not used (a stale library never feeds a newer decoder)', () => {
    const db = new Database(':memory:');
    const other = loadChecksumExtension(db, 'auto', LINE_FORMAT + 1);
    expect(other.loaded).toBe(false);
    expect(other.problem).toMatch(new RegExp(`writes line format ${LINE_FORMAT}, this build reads ${LINE_FORMAT + 1}: rebuild it`));
    expect(() => loadChecksumExtension(db, 'require', LINE_FORMAT + 1)).toThrow(/rebuild it with `npm run build:sqlite-ext`/);
    const same = loadChecksumExtension(db, 'require', LINE_FORMAT);
    expect(same).toMatchObject({ loaded: true });
    expect(typeof same.hardwareCrc).toBe('boolean');
    db.close();
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

  it("a stray row past the session's head (damage) is not chained into the digest of the rows a group writes; a call that runs into it leaves nothing", async () => {
    const path = freshPath();
    store = open(path);
    await store.createSession(newSession('c'), []);
    await store.close();
    const raw = new Database(path);
    raw.prepare("INSERT INTO events (session_id, seq, type, time, data, scrc, dcrc) VALUES ('c', 27, 't', 5, '{\"s\":27}', ?, ?)").run(structuralCrc(27, null, null, null, 't'), dataCrc(5, '{"s":27}'));
    raw.close();
    store = open(path);
    // 30 rows: the INSERT of the first 25 runs before the row at 27 collides; the call's SAVEPOINT takes them back.
    await expect(appendAt(store, 'c', 0, Array.from({ length: 30 }, (_, i) => ev(i, 't', { s: i }, { time: 5 })))).rejects.toThrow();
    expect((await appendAt(store, 'c', 0, [ev(0, 't', { s: 0 }, { time: 5 })])).kind).toBe('appended');
    await store.close();
    const db = new Database(path, { readonly: true });
    const seqs = db.prepare("SELECT seq FROM events WHERE session_id = 'c' ORDER BY seq").pluck().all();
    const digest = db.prepare("SELECT digest FROM sessions WHERE id = 'c'").pluck().get();
    db.close();
    expect(seqs).toEqual([0, 27]);
    // The digest covers the row the group wrote, as the JavaScript checksums chain it (not the stray row).
    expect(digest).toBe(digestStep(0, structuralCrc(0, null, null, null, 't'), dataCrc(5, '{"s":0}')));
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
    // The cold open's columns (palimpsest_structure in SQLite, else the rows put in columns) say what the rows say.
    const plain = (c: StructuralColumns) => ({ ...c, seqs: [...c.seqs], typeIds: [...c.typeIds], kinds: [...c.kinds] });
    const columns = plain(await store.readStructureColumns('odd'));
    expect(columns).toEqual(plain(columnsOfRows(await store.readStructure('odd', 0))));
    expect(columns).toMatchObject({ length: 5, seqs: [0, 1, 2, 3, 4], typeIds: [0, 1, 2, 3, 4], types: odd.map((e) => e.type), kinds: [0, 2, 2, 2, 2] });
    await store.createSession(newSession('mixed'), mixedEvents(0, 10));
    const rows = await store.readStructure('mixed', 0);
    const mixed = await store.readStructureColumns('mixed');
    expect(plain(mixed)).toEqual(plain(columnsOfRows(rows)));
    expect([...mixed.kinds]).toEqual([1, 0, 2, 2, 2, 1, 0, 2, 2, 2]);
    expect((await store.readStructureColumns('none')).length).toBe(0);
  });

  // The writer thread in the mode that changes it (the thread loads the extension too); its JS path is sqlite-append-thread.test.ts's.
  it.each(nativeChecksums === 'require' ? (['thread', 'in-process'] as const) : (['in-process'] as const))('appends through the group commit (%s) store the checksums and digest integrity.ts defines, and verify clean', async (writer) => {
    const path = freshPath();
    store = new SqliteSessionStore({ path, nativeChecksums, ...(writer === 'thread' ? { appendWriter: 'thread' } : {}) });
    await store.createSession(newSession('a'), mixedEvents(0, 3));
    await store.createSession(newSession('b'), []);
    const writerOf = async (id: string): Promise<string> => (await store!.getSession(id))!.writer;
    // One group: a multi-row call and a single event on 'a', a call with an idempotency key and
    // one that conflicts on 'b' (written in its own SAVEPOINT, then nothing of the failed one).
    const a1 = req(3, mixedEvents(3, 37), { expectedWriter: await writerOf('a') });
    const a2 = req(40, [ev(40, 'x/\u{1f600}', { t: 'é✓'.repeat(30) })], { expectedWriter: a1.writer });
    const b1 = req(0, mixedEvents(0, 12), { expectedWriter: await writerOf('b'), idempotency: { key: 'k', requestHash: 'h' } });
    const bad = req(5, [ev(5)], { expectedWriter: b1.writer });
    const outcomes = await Promise.all([a1, a2, b1, bad].map((r, i) => store!.append(i < 2 ? 'a' : 'b', r)));
    expect(outcomes.map((o) => o.kind)).toEqual(['appended', 'appended', 'appended', 'conflict']);
    expect(await appendAt(store, 'b', 12, mixedEvents(12, 20))).toEqual({ kind: 'appended' });
    await store.close();
    store = undefined;
    const raw = new Database(path, { readonly: true });
    for (const [id, count] of [['a', 41], ['b', 32]] as const) {
      const rows = raw.prepare(`SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc FROM events WHERE session_id = ? ORDER BY seq`).raw().all(id) as [number, string, number, string, Buffer | null, string | null, 1 | null, number, number][];
      expect(rows).toHaveLength(count);
      let digest = 0;
      for (const r of rows) {
        expect([r[0], r[7], r[8]]).toEqual([r[0], structuralCrc(r[0], r[5], r[4], r[6], r[1]), dataCrc(r[2], r[3])]);
        digest = digestOf(digest, [['', r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], null, null]]);
      }
      expect(raw.prepare('SELECT digest FROM sessions WHERE id = ?').pluck().get(id)).toBe(digest);
    }
    raw.close();
    expect(verifyFile(path)).toMatchObject({ sessions: 2, events: 73, problems: [] });
  });

  it.skipIf(nativeChecksums !== 'require')('a writer thread that cannot load the extension the store loaded computes the checksums in JavaScript', async () => {
    const path = freshPath();
    store = new SqliteSessionStore({ path, nativeChecksums, appendWriter: 'thread' });
    await store.createSession(newSession('a'), []);
    // The thread starts with the first append and reads the variable then (a worker copies the environment).
    const env = process.env['PALIMPSEST_SQLITE_EXTENSION'];
    process.env['PALIMPSEST_SQLITE_EXTENSION'] = join(root, 'no-such-extension.so');
    try {
      expect(await appendAt(store, 'a', 0, mixedEvents(0, 12))).toEqual({ kind: 'appended' });
    } finally {
      if (env === undefined) delete process.env['PALIMPSEST_SQLITE_EXTENSION'];
      else process.env['PALIMPSEST_SQLITE_EXTENSION'] = env;
    }
    expect(await appendAt(store, 'a', 12, mixedEvents(12, 3))).toEqual({ kind: 'appended' });
    expect(await store.readEvents('a', FORWARD)).toEqual(mixedEvents(0, 15));
    await store.close();
    store = undefined;
    expect(verifyFile(path)).toMatchObject({ sessions: 1, events: 15, problems: [] });
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

  it('a byte of the file overwritten with invalid UTF-8 (0xFF) in a data text: every read refuses the row, in both modes', async () => {
    const path = freshPath();
    store = await seeded(path);
    await store.close();
    store = undefined;
    const file = readFileSync(path);
    // The event's JSON text (the search index holds the words without the quotes).
    const at = file.indexOf('"hello 5"');
    expect(at).toBeGreaterThan(0);
    expect(file.indexOf('"hello 5"', at + 1)).toBe(-1);
    file[at + 3] = 0xff;
    writeFileSync(path, file);
    store = open(path);
    const e = await corruption(store.readEvents('s', FORWARD));
    expect(e).toMatchObject({ sessionId: 's', seq: 5 });
    await corruption(store.readEventTexts('s', { fromSeq: 5, direction: 'forward', limit: 1 }));
    await corruption(store.getEvents('s', [5]));
    expect((await store.readEvents('s', { fromSeq: 6, direction: 'forward', limit: 10 })).map((x) => x.seq)).toEqual([6, 7, 8, 9]);
  });

  it.each([
    ['a type stored as a BLOB (one flipped record-header bit)', 'type = CAST(type AS BLOB)', 6],
    ['an empty surface op where there was none (both checksums still match)', "surface_op = ''", 6],
  ])('%s: reads and verify report the row, and verify goes on to the other sessions', async (_what, change, seq) => {
    const path = freshPath();
    store = await seeded(path);
    await store.close();
    store = undefined;
    // STRICT would refuse the BLOB: the damage is made behind its back, as a bit flip would
    // (python3's sqlite3 module, which lets writable_schema drop STRICT for the one UPDATE;
    // better-sqlite3 runs SQLite in defensive mode).
    const script = [
      'import sqlite3, sys',
      'db = sqlite3.connect(sys.argv[1], isolation_level=None)',
      'db.execute("PRAGMA writable_schema = ON")',
      `db.execute("UPDATE sqlite_schema SET sql = replace(sql, ') STRICT, WITHOUT ROWID', ') WITHOUT ROWID') WHERE name = 'events'")`,
      'db.close()',
      'db = sqlite3.connect(sys.argv[1], isolation_level=None)',
      `db.execute(sys.argv[2])`,
      'db.execute("PRAGMA writable_schema = ON")',
      `db.execute("UPDATE sqlite_schema SET sql = replace(sql, ') WITHOUT ROWID', ') STRICT, WITHOUT ROWID') WHERE name = 'events'")`,
      'db.close()',
    ].join('\n');
    execFileSync(existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3', ['-c', script, path, `UPDATE events SET ${change} WHERE session_id = 's' AND seq = ${seq}`]);
    store = open(path);
    expect(await corruption(store.readEvents('s', FORWARD))).toMatchObject({ sessionId: 's', seq });
    await corruption(store.readEventTexts('s', { fromSeq: seq, direction: 'forward', limit: 1 }));
    // The structural load (cold open) reads these rows as the values they were (a BLOB of the
    // type's bytes concatenates as that text; '' folds like NULL): nothing wrong is replayed, and
    // checking classes there would cost ~12% of every cold open.
    expect(await store.readStructure('s', 0)).toHaveLength(10);
    // In SQLite the class check is free: the columns refuse the row.
    if (nativeChecksums === 'require') expect(await corruption(store.readStructureColumns('s'))).toMatchObject({ sessionId: 's', seq });
    else expect((await store.readStructureColumns('s')).length).toBe(10);
    expect(await store.readEvents('other', FORWARD)).toHaveLength(5);
    await store.close();
    store = undefined;
    // (PRAGMA integrity_check also names a BLOB in a STRICT table's TEXT column.)
    expect(verifyFile(path).problems.filter((p) => p.startsWith('session'))).toEqual([`session "s": event ${seq} fails its structural checksum`]);
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
    expect(await corruption(store.readStructureColumns('s'))).toMatchObject({ sessionId: 's', seq: e.seq, message: e.message });
    await corruption(store.readEvents('s', FORWARD));
    expect(await store.readStructure('other', 0)).toHaveLength(5);
    await store.close();
    store = undefined;
    expect(verifyFile(path).problems.join('\n')).toMatch(/session "s": event [678] fails its structural checksum/);
  });

  it('a seq beyond 2^53 (flipped bits) is refused by the structural load in columns too (SQLite hands such rows to the JavaScript check)', async () => {
    const path = freshPath();
    store = await seeded(path);
    await store.close();
    tamper(path, "UPDATE events SET seq = 9007199254740993 WHERE session_id = 's' AND seq = 9");
    store = open(path);
    expect((await corruption(store.readStructureColumns('s'))).message).toMatch(/structural checksum/);
    expect((await store.readStructureColumns('other')).length).toBe(5);
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
    expect((await corruption(store.readStructureColumns('s'))).message).toBe(e.message);
    expect((await store.readStructureColumns('other')).length).toBe(5);
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
