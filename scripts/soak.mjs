#!/usr/bin/env node
/**
 * The soak (issue #33 item 9; not run in CI): mixed load for a long time against one SQLite
 * server and against two PostgreSQL replicas, reporting per minute and per server process its RSS,
 * V8 heap used, open handles and file descriptors (scraped from its Prometheus /metrics) and the
 * clients' p99 latency of appends; then the RSS slope after warm-up (least squares, MB per 10
 * minutes; the target is under 1).
 *
 *   npm run build && node scripts/soak.mjs [--minutes 30] [--warmup-minutes 5] [--store sqlite|postgres|both] [--parallel]
 *                                          [--forced-gc on|off] [--samples-per-minute 6]
 *                                          [--pg-admin-url postgresql://postgres@HOST:PORT/postgres] [--json FILE]
 *                                          [--heap-snapshots 2,10 --snapshot-dir DIR] [--node-flags "--initial-old-space-size=128"]
 *                                          [--rate OPS_PER_S]
 *
 * The load, from 8 client workers: single-event appends, 20-event batches, subscriptions opened and
 * cancelled after a few events, a compaction (PlanCompaction + Compact) every 200 operations,
 * imports of an exported session and exports; sessions are rotated (a new one every 300
 * operations, the oldest deleted beyond 40) so the working set stays bounded and growth means a
 * leak, not data. Refused operations (e.g. a compaction with nothing to compact) are counted,
 * not fatal. PostgreSQL: --pg-admin-url, or a throwaway cluster from Debian's initdb/pg_ctl (as
 * test/support/pg-cluster.ts does).
 *
 * The servers run as `npm start` runs one in production (docs/operations.md): node with
 * --initial-old-space-size=128; --node-flags '' runs them without it (as the runs before
 * 2026-12-04 23:50 did).
 *
 * --rate OPS_PER_S: the operations of all workers together are paced to that rate (default: as fast
 * as the servers answer), so the working set does not follow the machine's load; an operation late
 * for its slot starts at once, and the slots do not pile up while the servers are slower.
 *
 * Per minute also the V8 heaps of the server's worker threads (the SQLite writer thread and search
 * follower, from palimpsest_thread_heap_*): used and total, new and old space.
 *
 * --heap-snapshots M1,M2: each server runs with --heapsnapshot-signal=SIGUSR2 and is sent the signal
 * right after the scrape of those minutes, and (with --forced-gc on) every worker thread writes one of
 * its own isolate (soak-gc-hook.cjs); the .heapsnapshot files land in --snapshot-dir (diff them
 * with scripts/heap-diff.mjs). A snapshot costs a full GC and a burst of memory: a run that takes
 * them states so, and its slope window should start after the last one.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import pg from 'pg';
import { listening, soakOperations, startCluster, svc, unary } from './soak-support.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { SessionServiceClient } = svc;

const args = process.argv.slice(2);
const arg = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const MINUTES = Number(arg('minutes', '30'));
const WARMUP = Number(arg('warmup-minutes', String(Math.min(5, Math.floor(MINUTES / 3)))));
const STORES = arg('store', 'both') === 'both' ? ['sqlite', 'postgres'] : [arg('store')];
const PERIOD_MS = Number(arg('period-ms', '60000'));
const WORKERS = 8;
const SNAPSHOT_MINUTES = new Set(String(arg('heap-snapshots', '')).split(',').filter(Boolean).map(Number));
const SNAPSHOT_DIR = arg('snapshot-dir', tmpdir());
const NODE_FLAGS = String(arg('node-flags', '--initial-old-space-size=128')).split(' ').filter(Boolean);
/** A full collection of every isolate before each minute's sample (scripts/soak-gc-hook.cjs); `--forced-gc off` samples RSS as it falls. */
const FORCED_GC = arg('forced-gc', 'on') !== 'off';
/** Raw RSS samples per period (from /proc/PID/status, no collection forced): their floor and range are reported too. */
const SAMPLES = Number(arg('samples-per-minute', '6'));
const PARALLEL = args.includes('--parallel');
/** Operations per second of all workers together (0: unpaced). */
const RATE = Number(arg('rate', '0'));
const TARGET_MB_PER_10MIN = 1;



/** Starts `palimpsest serve` with metrics; resolves with its addresses. */
async function serve(db) {
  const nodeArgs = [...NODE_FLAGS, ...(SNAPSHOT_MINUTES.size > 0 ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${SNAPSHOT_DIR}`] : []),
    ...(FORCED_GC ? ['--expose-gc', '--require', join(ROOT, 'scripts/soak-gc-hook.cjs')] : [])];
  const proc = spawn(process.execPath, [...nodeArgs, join(ROOT, 'bin/palimpsest.mjs'), 'serve', '--listen', '127.0.0.1:0', '--db', db, '--log-level', 'warn',
    '--metrics-listen', '127.0.0.1:0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit', ...(FORCED_GC ? ['ipc'] : [])] });
  const { address, metricsPort } = await listening(proc);
  return { proc, address, metricsPort };
}

let gcIds = 0;
/** Asks the server's soak-gc-hook for a full collection of every isolate; resolves with the number of worker threads that collected and the main heap's live MB. */
function forceGc(s) {
  if (!FORCED_GC) return Promise.resolve({ threads: 0, liveHeapMb: NaN });
  const id = ++gcIds;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      s.proc.off('message', on);
      reject(new Error('the server did not answer the forced collection within 30 s'));
    }, 30_000);
    const on = (m) => {
      if (m?.op !== 'gc-done' || m.id !== id) return;
      clearTimeout(timer);
      s.proc.off('message', on);
      resolve({ threads: m.threads, liveHeapMb: m.liveHeap / 2 ** 20 });
    };
    s.proc.on('message', on);
    s.proc.send({ op: 'gc', id });
  });
}

/** VmRSS of a process in MB (Linux), NaN elsewhere: the cheap raw sample taken between the minute marks. */
function rawRss(pid) {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/**
 * Where a server's RSS is, from /proc/PID/smaps (Linux): `brkMb` the main malloc arena ([heap]),
 * `fileMb` mapped files, `smallAnonMb` anonymous mappings under 1 MiB (V8 heap pages are 256 KiB:
 * both isolates' heaps, the main one and the SQLite writer thread's), `bigAnonMb` the other
 * anonymous mappings (malloc's thread arenas, large mmapped allocations). NaN elsewhere.
 */
function smaps(pid) {
  const out = { brkMb: 0, fileMb: 0, smallAnonMb: 0, bigAnonMb: 0 };
  let text;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return { brkMb: NaN, fileMb: NaN, smallAnonMb: NaN, bigAnonMb: NaN };
  }
  let kind = 'bigAnonMb';
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (m) {
      const size = parseInt(m[2], 16) - parseInt(m[1], 16);
      const name = m[3];
      kind = name === '[heap]' ? 'brkMb' : name.startsWith('/') ? 'fileMb' : name === '' && size < 2 ** 20 ? 'smallAnonMb' : 'bigAnonMb';
    } else if (line.startsWith('Rss:')) out[kind] += Number(line.split(/\s+/)[1]) / 1024;
  }
  return out;
}

/** The figures of one server's /metrics. */
async function scrape(metricsPort) {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const v = (name) => {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text);
    return m ? Number(m[1]) : NaN;
  };
  // The worker threads' heaps (SQLite: writer, search-follower), NaN for a thread not running.
  const t = (name, labels) => {
    const m = new RegExp(`^${name}\\{${labels}\\} ([0-9.e+-]+)$`, 'm').exec(text);
    return m ? Number(m[1]) / 2 ** 20 : NaN;
  };
  const threads = {};
  for (const [key, thread] of [['w', 'writer'], ['f', 'search-follower']]) {
    threads[`${key}UsedMb`] = t('palimpsest_thread_heap_used_bytes', `thread="${thread}"`);
    threads[`${key}TotalMb`] = t('palimpsest_thread_heap_total_bytes', `thread="${thread}"`);
    threads[`${key}NewMb`] = t('palimpsest_thread_heap_space_size_bytes', `thread="${thread}",space="new_space"`);
    threads[`${key}OldMb`] = t('palimpsest_thread_heap_space_size_bytes', `thread="${thread}",space="old_space"`);
  }
  const rssMb = v('process_resident_memory_bytes') / 2 ** 20;
  const heapTotalMb = v('nodejs_heap_size_total_bytes') / 2 ** 20;
  return {
    rssMb, heapMb: v('nodejs_heap_size_used_bytes') / 2 ** 20, heapTotalMb, externalMb: v('nodejs_external_memory_bytes') / 2 ** 20,
    // RSS outside the main isolate's V8 heap (malloc: SQLite, the writer thread's isolate, buffers):
    // free of the V8 heap sizing that makes RSS jump with the collector's heuristics.
    offHeapMb: rssMb - heapTotalMb, handles: v('nodejs_active_handles_total'), fds: v('process_open_fds'), ...threads,
  };
}


/** Mixed load on `addresses` (one client per worker, round robin) until `stop.now`; latencies in `lat`. */
async function load(addresses, stop, stats) {
  const clients = addresses.map((a) => new SessionServiceClient(a, grpc.credentials.createInsecure()));
  const opsOf = new Map(clients.map((c) => [c, soakOperations(c)]));
  const sessions = [];
  let op = 0;
  const newSession = async (c) => {
    const id = `soak-${Date.now().toString(36)}-${op}`;
    await unary(c, 'createSession', { sessionId: id, labels: {} });
    sessions.push(id);
    while (sessions.length > 40) await unary(c, 'deleteSession', { sessionId: sessions.shift() }).catch(() => undefined);
  };
  await newSession(clients[0]);
  // --rate: one slot per operation, 1000/RATE ms apart, shared by the workers.
  let nextSlot = performance.now();
  const pace = async () => {
    if (RATE <= 0) return;
    const now = performance.now();
    const slot = Math.max(nextSlot, now);
    nextSlot = slot + 1000 / RATE;
    if (slot > now) await new Promise((r) => setTimeout(r, slot - now));
  };
  const timed = async (kind, fn) => {
    const t = performance.now();
    try {
      await fn();
      if (kind === 'append' || kind === 'batch') stats.lat.push(performance.now() - t);
      stats.ok++;
    } catch (e) {
      const k = `${kind} ${e.code} ${String(e.details ?? e.message).slice(0, 60)}`;
      stats.refused[k] = (stats.refused[k] ?? 0) + 1;
    }
  };
  const worker = async (w) => {
    while (!stop.now) {
      await pace();
      if (stop.now) break;
      const c = clients[(op + w) % clients.length];
      const n = op++;
      const id = sessions[sessions.length - 1 - (n % Math.min(sessions.length, 8))];
      const ops = opsOf.get(c);
      if (n % 300 === 0) await timed('create', () => newSession(c));
      else if (n % 200 === 0) await timed('compact', () => ops.compact(id, n));
      else if (n % 97 === 0) await timed('export+import', () => ops.exportImport(id, n));
      else if (n % 41 === 0) await timed('subscribe', () => ops.subscribe(id, n));
      else if (n % 7 === 0) await timed('batch', () => ops.batch(id, n));
      else await timed('append', () => ops.append(id, n));
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
  for (const c of clients) c.close();
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const p99 = (xs) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))];
};

/** Two-sided 97.5% quantiles of Student's t by degrees of freedom (1..30; 1.96 beyond). */
const T975 = [NaN, 12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086,
  2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042];

/**
 * Least-squares slope of y over x with its standard error and a 95% interval. The minute-to-minute
 * residuals of a memory series are correlated (a heap that grew stays grown for a while), which
 * makes the textbook error too small: when the lag-1 autocorrelation r of the residuals is
 * positive the error is widened by sqrt((1 + r) / (1 - r)) (the AR(1) effective sample size), so
 * an interval is not narrower than the data allow. `se` is that widened error.
 */
function slopeStats(points) {
  const n = points.length;
  if (n < 3) return { slope: NaN, se: NaN, lo: NaN, hi: NaN, r1: NaN, n };
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  const sxx = points.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
  const b = points.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0) / sxx;
  const res = points.map((p) => p[1] - (my + b * (p[0] - mx)));
  const ssr = res.reduce((a, r) => a + r * r, 0);
  const r1 = ssr === 0 ? 0 : res.slice(1).reduce((a, r, i) => a + r * res[i], 0) / ssr;
  const widen = r1 > 0 ? Math.sqrt((1 + Math.min(r1, 0.9)) / (1 - Math.min(r1, 0.9))) : 1;
  const se = Math.sqrt(ssr / (n - 2) / sxx) * widen;
  const t = T975[n - 2] ?? 1.96;
  return { slope: b, se, lo: b - t * se, hi: b + t * se, r1, n };
}

/** `+0.42 ± 0.31 (95%: -0.22..+1.06)` for a slope per minute, as MB per 10 minutes. */
const per10 = (st) => `${fmt(st.slope * 10)} ± ${(st.se * 10).toFixed(2)} (95%: ${fmt(st.lo * 10)}..${fmt(st.hi * 10)})`;
const fmt = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(2)}`;

async function soak(name, servers, out) {
  const say = (line) => (PARALLEL ? out.push(line) : console.log(line));
  say(`\n## ${name}: ${MINUTES} min (${WARMUP} min warm-up), ${servers.length} server process(es), ${WORKERS} workers${RATE > 0 ? ` paced to ${RATE} operations/s` : ''}, node flags: ${NODE_FLAGS.join(' ') || '(none)'}` +
    `; RSS sampled ${SAMPLES} times a minute, and ${FORCED_GC ? 'after a forced full collection of every isolate' : 'without forcing a collection'} at each minute mark`);
  const cols = ['RSS floor', 'RSS median', 'RSS max', FORCED_GC ? 'RSS after GC' : 'RSS at mark', 'live heap', 'heap used', 'heap total', 'V8 pages', 'malloc brk', 'other anon', 'files', 'handles', 'fds', 'writer used', 'writer total', 'writer new', 'writer old', 'follower used', 'follower total', 'follower new', 'follower old'];
  say('| min | load1 | ops ok | append p99 ms | ' + servers.map((_, i) => cols.map((c) => `s${i} ${c}`).join(' | ')).join(' | ') + ' |');
  say('|' + ' --- |'.repeat(4 + cols.length * servers.length));
  const stop = { now: false };
  const stats = { ok: 0, lat: [], refused: {} };
  const running = load(servers.map((s) => s.address), stop, stats);
  const rows = [];
  const started = Date.now();
  const wait = (at) => new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
  for (let minute = 1; minute <= MINUTES; minute++) {
    const raw = servers.map(() => []);
    for (let k = 1; k < SAMPLES; k++) {
      await wait(started + (minute - 1 + k / SAMPLES) * PERIOD_MS);
      servers.forEach((s, i) => raw[i].push(rawRss(s.proc.pid)));
    }
    await wait(started + minute * PERIOD_MS);
    servers.forEach((s, i) => raw[i].push(rawRss(s.proc.pid)));
    const gcs = await Promise.all(servers.map((s) => forceGc(s)));
    const figures = await Promise.all(servers.map(async (s, i) => {
      const m = smaps(s.proc.pid);
      return {
        ...await scrape(s.metricsPort), ...m, outsideV8Mb: m.brkMb + m.bigAnonMb + m.fileMb,
        rawFloorMb: Math.min(...raw[i]), rawMedianMb: median(raw[i]), rawMaxMb: Math.max(...raw[i]), gcThreads: gcs[i].threads, liveHeapMb: gcs[i].liveHeapMb,
      };
    }));
    const row = { minute, load1: loadavg()[0], ok: stats.ok, p99: p99(stats.lat), figures };
    stats.ok = 0;
    stats.lat = [];
    rows.push(row);
    say(`| ${minute} | ${row.load1.toFixed(1)} | ${row.ok} | ${row.p99.toFixed(1)} | ` + figures.map((f) => [f.rawFloorMb, f.rawMedianMb, f.rawMaxMb, f.rssMb, f.liveHeapMb, f.heapMb, f.heapTotalMb, f.smallAnonMb, f.brkMb, f.bigAnonMb, f.fileMb]
      .map((x) => x.toFixed(1)).concat([f.handles, f.fds], [f.wUsedMb, f.wTotalMb, f.wNewMb, f.wOldMb, f.fUsedMb, f.fTotalMb, f.fNewMb, f.fOldMb].map((x) => x.toFixed(1))).join(' | ')).join(' | ') + ' |');
    if (PARALLEL) console.error(`${name}: minute ${minute}/${MINUTES}, ${figures.map((f, i) => `s${i} RSS ${f.rssMb.toFixed(1)} MB`).join(', ')}`);
    if (SNAPSHOT_MINUTES.has(minute)) {
      for (const s of servers) {
        s.proc.kill('SIGUSR2');
        // The worker threads' isolates too (soak-gc-hook.cjs).
        if (FORCED_GC) s.proc.send({ op: 'snapshot', dir: SNAPSHOT_DIR });
      }
    }
  }
  stop.now = true;
  await running;
  const after = rows.filter((r) => r.minute > WARMUP);
  const statsOf = (key) => servers.map((_, i) => slopeStats(after.map((r) => [r.minute, r.figures[i][key]])));
  const rss = statsOf('rssMb');
  say(`\nSlopes after warm-up (minutes ${WARMUP + 1}-${MINUTES}), MB per 10 min, ± the standard error (widened for the residuals' lag-1 autocorrelation r), 95% interval:`);
  for (const [key, what] of [['rssMb', FORCED_GC ? 'RSS after a forced full GC (the figure against the target)' : 'RSS at the minute mark (the figure against the target)'],
    ['rawFloorMb', 'RSS, floor of the minute\'s raw samples'], ['rawMedianMb', 'RSS, median of the minute\'s raw samples'], ['rawMaxMb', 'RSS, maximum of the minute\'s raw samples'],
    ['outsideV8Mb', 'RSS outside V8 pages (malloc brk + other anonymous + files)'],
    ['liveHeapMb', 'V8 main heap live (used right after the forced collection)'], ['heapMb', 'V8 main heap used (at the scrape)'], ['heapTotalMb', 'V8 main heap total'],
    ['smallAnonMb', 'V8 pages (anonymous mappings < 1 MiB, every isolate)'], ['brkMb', 'malloc brk heap'], ['bigAnonMb', 'other anonymous (malloc thread arenas, large buffers)'], ['fileMb', 'mapped files'],
    ['wUsedMb', 'writer thread heap used (after the forced collection)'], ['wTotalMb', 'writer thread heap total'], ['wNewMb', 'writer thread new space'], ['wOldMb', 'writer thread old space'],
    ['fUsedMb', 'search follower heap used (after the forced collection)'], ['fTotalMb', 'search follower heap total'], ['fNewMb', 'search follower new space'], ['fOldMb', 'search follower old space']]) {
    if (after.every((r) => r.figures.every((f) => Number.isNaN(f[key])))) continue;
    say(`- ${what}: ${statsOf(key).map((st, i) => `s${i} ${per10(st)} r=${st.r1.toFixed(2)}`).join('; ')}`);
  }
  const verdicts = rss.map((st) => (st.hi * 10 < TARGET_MB_PER_10MIN ? 'met' : st.lo * 10 >= TARGET_MB_PER_10MIN ? 'missed' : 'not shown'));
  say(`Target (< ${TARGET_MB_PER_10MIN} MB per 10 min, the whole 95% interval below it): ${verdicts.map((v, i) => `s${i} ${v}`).join(', ')}`);
  say(`refused or failed operations: ${JSON.stringify(stats.refused)}`);
  return { name, rows, slopes: rss.map((st) => st.slope * 10), rss, verdicts, refused: stats.refused };
}

async function runSqlite(dir, out) {
  const s = await serve(join(dir, 'soak.db'));
  try {
    return await soak('SQLite (one server)', [s], out);
  } finally {
    s.proc.kill('SIGTERM');
  }
}

async function runPostgres(out) {
  const cluster = arg('pg-admin-url') ? { adminUrl: arg('pg-admin-url'), stop: () => undefined } : await startCluster('palimpsest-soak-pg-', '-c max_connections=100');
  try {
    const admin = new pg.Client({ connectionString: cluster.adminUrl });
    await admin.connect();
    const name = `soak_${Date.now().toString(36)}`;
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const url = cluster.adminUrl.replace(/\/postgres$/, `/${name}`);
    const replicas = [await serve(url), await serve(url)];
    try {
      return await soak('PostgreSQL (two replicas)', replicas, out);
    } finally {
      for (const r of replicas) r.proc.kill('SIGTERM');
    }
  } finally {
    cluster.stop();
  }
}

const results = [];
const dir = mkdtempSync(join(tmpdir(), 'palimpsest-soak-'));
try {
  const runs = [...(STORES.includes('sqlite') ? [(out) => runSqlite(dir, out)] : []), ...(STORES.includes('postgres') ? [(out) => runPostgres(out)] : [])];
  if (PARALLEL) {
    const outs = runs.map(() => []);
    results.push(...await Promise.all(runs.map((r, i) => r(outs[i]))));
    for (const out of outs) console.log(out.join('\n'));
  } else for (const r of runs) results.push(await r([]));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (arg('json')) writeFileSync(arg('json'), JSON.stringify(results, null, 2));
// One headline for every server of the run: the worst upper bound decides (bench/results.mjs).
const all = results.flatMap((r) => r.rss.map((st, i) => ({ who: `${r.name.startsWith('SQLite') ? 'SQLite' : 'PostgreSQL'} s${i}`, st })));
if (all.length > 0) {
  const worst = Math.max(...all.map((a) => a.st.hi * 10));
  console.log(`HEADLINE ${JSON.stringify({
    id: 'soak-rss-slope', label: `soak: RSS slope after warm-up${FORCED_GC ? ' (after a forced full GC)' : ''}, ${MINUTES} min`,
    value: all.map((a) => `${a.who} ${fmt(a.st.slope * 10)} ± ${(a.st.se * 10).toFixed(2)}`).join('; ') + ' MB/10 min',
    target: `< ${TARGET_MB_PER_10MIN} MB/10 min (95% interval)`, met: worst < TARGET_MB_PER_10MIN,
    detail: `95% upper bounds ${all.map((a) => `${a.who} ${fmt(a.st.hi * 10)}`).join(', ')}; warm-up ${WARMUP} min; load average ${loadavg()[0].toFixed(1)} at the end`,
  })}`);
}
