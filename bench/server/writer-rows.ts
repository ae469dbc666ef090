/**
 * The SQLite writer's per-row work alone, in one process: groups of 3 calls of N rows of the
 * server bench's event (197 bytes of data) written as the group commit writes them (the rows'
 * checksums, the INSERTs, the session digest, the `updateCounters` UPDATE with its feed trigger),
 * in a store file with the store's schema and statements; synchronous NORMAL, no fsync. Prints the
 * CPU per row of each part (process.cpuUsage). Not part of `npm run bench`: a tool for the writer's
 * per-row costs (bench/history/issue-37-i37-batch.md).
 *
 *   npx tsx bench/server/writer-rows.ts [js|sql] [--rows N] [--groups G] [--no-trigger]
 *
 * `js`: the checksums in JavaScript (addChecksums, Statements.insertEvents, digestOf), as a store
 * without the checksum extension; `sql`: computed by SQLite (sql-checksums.ts), as the group
 * commit does with the extension. `--no-trigger` drops the feed trigger (to price it).
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSchema } from '../../src/store/sqlite/migrate.js';
import { prepareStatements } from '../../src/store/sqlite/statements.js';
import { LINE_FORMAT, addChecksums, encodeEvents } from '../../src/store/sqlite/row-codec.js';
import { prepareSqlChecksums } from '../../src/store/sqlite/sql-checksums.js';
import { loadChecksumExtension } from '../../src/store/sqlite/sqlite-ext.js';
import { digestOf } from '../../src/store/sqlite/session-writes.js';
import type { SessionEvent } from '../../src/domain/event.js';

const argv = process.argv.slice(2);
const opt = (name: string, d: number): number => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : d;
};
const inSql = argv.includes('sql');
const ROWS = opt('--rows', 100);
const GROUPS = opt('--groups', 400);
const CALLS = 3;

const dir = mkdtempSync(join(tmpdir(), 'palimpsest-writer-rows-'));
const db = new Database(join(dir, 'w.db'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.transaction(() => createSchema(db, 'bench'))();
if (argv.includes('--no-trigger')) db.exec('DROP TRIGGER feed_appended');
const st = prepareStatements(db, false);
const sql = inSql ? (loadChecksumExtension(db, 'require', LINE_FORMAT), prepareSqlChecksums(db)) : undefined;
db.prepare(
  `INSERT INTO sessions (id, version, created_at, labels, tenant, strict, next_seq, event_count, data_bytes, pairing_guard, writer, pending, digest)
   VALUES ('s', 1, 0, '{}', 't', 0, 0, 0, 0, 0, 'w', 0, 0)`,
).run();
const DATA = { n: 1, text: 'The quick brown fox jumps over the lazy dog; '.repeat(4) };

const cpu = (since: NodeJS.CpuUsage): number => {
  const d = process.cpuUsage(since);
  return d.user + d.system;
};
let next = 0;
let checksumUs = 0;
let insertUs = 0;
let updateUs = 0;
const group = db.transaction(() => {
  const from = next;
  let digest = 0;
  for (let c = 0; c < CALLS; c++) {
    const events: SessionEvent[] = Array.from({ length: ROWS }, (_, i) => ({ seq: next + i, type: 'bench/tick', time: 1_760_000_000_000 + next + i, data: DATA }));
    const { rows } = encodeEvents('s', events, false);
    const t0 = process.cpuUsage();
    if (sql === undefined) addChecksums(rows);
    checksumUs += cpu(t0);
    const t1 = process.cpuUsage();
    if (sql !== undefined) sql.insertEvents(rows);
    else st.insertEvents(rows);
    insertUs += cpu(t1);
    if (sql === undefined) digest = digestOf(digest, rows);
    next += ROWS;
  }
  const t2 = process.cpuUsage();
  if (sql !== undefined) digest = sql.digestFrom('s', from, next, next - from, digest);
  st.updateCounters.run(next, CALLS * ROWS, 0, 'w', digest, 0, 's');
  updateUs += cpu(t2);
});

for (let g = 0; g < 50; g++) group.immediate();
checksumUs = insertUs = updateUs = 0;
const t = process.cpuUsage();
for (let g = 0; g < GROUPS; g++) group.immediate();
const all = cpu(t);
const n = GROUPS * CALLS * ROWS;
const us = (v: number): string => (v / n).toFixed(3);
console.log(
  `${inSql ? 'checksums in SQLite' : 'checksums in JavaScript'}, ${CALLS} calls of ${ROWS} rows per group: CPU per row ${us(checksumUs + insertUs + updateUs)} us ` +
    `(checksums ${us(checksumUs)}, INSERTs ${us(insertUs)}, digest + UPDATE + feed trigger ${us(updateUs)}); with encoding the events ${us(all)} us`,
);
db.close();
rmSync(dir, { recursive: true, force: true });
