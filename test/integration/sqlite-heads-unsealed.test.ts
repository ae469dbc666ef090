/**
 * Issue #33 item 5: the heads record (`<db>-heads`) is what lets the store see acknowledged
 * commits that a damaged WAL rolled back. A database that holds sessions and opens with that file
 * missing, emptied or damaged is marked unsealed: the store reports it (headsUnsealed; the server
 * logs it at error level), verify --db reports it (exit 1), and the mark survives restarts until
 * `palimpsest verify --db F --reseal-heads`. A fresh database, a sealed file and a torn last line
 * (a crash mid-write) are not reported.
 */
import { appendFileSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { verifyFile } from '../../src/store/sqlite/verify.js';
import { appendAt, ev, newSession } from './store-contract.js';
import { tempDbDir } from '../support/temp-db.js';
import { runCli } from '../support/cli.js';
import { ensureBuilt } from '../support/server-process.js';

const dbs = tempDbDir('palimpsest-heads-unsealed-');
const open: SqliteSessionStore[] = [];
beforeAll(() => ensureBuilt(), 120_000);
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

function store(path: string): SqliteSessionStore {
  const s = new SqliteSessionStore({ path });
  open.push(s);
  return s;
}

/** A database with sessions 'a' and 'b' (2 events each), closed. */
async function withSessions(): Promise<string> {
  const path = dbs.freshPath();
  const s = store(path);
  for (const id of ['a', 'b']) {
    await s.createSession(newSession(id), []);
    await appendAt(s, id, 0, [ev(0, 'x/note', 1), ev(1, 'x/note', 2)]);
  }
  await s.close();
  return path;
}

describe('the heads record missing, emptied or damaged while the database holds sessions', () => {
  it.each([
    ['missing', (heads: string) => rmSync(heads), /-heads is missing/],
    ['empty', (heads: string) => truncateSync(heads, 0), /-heads is empty/],
    ['damaged', (heads: string) => {
      const text = readFileSync(heads, 'utf8');
      // One byte of the first line's JSON changed: its checksum no longer matches.
      writeFileSync(heads, text.replace('"a"', '"c"'));
    }, /-heads is damaged \(1 lines fail their checksum\)/],
  ] as const)('%s: reported at open and by verify, after restarts too, until re-sealed', async (_name, damage, why) => {
    const path = await withSessions();
    damage(`${path}-heads`);
    expect(store(path).headsUnsealed).toMatch(why);
    const v = verifyFile(path);
    expect(v.problems.join('\n')).toMatch(/the heads record is unsealed .*re-seal with palimpsest verify --db FILE --reseal-heads/);
    await open.pop()!.close();
    // The mark is in the file: the next open reports it although the file now holds lines again.
    expect(store(path).headsUnsealed).toMatch(why);
    await open.pop()!.close();
    const cli = await runCli(['verify', '--db', path]);
    expect(cli.code).toBe(1);
    const resealed = await runCli(['verify', '--db', path, '--reseal-heads']);
    expect(resealed.code, resealed.stdout + resealed.stderr).toBe(0);
    expect(resealed.stdout).toMatch(/re-sealed the heads record of .*: 2 session heads written/);
    expect(store(path).headsUnsealed).toBeUndefined();
    expect(verifyFile(path).problems).toEqual([]);
  }, 60_000);

  it('a re-seal keeps a session that lost commits refused', async () => {
    const path = await withSessions();
    const heads = `${path}-heads`;
    // Session 'a' recorded at head 5 (its database head is 1), then a damaged line.
    const s = store(path);
    await s.close();
    open.pop();
    const { crc32c } = await import('../../src/store/sqlite/crc32c.js');
    const created = JSON.parse(readFileSync(heads, 'utf8').split('\n').find((l) => l.includes('"a"'))!.split(' ').slice(1).join(' ')) as [string, number, number];
    const json = JSON.stringify(['a', created[1], 6]);
    appendFileSync(heads, `${crc32c(json)} ${json}\nbroken line\n`);
    expect((await runCli(['verify', '--db', path, '--reseal-heads'])).code).toBe(1);
    const t = store(path);
    expect(t.headsUnsealed).toBeUndefined();
    expect(t.damagedSessions.map((d) => d.sessionId)).toEqual(['a']);
  }, 60_000);
});

describe('what is not reported', () => {
  it('a fresh database without a heads file, a sealed file, and a torn last line (a crash mid-write)', async () => {
    const fresh = dbs.freshPath();
    expect(store(fresh).headsUnsealed).toBeUndefined();
    const path = await withSessions();
    expect(store(path).headsUnsealed).toBeUndefined();
    await open.pop()!.close();
    appendFileSync(`${path}-heads`, '123 ["a",1,');
    const s = store(path);
    expect(s.headsUnsealed).toBeUndefined();
    // The next line written after the torn one is read back whole.
    await appendAt(s, 'b', 2, [ev(2, 'x/note', 3)]);
    await s.close();
    open.pop();
    expect(store(path).headsUnsealed).toBeUndefined();
    expect(verifyFile(path).problems).toEqual([]);
  });
});
