/**
 * Where the SQLite search index's cost goes (issue #40), per event, in one run:
 *
 * A. appends alone into a fresh store (no follower): process CPU (every thread) and wall per event;
 * B. the follower in process over what A loaded, batch after batch until caught up: CPU per
 *    indexed event, batches, wall per batch;
 * C. a second fresh store loaded the same way while the follower's thread runs batches back to back:
 *    append wall against A's, and the follower's wall per batch against B's (a batch that waits for
 *    the write lock, or for a core, takes longer than alone).
 *
 *   node --import tsx bench/search-profile.mjs [--sessions 100] [--events 20000]
 *
 * Prints a PROFILE line of JSON (no HEADLINE: bench/search.mjs measures the target).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SqliteSessionStore } from '../src/store/sqlite/sqlite-store.ts';
import { SqliteSearchIndex } from '../src/store/sqlite/search.ts';
import { searchEvents } from './search-data.mjs';

const { values } = parseArgs({ options: { sessions: { type: 'string' }, events: { type: 'string' } } });
const SESSIONS = Number(values.sessions ?? 100);
const EVENTS = Number(values.events ?? 20_000);
const BATCH = 50;

let eventAt = searchEvents();

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function loadStore(store) {
  for (let s = 0; s < SESSIONS; s++) {
    await store.createSession({ header: { version: 0, id: `s${s}`, createdAt: 1_700_000_000_000 + s }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, []);
  }
  eventAt = searchEvents();
  const next = new Array(SESSIONS).fill(0);
  const perSession = Math.ceil(EVENTS / SESSIONS);
  let time = 1_700_000_000_000;
  const t0 = performance.now();
  const c0 = cpuMs();
  for (let round = 0; round * BATCH < perSession; round++) {
    for (let s0 = 0; s0 < SESSIONS; s0 += 20) {
      await Promise.all(Array.from({ length: Math.min(20, SESSIONS - s0) }, async (_, k) => {
        const s = s0 + k;
        const n = Math.min(BATCH, perSession - next[s]);
        if (n <= 0) return;
        const events = Array.from({ length: n }, (_, i) => eventAt(next[s] + i, time++));
        const r = await store.append(`s${s}`, { expectedNextSeq: next[s], expectedWriter: `w${next[s]}`, writer: `w${next[s] + n}`, events, surfaceLength: next[s] + n });
        if (r.kind !== 'appended') throw new Error(r.kind);
        next[s] += n;
      }));
    }
  }
  return { wallMs: performance.now() - t0, cpuMs: cpuMs() - c0 };
}

const root = mkdtempSync(join(tmpdir(), 'palimpsest-search-profile-'));
const us = (ms, n) => Number(((ms * 1000) / n).toFixed(1));
try {
  // A: appends alone.
  const pathA = join(root, 'a.db');
  const a = new SqliteSessionStore({ path: pathA });
  const A = await loadStore(a);
  // B: the follower in process over A's events.
  const ib = new SqliteSearchIndex(pathA, { inProcess: true });
  const c0 = cpuMs();
  const t0 = performance.now();
  let batches = 0;
  let indexed = 0;
  for (;;) {
    const r = await ib.followBatch(2000);
    batches++;
    indexed += r.events;
    if (r.caughtUp) break;
  }
  const B = { wallMs: performance.now() - t0, cpuMs: cpuMs() - c0, batches, indexed };
  await ib.close();
  await a.close();
  // C: appends while the follower's thread runs back to back.
  const pathC = join(root, 'c.db');
  const c = new SqliteSessionStore({ path: pathC });
  const ic = new SqliteSearchIndex(pathC);
  let stop = false;
  let cBatches = 0;
  let cIndexed = 0;
  let cBatchMs = 0;
  const loop = (async () => {
    while (!stop) {
      const bt = performance.now();
      const r = await ic.followBatch(2000);
      cBatchMs += performance.now() - bt;
      if (r.events > 0) cBatches++;
      cIndexed += r.events;
      if (r.caughtUp) await new Promise((res) => setTimeout(res, 1));
    }
  })();
  const C = await loadStore(c);
  stop = true;
  await loop;
  await ic.close();
  await c.close();
  const out = {
    events: EVENTS, sessions: SESSIONS,
    appendAlone: { wallUsPerEvent: us(A.wallMs, EVENTS), cpuUsPerEvent: us(A.cpuMs, EVENTS) },
    followInProcess: { cpuUsPerEvent: us(B.cpuMs, B.indexed), wallUsPerEvent: us(B.wallMs, B.indexed), batches: B.batches, wallMsPerBatch: Number((B.wallMs / B.batches).toFixed(2)) },
    appendWithFollowerThread: { wallUsPerEvent: us(C.wallMs, EVENTS), cpuUsPerEventAllThreads: us(C.cpuMs, EVENTS), appendWallRatio: Number((C.wallMs / A.wallMs).toFixed(2)), followerIndexedDuringLoad: cIndexed, followerWallMsPerBatch: Number((cBatchMs / Math.max(1, cBatches)).toFixed(2)) },
  };
  console.log(`PROFILE ${JSON.stringify(out)}`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
