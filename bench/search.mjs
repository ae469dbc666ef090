/**
 * Search benchmark (issue #40): on SQLite and PostgreSQL, in one run,
 *
 * 1. the append rate with the search index on against the same appends with it off (no follower
 *    runs for the off store), the two stores loaded alternately chunk by chunk so that both see
 *    the same machine; also the process CPU per timed event of each side (every thread);
 * 2. phrase-query latency (SearchEvents through the app: candidates, snippets, a page of 20,
 *    newest first) over the loaded data, p50 and p95 of QUERIES runs; the same for prefix queries.
 *
 *   node --import tsx bench/search.mjs [--sessions N] [--events N] [--measure N] [--only sqlite|postgres]
 *
 * `--events` is the total; the last `--measure` (default 100,000) are the timed appends, on top
 * of a base of the others loaded untimed (200 appends at a time into both stores; the indexed
 * store's follower then builds the index of the base, untimed). So `--events 1000000 --sessions
 * 1000` times 100,000 appends into stores that hold 900,000 events, and queries 1M.
 *
 * Defaults: 1,000 sessions, 1,000,000 events (the size); on a shared 2-core machine use
 * --events to load less, and say so. Events: a user message, an assistant message (one in five
 * calls a tool) and a tool result, ~30 words each from a 5,000-word vocabulary; "invoice 4711"
 * in one event in 1,000, "rm -rf /tmp/build" in one in 500, "quota exceeded" in one in 5,000.
 * Prints HEADLINE lines (bench/results.mjs). Files live under os.tmpdir() and are removed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { SessionService } from '../src/app/session-service.ts';
import { SearchFollower } from '../src/app/search-follower.ts';
import { SqliteSessionStore } from '../src/store/sqlite/sqlite-store.ts';
import { SqliteSearchIndex } from '../src/store/sqlite/search.ts';
import { PostgresSessionStore } from '../src/store/postgres/postgres-store.ts';
import { PostgresSearchIndex } from '../src/store/postgres/search.ts';
import { findPgBin, startCluster } from '../test/support/pg-cluster.ts';
import { searchEvents } from './search-data.mjs';

const { values } = parseArgs({ options: { sessions: { type: 'string' }, events: { type: 'string' }, measure: { type: 'string' }, only: { type: 'string' }, queries: { type: 'string' } } });
const SESSIONS = Number(values.sessions ?? 1000);
const EVENTS = Number(values.events ?? 1_000_000);
/** The appends timed (the last MEASURE events, on top of the untimed base). */
const MEASURE = Math.min(EVENTS, Number(values.measure ?? 100_000));
const QUERIES = Number(values.queries ?? 200);
const BATCH = 50; // events per append
const PHRASES = ['"invoice 4711"', '"rm -rf"', '"quota exceeded"'];
/** Prefix queries (`foo*`; the SQLite index keeps no prefix indexes since schema 11: docs/search.md). */
const PREFIXES = ['invoi*', 'overd*', 'quot*'];

// ---- data --------------------------------------------------------------------------------------
const eventAt = searchEvents();
/** The batches in append order: round-robin over sessions, BATCH events each. */
function* batches() {
  const perSession = Math.ceil(EVENTS / SESSIONS);
  const next = new Array(SESSIONS).fill(0);
  let time = 1_700_000_000_000;
  for (let round = 0; round * BATCH < perSession; round++) {
    for (let s = 0; s < SESSIONS; s++) {
      const n = Math.min(BATCH, perSession - next[s]);
      if (n <= 0) continue;
      const events = [];
      for (let i = 0; i < n; i++) events.push(eventAt(next[s] + i, time++));
      yield { session: `s${s}`, from: next[s], events };
      next[s] += n;
    }
  }
}

// ---- measuring ---------------------------------------------------------------------------------
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const fmt = (n) => (n >= 1000 ? `${(n / 1000).toFixed(1)}k` : n.toFixed(0));
function headline(h) {
  console.log(`HEADLINE ${JSON.stringify(h)}`);
}

/**
 * Loads the same batches into `on` and `off` alternately; returns events/s of each. `follower`
 * (the index's follower of `on`) runs only during `on`'s turns, so its work is charged to them,
 * and the final catch-up after the last batch is counted in `on`'s time too. The lag is sampled
 * after every 10th turn.
 */
async function load(on, off, follower) {
  const writers = [new Map(), new Map()];
  for (const [i, store] of [on, off].entries()) {
    for (let s = 0; s < SESSIONS; s++) {
      const id = `s${s}`;
      await store.createSession({ header: { version: 0, id, createdAt: 1_700_000_000_000 + s }, labels: { team: `t${s % 10}` }, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, []);
      writers[i].set(id, 'w0');
    }
  }
  // Threads are started untimed, as a server starts them before it serves: the stores' writer
  // threads and the follower's (a catch-up with nothing to follow). Starting a worker (its isolate,
  // better-sqlite3, and under tsx the transpiling: ~0.3 s of CPU) is a one-time cost, not the rate.
  for (const store of [on, off]) await store.writerReady?.();
  await follower?.catchUp(60_000);
  const time = [0, 0];
  // Process CPU (every thread: the event loop, the writer thread, the follower's thread) per side.
  const cpu = [0, 0];
  const cpuMs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const chunk = [];
  let n = 0;
  let turns = 0;
  let maxLag = { events: 0, seconds: 0 };
  const flush = async () => {
    for (const [i, store] of [on, off].entries()) {
      const t0 = performance.now();
      const c0 = cpuMs();
      if (i === 0) follower?.start();
      await Promise.all(chunk.map(async (b) => {
        const writer = `w${b.from + b.events.length}`;
        const r = await store.append(b.session, { expectedNextSeq: b.from, expectedWriter: writers[i].get(b.session), writer, events: b.events, surfaceLength: b.from + b.events.length });
        if (r.kind !== 'appended') throw new Error(`append ${b.session}@${b.from}: ${r.kind}`);
        writers[i].set(b.session, writer);
      }));
      if (i === 0 && follower !== undefined) {
        if (++turns % 10 === 0) {
          const lag = await follower.lag();
          if (lag.events > maxLag.events) maxLag = lag;
        }
        await follower.stop();
      }
      time[i] += performance.now() - t0;
      cpu[i] += cpuMs() - c0;
    }
    chunk.length = 0;
  };
  // The base (all but the last MEASURE events): loaded untimed into both stores, 200 appends at a
  // time, the on-store's index built by its follower afterwards (untimed too).
  let base = 0;
  const baseChunk = [];
  const flushBase = async () => {
    for (const [i, store] of [on, off].entries()) {
      await Promise.all(baseChunk.map(async (b) => {
        const writer = `w${b.from + b.events.length}`;
        const r = await store.append(b.session, { expectedNextSeq: b.from, expectedWriter: writers[i].get(b.session), writer, events: b.events, surfaceLength: b.from + b.events.length });
        if (r.kind !== 'appended') throw new Error(`append ${b.session}@${b.from}: ${r.kind}`);
        writers[i].set(b.session, writer);
      }));
    }
    baseChunk.length = 0;
  };
  let indexedBase = false;
  for (const b of batches()) {
    if (base < EVENTS - MEASURE) {
      baseChunk.push(b);
      base += b.events.length;
      if (baseChunk.length === Math.min(200, SESSIONS)) await flushBase();
      if (base % 100_000 < BATCH) process.stderr.write(`  base ${base} events\r`);
      continue;
    }
    if (!indexedBase) {
      await flushBase();
      indexedBase = true;
      if (base > 0) {
        const t = performance.now();
        await follower?.catchUp(24 * 3_600_000);
        process.stderr.write(`\n  base of ${base} events loaded; index built in ${((performance.now() - t) / 1000).toFixed(0)} s\n`);
      }
    }
    chunk.push(b);
    n += b.events.length;
    if (chunk.length === 20) await flush();
    if (n % 100_000 < BATCH) process.stderr.write(`  loaded ${n} events\r`);
  }
  await flush();
  process.stderr.write('\n');
  const c0 = performance.now();
  const u0 = cpuMs();
  const lagAtEnd = (await follower?.lag()) ?? { events: 0, seconds: 0 };
  await follower?.catchUp(3_600_000);
  const catchUp = performance.now() - c0;
  time[0] += catchUp;
  cpu[0] += cpuMs() - u0;
  return { events: base + n, measured: n, on: n / (time[0] / 1000), off: n / (time[1] / 1000), cpuOnUs: (cpu[0] * 1000) / n, cpuOffUs: (cpu[1] * 1000) / n, maxLag, lagAtEnd, catchUp };
}

async function queries(app, texts = PHRASES) {
  const ctx = { tenant: '' };
  const ms = [];
  let hits = 0;
  for (let i = 0; i < QUERIES + 10; i++) {
    const t0 = performance.now();
    const page = await app.search.search(ctx, { query: texts[i % texts.length], pageSize: 20 });
    if (i >= 10) ms.push(performance.now() - t0);
    hits += page.hits.length;
  }
  return { p50: pct(ms, 0.5), p95: pct(ms, 0.95), hits: hits / (QUERIES + 10) };
}

async function report(name, loaded, q, prefix) {
  const ratio = loaded.on / loaded.off;
  console.log(`${name}: process CPU per timed event (every thread): ${loaded.cpuOnUs.toFixed(1)} µs with the index (follower included), ${loaded.cpuOffUs.toFixed(1)} µs without (${(loaded.cpuOffUs / loaded.cpuOnUs * 100).toFixed(0)}% of the cost)`);
  console.log(`${name}: prefix query (${PREFIXES.join(', ')}) p50 ${prefix.p50.toFixed(1)} ms, p95 ${prefix.p95.toFixed(1)} ms (${prefix.hits.toFixed(1)} hits per page)`);
  console.log(`${name}: ${loaded.events} events in ${SESSIONS} sessions (the last ${loaded.measured} appends timed); appends ${fmt(loaded.on)} events/s with the index (follower included), ${fmt(loaded.off)} without (${(ratio * 100).toFixed(0)}%); phrase query p50 ${q.p50.toFixed(1)} ms, p95 ${q.p95.toFixed(1)} ms (${q.hits.toFixed(1)} hits per page)`);
  console.log(`${name}: follower lag: max sampled ${loaded.maxLag.events} events (${loaded.maxLag.seconds.toFixed(1)} s), ${loaded.lagAtEnd.events} events (${loaded.lagAtEnd.seconds.toFixed(1)} s) when the load ended, caught up ${(loaded.catchUp / 1000).toFixed(1)} s later (counted in the rate)`);
  headline({ id: `search-phrase-p95-${name}`, label: `SearchEvents phrase query p95, ${name} (${loaded.events} events, ${SESSIONS} sessions)`, value: `${q.p95.toFixed(1)} ms`, target: '< 50 ms', met: q.p95 < 50 });
  headline({
    id: `search-append-rate-${name}`, label: `appends with the search index (its follower's work and final catch-up included) vs without, ${name} (last ${loaded.measured} of ${loaded.events} events)`,
    value: `${(ratio * 100).toFixed(0)}% (${fmt(loaded.on)} vs ${fmt(loaded.off)} events/s)`, target: '>= 85%', met: ratio >= 0.85,
  });
}

const root = mkdtempSync(join(tmpdir(), 'palimpsest-search-bench-'));
console.log(`search bench: ${SESSIONS} sessions, ${EVENTS} events, ${cpus().length} cpus, load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
try {
  if (values.only !== 'postgres') {
    const onPath = join(root, 'on.db');
    const offPath = join(root, 'off.db');
    const on = new SqliteSessionStore({ path: onPath });
    const off = new SqliteSessionStore({ path: offPath });
    const index = new SqliteSearchIndex(onPath);
    const loaded = await load(on, off, new SearchFollower(index));
    await off.close();
    const app = new SessionService(on);
    app.search.useIndex(index);
    await report('sqlite', loaded, await queries(app), await queries(app, PREFIXES));
    await app.close();
  }
  if (values.only !== 'sqlite') {
    const bin = findPgBin();
    if (bin === undefined) throw new Error('PostgreSQL binaries not found');
    const cluster = await startCluster(bin);
    try {
      const on = await PostgresSessionStore.open({ url: cluster.adminUrl, schema: 'bon', poolSize: 4 });
      const off = await PostgresSessionStore.open({ url: cluster.adminUrl, schema: 'boff', poolSize: 4 });
      const index = new PostgresSearchIndex({ url: cluster.adminUrl, schema: 'bon' });
      const loaded = await load(on, off, new SearchFollower(index));
      await off.close();
      const c2 = new pg.Client({ connectionString: cluster.adminUrl });
      await c2.connect();
      await c2.query('ANALYZE bon.search_docs');
      await c2.end();
      const app = new SessionService(on);
      app.search.useIndex(index);
      await report('postgres', loaded, await queries(app), await queries(app, PREFIXES));
      await app.close();
    } finally {
      cluster.stop();
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
