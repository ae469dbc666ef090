/**
 * The SQLite search follower's CPU per indexed event (issue #40), in batches shaped as
 * bench/search.mjs makes them: 20 appends of 50 events (1,000 events over 20 sessions), then the
 * follower's batches until caught up, in process on a connection of this script's, timed with
 * process.cpuUsage around each batch (the store's writer thread is idle then, so the process CPU is
 * the follower's). A loaded machine inflates CPU time too: compare runs taken one after the other,
 * and repeat (`--repeat`, the median and the spread are printed).
 *
 *   node --import tsx bench/search-follow-cpu.mjs [--sessions 200] [--events 60000] [--repeat 3] [--statements]
 *
 * `--statements`: also the wall time of each statement per indexed event (a wrapper around every
 * statement the follower prepares; it adds its own cost, so the CPU line of such a run is higher),
 * and the CPU of the batches' COMMITs (where FTS5 flushes its pending terms and merges segments).
 * Prints a FOLLOW line of JSON per run and a FOLLOW-MEDIAN line.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { SqliteSessionStore } from '../src/store/sqlite/sqlite-store.ts';
import { SqliteSearchIndex } from '../src/store/sqlite/search.ts';
import { attachSearchFile } from '../src/store/sqlite/search-file.ts';
import { followSqliteFeed } from '../src/store/sqlite/search-follow.ts';
import { searchEvents } from './search-data.mjs';

const { values } = parseArgs({ options: { sessions: { type: 'string' }, events: { type: 'string' }, repeat: { type: 'string' }, statements: { type: 'boolean' } } });
const SESSIONS = Number(values.sessions ?? 200);
const EVENTS = Number(values.events ?? 60_000);
const REPEAT = Number(values.repeat ?? 3);
const STATEMENTS = values.statements === true;
const BATCH = 50;
const TURN = 20;

let eventAt = searchEvents();
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** Wraps `db.prepare` so that every statement's run/get/all adds its wall time to `into` (by SQL). */
function timeStatements(db, into) {
  const prepare = db.prepare.bind(db);
  db.prepare = (sql) => {
    const st = prepare(sql);
    const key = sql.replace(/\s+/g, ' ').slice(0, 80);
    const proxy = new Proxy(st, {
      get(target, p) {
        const v = target[p];
        if (typeof v !== 'function') return v;
        if (!['run', 'get', 'all', 'iterate'].includes(p)) {
          return (...a) => {
            const r = v.apply(target, a);
            return r === target ? proxy : r; // pluck(), raw(): the same statement
          };
        }
        return (...a) => {
          const t0 = performance.now();
          const r = v.apply(target, a);
          const e = into.get(key) ?? [0, 0];
          e[0] += performance.now() - t0;
          e[1]++;
          into.set(key, e);
          return r;
        };
      },
    });
    return proxy;
  };
}

async function run() {
  eventAt = searchEvents();
  const root = mkdtempSync(join(tmpdir(), 'palimpsest-follow-cpu-'));
  try {
    const path = join(root, 'a.db');
    const store = new SqliteSessionStore({ path });
    await store.writerReady?.();
    await new SqliteSearchIndex(path, { inProcess: true }).close();
    const db = new Database(path);
    db.pragma('busy_timeout = 5000');
    attachSearchFile(db, false);
    const statements = new Map();
    let commitMs = 0;
    if (STATEMENTS) {
      timeStatements(db, statements);
      // The follower's transaction, with its COMMIT timed apart.
      db.transaction = (fn) => ({
        deferred: (...a) => {
          db.exec('BEGIN');
          let r;
          try {
            r = fn(...a);
          } catch (e) {
            db.exec('ROLLBACK');
            throw e;
          }
          const c0 = cpuMs();
          db.exec('COMMIT');
          commitMs += cpuMs() - c0;
          return r;
        },
      });
    }
    for (let s = 0; s < SESSIONS; s++) {
      await store.createSession({ header: { version: 0, id: `s${s}`, createdAt: 1_700_000_000_000 + s }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, []);
    }
    followSqliteFeed(db, 2000);
    const next = new Array(SESSIONS).fill(0);
    const perSession = Math.ceil(EVENTS / SESSIONS);
    let time = 1_700_000_000_000;
    let followMs = 0;
    let indexed = 0;
    let batches = 0;
    let turn = [];
    const flush = async () => {
      await Promise.all(turn.map(async (s) => {
        const n = Math.min(BATCH, perSession - next[s]);
        const events = Array.from({ length: n }, (_, i) => eventAt(next[s] + i, time++));
        const r = await store.append(`s${s}`, { expectedNextSeq: next[s], expectedWriter: `w${next[s]}`, writer: `w${next[s] + n}`, events, surfaceLength: next[s] + n });
        if (r.kind !== 'appended') throw new Error(r.kind);
        next[s] += n;
      }));
      turn = [];
      for (;;) {
        const c0 = cpuMs();
        const r = followSqliteFeed(db, 2000);
        followMs += cpuMs() - c0;
        indexed += r.events;
        batches++;
        if (r.caughtUp) break;
      }
    };
    for (let round = 0; round * BATCH < perSession; round++) {
      for (let s = 0; s < SESSIONS; s++) {
        if (next[s] >= perSession) continue;
        turn.push(s);
        if (turn.length === TURN) await flush();
      }
    }
    await flush();
    db.close();
    await store.close();
    const us = (ms) => Number(((ms * 1000) / indexed).toFixed(2));
    const out = { indexed, batches, cpuUsPerIndexedEvent: us(followMs) };
    if (STATEMENTS) {
      out.commitCpuUsPerIndexedEvent = us(commitMs);
      out.statementWallUsPerIndexedEvent = Object.fromEntries([...statements].sort((a, b) => b[1][0] - a[1][0]).map(([sql, [ms, n]]) => [sql, { us: us(ms), calls: n }]));
    }
    console.log(`FOLLOW ${JSON.stringify(out)}`);
    return out.cpuUsPerIndexedEvent;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const runs = [];
for (let i = 0; i < REPEAT; i++) runs.push(await run());
runs.sort((a, b) => a - b);
console.log(`FOLLOW-MEDIAN ${JSON.stringify({ sessions: SESSIONS, events: EVENTS, cpuUsPerIndexedEvent: runs[Math.floor(runs.length / 2)], min: runs[0], max: runs.at(-1) })}`);
