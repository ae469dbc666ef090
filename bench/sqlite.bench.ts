/**
 * SQLite store benchmark: raw better-sqlite3 baselines against SqliteSessionStore, in one run.
 *
 *   npx tsx bench/sqlite.bench.ts [--quick]
 *
 * Every figure is the median of RUNS runs with the min-max range; ratio columns compare with the
 * raw baseline measured in the same run. Files live under os.tmpdir() and are removed.
 */
import v8 from 'node:v8';
v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');
v8.setFlagsFromString('--expose-gc');

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { runInNewContext } from 'node:vm';
import type { SessionEvent } from '../src/domain/event.js';
import { SCHEMA_SQL } from '../src/store/sqlite/schema.js';
import { SqliteSessionStore, type SqliteStoreOptions } from '../src/store/sqlite/sqlite-store.js';

const quick = process.argv.includes('--quick');
const RUNS = quick ? 5 : 7;
const SINGLE_ROWS = quick ? 300 : 1500; // rows per run, one per transaction
const BATCH_ROWS = quick ? 6_400 : 32_000; // rows per run, 64 per transaction
const APPENDS = quick ? 1_200 : 6_000; // store appends per run
const STRUCTURE_ROWS = quick ? 200_000 : 1_000_000;
const READ_SESSION = 10_000;
const READ_PAGE = 1_000;

const gc = runInNewContext('gc') as () => void;
const MiB = (bytes: number): string => `${Math.round(bytes / 2 ** 20)} MiB`;

const root = mkdtempSync(join(tmpdir(), 'palimpsest-bench-'));
let fileNo = 0;
const newPath = (): string => join(root, `b${fileNo++}.db`);

// ---------------------------------------------------------------------------------------------
// Typical events: the mix of an agent turn (chunks dominate, a few large tool results).

const TEXT = 'The quick brown fox jumps over the lazy dog; ';
function typicalEvent(seq: number): SessionEvent {
  switch (seq % 10) {
    case 0:
      return { type: 'user/message', seq, time: 1_760_000_000_000 + seq, surfaceOp: 'append', data: { id: `u-${seq}`, role: 'user', content: [{ type: 'text', text: TEXT.repeat(4) }], source: { kind: 'user' } } };
    case 1:
      return { type: 'turn/start', seq, time: 1_760_000_000_000 + seq, data: { turn: seq } };
    case 5:
      return { type: 'tool/call', seq, time: 1_760_000_000_000 + seq, data: { turn: 1, step: 1, callId: `c-${seq}`, name: 'bash', arguments: '{"command":"ls -la /work"}' } };
    case 6:
      return { type: 'tool/result', seq, time: 1_760_000_000_000 + seq, surfaceOp: 'append', data: { turn: 1, step: 1, message: { id: `t-${seq}`, role: 'user', source: { kind: 'tool', callId: `c-${seq}` }, content: [{ type: 'tool-result', toolCallId: `c-${seq}`, content: [{ type: 'text', text: TEXT.repeat(30) }] }] } } };
    case 8:
      return { type: 'assistant/message', seq, time: 1_760_000_000_000 + seq, surfaceOp: 'append', data: { turn: 1, step: 1, message: { id: `a-${seq}`, role: 'assistant', content: [{ type: 'text', text: TEXT.repeat(8) }], source: { kind: 'model', provider: 'deepseek', model: 'deepseek-v4' } }, usage: { inputTokens: 1200, outputTokens: 340 } } };
    case 9:
      return { type: 'compaction/summary', seq, time: 1_760_000_000_000 + seq, sourceEventSeqs: [seq - 9, seq - 3, seq - 1], data: { compactionId: 'x', summary: [] } };
    default:
      return { type: 'assistant/chunk', seq, time: 1_760_000_000_000 + seq, data: { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: TEXT } } };
  }
}
const AVG_DATA_BYTES = Math.round(Array.from({ length: 1000 }, (_, i) => JSON.stringify(typicalEvent(i).data).length).reduce((a, b) => a + b) / 1000);

// ---------------------------------------------------------------------------------------------
// Measurement helpers.

interface Stat {
  median: number;
  min: number;
  max: number;
}
function stat(values: number[]): Stat {
  const s = [...values].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)]!, min: s[0]!, max: s[s.length - 1]! };
}
async function repeat(fn: () => Promise<number> | number): Promise<Stat> {
  const values: number[] = [];
  for (let i = 0; i < RUNS; i++) values.push(await fn());
  return stat(values);
}
const fmt = (n: number): string => (n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(n >= 10 ? 1 : 2));
const rows: string[][] = [];
function report(name: string, unit: string, s: Stat, baseline?: Stat, higherIsBetter = true): void {
  const ratio = baseline === undefined ? '' : `${(higherIsBetter ? s.median / baseline.median : baseline.median / s.median).toFixed(2)}x`;
  rows.push([name, `${fmt(s.median)} ${unit}`, `${fmt(s.min)}–${fmt(s.max)}`, ratio]);
  console.error(`  ${name}: ${fmt(s.median)} ${unit} (${fmt(s.min)}–${fmt(s.max)}) ${ratio}`);
}

function rawDb(durability: 'full' | 'normal'): Database.Database {
  const db = new Database(newPath());
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${durability === 'full' ? 'FULL' : 'NORMAL'}`);
  db.pragma('foreign_keys = ON');
  db.exec(SCHEMA_SQL);
  db.prepare("INSERT INTO sessions (id, version, created_at) VALUES ('s', 0, 0)").run();
  return db;
}
/** The store's row shape, its two checksum columns as constants (the raw side does no checksum work). */
type Row = [string, number, string, number, string, null, string | null, null, number, number];
function rawRow(seq: number): Row {
  const e = typicalEvent(seq);
  return ['s', seq, e.type, e.time, JSON.stringify(e.data), null, e.surfaceOp === 'append' ? 'append' : null, null, 0, 0];
}

// ---------------------------------------------------------------------------------------------
// 1. Raw insert rates.

function rawInsert(durability: 'full' | 'normal', perTxn: number, total: number): number {
  const db = rawDb(durability);
  const insert = db.prepare('INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
  const txn = db.transaction((from: number) => {
    for (let seq = from; seq < from + perTxn; seq++) insert.run(rawRow(seq));
  });
  const start = performance.now();
  for (let seq = 0; seq < total; seq += perTxn) txn.immediate(seq);
  const rate = total / ((performance.now() - start) / 1000);
  db.close();
  return rate;
}

let lastAvgGroup = 0;

// 2. Store append rate with `concurrency` clients, each appending one event per call to its own session.

async function storeAppend(options: Omit<SqliteStoreOptions, 'path'>, concurrency: number, total: number): Promise<number> {
  const store = new SqliteSessionStore({ path: newPath(), ...options });
  for (let c = 0; c < concurrency; c++) {
    await store.createSession({ header: { version: 0, id: `c${c}`, createdAt: c }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, []);
  }
  const perClient = Math.ceil(total / concurrency);
  const client = async (c: number): Promise<void> => {
    let writer = 'w0';
    for (let seq = 0; seq < perClient; seq++) {
      const next = `c${c}:${seq}`;
      const outcome = await store.append(`c${c}`, { expectedNextSeq: seq, expectedWriter: writer, writer: next, events: [typicalEvent(seq)], surfaceLength: 0 });
      writer = next;
      if (outcome.kind !== 'appended') throw new Error(`unexpected ${outcome.kind}`);
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, c) => client(c)));
  const rate = (perClient * concurrency) / ((performance.now() - start) / 1000);
  const stats = store.stats();
  lastAvgGroup = stats.appends / stats.groupCommits;
  await store.close();
  return rate;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  console.error(`sqlite bench${quick ? ' (quick)' : ''}: ${RUNS} runs each, node ${process.version}, ${cpus().length} cpus, avg event data ${AVG_DATA_BYTES} B, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);

  console.error('raw inserts');
  const rawFull1 = await repeat(() => rawInsert('full', 1, SINGLE_ROWS));
  report('raw insert, 1 row/txn, full', 'rows/s', rawFull1);
  const rawNormal1 = await repeat(() => rawInsert('normal', 1, SINGLE_ROWS * 4));
  report('raw insert, 1 row/txn, normal', 'rows/s', rawNormal1);
  const rawFull64 = await repeat(() => rawInsert('full', 64, BATCH_ROWS));
  report('raw insert, 64 rows/txn, full', 'rows/s', rawFull64);
  const rawNormal64 = await repeat(() => rawInsert('normal', 64, BATCH_ROWS));
  report('raw insert, 64 rows/txn, normal', 'rows/s', rawNormal64);

  console.error('store appends (one event per call; ratio vs raw 1 row/txn of the same durability)');
  for (const durability of ['full', 'normal'] as const) {
    const baseline = durability === 'full' ? rawFull1 : rawNormal1;
    for (const concurrency of [1, 16, 64]) {
      const total = concurrency === 1 ? (durability === 'full' ? SINGLE_ROWS : SINGLE_ROWS * 4) : APPENDS;
      const s = await repeat(() => storeAppend({ durability }, concurrency, total));
      report(`store.append, ${concurrency} concurrent, ${durability} (avg group ${lastAvgGroup.toFixed(1)})`, 'appends/s', s, baseline);
    }
  }
  const micro = await repeat(() => storeAppend({ durability: 'full', groupCommit: 'microtask' }, 16, APPENDS));
  report(`store.append, 16 concurrent, full, microtask flush (avg group ${lastAvgGroup.toFixed(1)})`, 'appends/s', micro, rawFull1);
  const micro64 = await repeat(() => storeAppend({ durability: 'full', groupCommit: 'microtask' }, 64, APPENDS));
  report(`store.append, 64 concurrent, full, microtask flush (avg group ${lastAvgGroup.toFixed(1)})`, 'appends/s', micro64, rawFull1);

  // -------------------------------------------------------------------------------------------
  console.error(`readStructure of ${STRUCTURE_ROWS.toLocaleString('en-US')} rows`);
  {
    const path = newPath();
    const writer = new SqliteSessionStore({ path, durability: 'normal' });
    await writer.createSession({ header: { version: 0, id: 'big', createdAt: 0 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0', pending: { owner: 'bench', leaseUntil: Number.MAX_SAFE_INTEGER } }, []);
    const CHUNK = 10_000;
    for (let from = 0; from < STRUCTURE_ROWS; from += CHUNK) {
      await writer.appendPending('big', Array.from({ length: CHUNK }, (_, i) => typicalEvent(from + i)), { owner: 'bench', leaseUntil: Number.MAX_SAFE_INTEGER });
    }
    await writer.publishSession('big', 'bench');
    await writer.close();
    const store = new SqliteSessionStore({ path });
    const raw = new Database(path, { readonly: true });
    const rawSelect = raw.prepare('SELECT seq, type, surface_op, source_event_seqs, ignorable FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq').raw();
    rawSelect.all('big', 0); // warm the OS page cache
    const rawStat = await repeat(() => {
      const start = performance.now();
      const n = (rawSelect.all('big', 0) as unknown[]).length;
      if (n !== STRUCTURE_ROWS) throw new Error('row count');
      return performance.now() - start;
    });
    report(`raw SELECT of the 5 structural columns (.raw().all(), no decoding), ${STRUCTURE_ROWS.toLocaleString('en-US')} rows`, 'ms', rawStat);
    gc();
    const rssBefore = process.memoryUsage().rss;
    let peakRss = 0;
    const cpuMs: number[] = [];
    const storeStat = await repeat(async () => {
      const cpu = process.cpuUsage();
      const start = performance.now();
      const result = await store.readStructure('big', 0);
      const ms = performance.now() - start;
      const used = process.cpuUsage(cpu);
      cpuMs.push((used.user + used.system) / 1000);
      if (result.length !== STRUCTURE_ROWS) throw new Error('row count');
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      return ms;
    });
    report(`store.readStructure, ${STRUCTURE_ROWS.toLocaleString('en-US')} rows`, 'ms', storeStat, rawStat, false);
    // CPU time (user + system) of the same runs: less sensitive than wall time to other load on the machine.
    report(`store.readStructure, ${STRUCTURE_ROWS.toLocaleString('en-US')} rows, CPU time`, 'ms', stat(cpuMs));
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    const held = await store.readStructure('big', 0);
    gc();
    const retained = process.memoryUsage().heapUsed - heapBefore;
    rows.push([`readStructure result: retained heap / process peak RSS during the runs`, `${MiB(retained)} / ${MiB(peakRss)}`, '', '']);
    console.error(`  retained heap ${MiB(retained)} for ${held.length} rows, peak RSS ${MiB(peakRss)} (before ${MiB(rssBefore)})`);
    raw.close();
    await store.close();
  }

  // -------------------------------------------------------------------------------------------
  console.error(`reads of a ${READ_SESSION.toLocaleString('en-US')}-event session`);
  {
    const path = newPath();
    const store = new SqliteSessionStore({ path, durability: 'normal' });
    await store.createSession({ header: { version: 0, id: 'r', createdAt: 0 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, Array.from({ length: READ_SESSION }, (_, i) => typicalEvent(i)));
    const raw = new Database(path, { readonly: true });
    const rawPage = raw.prepare('SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?').raw();
    const rawRate = await repeat(() => {
      const start = performance.now();
      let n = 0;
      for (let from = 0; from < READ_SESSION; from += READ_PAGE) n += (rawPage.all('r', from, READ_PAGE) as unknown[]).length;
      return n / ((performance.now() - start) / 1000);
    });
    report(`raw SELECT pages of ${READ_PAGE} (no JSON.parse)`, 'events/s', rawRate);
    const rawParse = await repeat(() => {
      const start = performance.now();
      let n = 0;
      for (let from = 0; from < READ_SESSION; from += READ_PAGE) {
        for (const row of rawPage.all('r', from, READ_PAGE) as unknown[][]) {
          JSON.parse(row[3] as string);
          n++;
        }
      }
      return n / ((performance.now() - start) / 1000);
    });
    report(`raw SELECT pages of ${READ_PAGE} + JSON.parse(data)`, 'events/s', rawParse, rawRate);
    const storeRate = await repeat(async () => {
      const start = performance.now();
      let n = 0;
      for (let from = 0; from < READ_SESSION; from += READ_PAGE) n += (await store.readEvents('r', { fromSeq: from, direction: 'forward', limit: READ_PAGE })).length;
      return n / ((performance.now() - start) / 1000);
    });
    report(`store.readEvents pages of ${READ_PAGE}`, 'events/s', storeRate, rawRate);
    const scanRate = await repeat(async () => {
      const start = performance.now();
      let n = 0;
      for await (const batch of store.scanEvents('r', 0, READ_PAGE)) n += batch.length;
      return n / ((performance.now() - start) / 1000);
    });
    report(`store.scanEvents batches of ${READ_PAGE}`, 'events/s', scanRate, rawRate);
    raw.close();
    await store.close();
  }

  console.log(`load average at the end: ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
  console.log(`| benchmark | median | min–max | ratio vs raw |\n|---|---:|---:|---:|`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}

try {
  await main();
} finally {
  rmSync(root, { recursive: true, force: true });
}
