#!/usr/bin/env node
/**
 * The soak (issue #33 item 9; not run in CI): mixed load for a long time against one SQLite
 * server and against two PostgreSQL replicas, reporting per minute and per server process its RSS,
 * V8 heap used, open handles and file descriptors (scraped from its Prometheus /metrics) and the
 * clients' p99 latency of appends; then the RSS slope after warm-up (least squares, MB per 10
 * minutes; the target is under 1).
 *
 *   npm run build && node scripts/soak.mjs [--minutes 30] [--warmup-minutes 5] [--store sqlite|postgres|both]
 *                                          [--pg-admin-url postgresql://postgres@HOST:PORT/postgres] [--json FILE]
 *                                          [--heap-snapshots 2,10 --snapshot-dir DIR] [--node-flags "--initial-old-space-size=128"]
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
 * --heap-snapshots M1,M2: each server runs with --heapsnapshot-signal=SIGUSR2 and is sent the signal
 * right after the scrape of those minutes; the .heapsnapshot files land in --snapshot-dir (diff them
 * with scripts/heap-diff.mjs). A snapshot costs a full GC and a burst of memory: a run that takes
 * them states so, and its slope window should start after the last one.
 */
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import pg from 'pg';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const svc = await import(join(ROOT, 'dist/gen/palimpsest/v1/service.js'));
const { SessionServiceClient, DataFormat } = svc;
/** Request codecs by method (fromPartial fills every field the encoders expect). */
const CODECS = {
  createSession: svc.CreateSessionRequest, deleteSession: svc.DeleteSessionRequest, appendEvents: svc.AppendEventsRequest,
  planCompaction: svc.PlanCompactionRequest, compact: svc.CompactRequest,
};

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

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** A throwaway PostgreSQL cluster (initdb + pg_ctl), as test/support/pg-cluster.ts. */
async function startCluster() {
  const base = '/usr/lib/postgresql';
  const major = existsSync(base) ? readdirSync(base).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a))[0] : undefined;
  if (major === undefined) throw new Error('no PostgreSQL under /usr/lib/postgresql; pass --pg-admin-url');
  const bin = join(base, major, 'bin');
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-soak-pg-'));
  if (asRoot) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })));
  const run = (cmd, a) => {
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, cmd), ...a]] : [join(bin, cmd), a];
    const r = spawnSync(file, argv, { encoding: 'utf8', cwd: dir });
    if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stderr}${r.stdout}`);
  };
  const data = join(dir, 'data');
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '-N']);
  const port = await freePort();
  run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=100`, 'start']);
  return { adminUrl: `postgresql://postgres@127.0.0.1:${port}/postgres`, stop: () => { run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']); rmSync(dir, { recursive: true, force: true }); } };
}

/** Starts `palimpsest serve` with metrics; resolves with its addresses. */
async function serve(db) {
  const metricsPort = await freePort();
  const nodeArgs = [...NODE_FLAGS, ...(SNAPSHOT_MINUTES.size > 0 ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${SNAPSHOT_DIR}`] : [])];
  const proc = spawn(process.execPath, [...nodeArgs, join(ROOT, 'bin/palimpsest.mjs'), 'serve', '--listen', '127.0.0.1:0', '--db', db, '--log-level', 'warn',
    '--metrics-listen', `127.0.0.1:${metricsPort}`], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const address = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /palimpsest listening on (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    proc.once('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
  return { proc, address, metricsPort };
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
  const rssMb = v('process_resident_memory_bytes') / 2 ** 20;
  const heapTotalMb = v('nodejs_heap_size_total_bytes') / 2 ** 20;
  return {
    rssMb, heapMb: v('nodejs_heap_size_used_bytes') / 2 ** 20, heapTotalMb, externalMb: v('nodejs_external_memory_bytes') / 2 ** 20,
    // RSS outside the main isolate's V8 heap (malloc: SQLite, the writer thread's isolate, buffers):
    // free of the V8 heap sizing that makes RSS jump with the collector's heuristics.
    offHeapMb: rssMb - heapTotalMb, handles: v('nodejs_active_handles_total'), fds: v('process_open_fds'),
  };
}

const unary = (client, method, req) => new Promise((resolve, reject) => client[method](CODECS[method].fromPartial(req), { deadline: Date.now() + 30_000 }, (e, r) => (e ? reject(e) : resolve(r))));
const json = (type, data, append = false) => ({ type, data: { kind: { $case: 'json', value: JSON.stringify(data) } }, sourceEventSeqs: undefined, surfaceOp: append ? { $case: 'append', value: {} } : undefined, ignorable: false });
const userMessage = (id, text) => json('user/message', { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } }, true);

/** Mixed load on `addresses` (one client per worker, round robin) until `stop.now`; latencies in `lat`. */
async function load(addresses, stop, stats) {
  const clients = addresses.map((a) => new SessionServiceClient(a, grpc.credentials.createInsecure()));
  const sessions = [];
  let op = 0;
  const newSession = async (c) => {
    const id = `soak-${Date.now().toString(36)}-${op}`;
    await unary(c, 'createSession', { sessionId: id, labels: {} });
    sessions.push(id);
    while (sessions.length > 40) await unary(c, 'deleteSession', { sessionId: sessions.shift() }).catch(() => undefined);
  };
  await newSession(clients[0]);
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
      const c = clients[(op + w) % clients.length];
      const n = op++;
      const id = sessions[sessions.length - 1 - (n % Math.min(sessions.length, 8))];
      if (n % 300 === 0) await timed('create', () => newSession(c));
      else if (n % 200 === 0) {
        await timed('compact', async () => {
          const plan = await unary(c, 'planCompaction', { sessionId: id, budget: { $case: 'keepTokens', value: 50 }, omitMessages: true });
          if (plan.start === undefined) return;
          await unary(c, 'compact', { sessionId: id, start: plan.start, end: plan.end, expectedLastSeq: plan.expectedLastSeq, summary: { $case: 'summaryText', value: 'summary' }, provider: 'soak', model: 'soak-1' });
        });
      } else if (n % 97 === 0) {
        await timed('export+import', async () => {
          const lines = await new Promise((resolve, reject) => {
            const parts = [];
            const s = c.exportSession(svc.ExportSessionRequest.fromPartial({ sessionId: id }), { deadline: Date.now() + 30_000 });
            s.on('data', (m) => parts.push(Buffer.from(m.chunk)));
            s.on('error', reject);
            s.on('end', () => resolve(Buffer.concat(parts)));
          });
          const imported = `imp-${n}`;
          await new Promise((resolve, reject) => {
            const s = c.importSession({ deadline: Date.now() + 30_000 }, (e, r) => (e ? reject(e) : resolve(r)));
            s.write({ part: { $case: 'options', value: svc.ImportOptions.fromPartial({ sessionId: imported }) } });
            s.write({ part: { $case: 'chunk', value: lines } });
            s.end();
          });
          await unary(c, 'deleteSession', { sessionId: imported });
        });
      } else if (n % 41 === 0) {
        await timed('subscribe', () => new Promise((resolve) => {
          const s = c.subscribeEvents(svc.SubscribeEventsRequest.fromPartial({ sessionId: id, dataFormat: DataFormat.DATA_FORMAT_UNSPECIFIED }));
          let seen = 0;
          const end = () => {
            s.cancel();
            resolve();
          };
          s.on('data', () => {
            if (++seen >= 5) end();
          });
          s.on('error', () => resolve());
          setTimeout(end, 2_000);
        }));
      } else if (n % 7 === 0) {
        await timed('batch', () => unary(c, 'appendEvents', { sessionId: id, events: Array.from({ length: 20 }, (_, i) => json('x/note', { n, i, pad: 'p'.repeat(100) })) }));
      } else {
        await timed('append', () => unary(c, 'appendEvents', { sessionId: id, events: [n % 2 ? userMessage(`u${n}`, `hello ${n}`) : json('x/note', { n })] }));
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
  for (const c of clients) c.close();
}

const p99 = (xs) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))];
};

/** Least-squares slope of y over x. */
function slope(points) {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  const num = points.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0);
  const den = points.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
  return num / den;
}

async function soak(name, servers) {
  console.log(`\n## ${name}: ${MINUTES} min (${WARMUP} min warm-up), ${servers.length} server process(es), ${WORKERS} workers, node flags: ${NODE_FLAGS.join(' ') || '(none)'}`);
  console.log('| min | load1 | ops ok | append p99 ms | ' + servers.map((_, i) => `s${i} RSS MB | s${i} heap used MB | s${i} heap total MB | s${i} V8 pages MB | s${i} malloc brk MB | s${i} handles | s${i} fds`).join(' | ') + ' |');
  console.log('|' + ' --- |'.repeat(4 + 7 * servers.length));
  const stop = { now: false };
  const stats = { ok: 0, lat: [], refused: {} };
  const running = load(servers.map((s) => s.address), stop, stats);
  const rows = [];
  const started = Date.now();
  for (let minute = 1; minute <= MINUTES; minute++) {
    await new Promise((r) => setTimeout(r, started + minute * PERIOD_MS - Date.now()));
    const figures = await Promise.all(servers.map(async (s) => ({ ...await scrape(s.metricsPort), ...smaps(s.proc.pid) })));
    const row = { minute, load1: loadavg()[0], ok: stats.ok, p99: p99(stats.lat), figures };
    stats.ok = 0;
    stats.lat = [];
    rows.push(row);
    console.log(`| ${minute} | ${row.load1.toFixed(1)} | ${row.ok} | ${row.p99.toFixed(1)} | ` + figures.map((f) => `${f.rssMb.toFixed(1)} | ${f.heapMb.toFixed(1)} | ${f.heapTotalMb.toFixed(1)} | ${f.smallAnonMb.toFixed(1)} | ${f.brkMb.toFixed(1)} | ${f.handles} | ${f.fds}`).join(' | ') + ' |');
    if (SNAPSHOT_MINUTES.has(minute)) for (const s of servers) s.proc.kill('SIGUSR2');
  }
  stop.now = true;
  await running;
  const after = rows.filter((r) => r.minute > WARMUP);
  const slopeOf = (key) => servers.map((_, i) => slope(after.map((r) => [r.minute, r.figures[i][key]])) * 10);
  const slopes = slopeOf('rssMb');
  const offHeapSlopes = slopeOf('offHeapMb');
  console.log(`RSS slope after warm-up (minutes ${WARMUP + 1}-${MINUTES}), MB per 10 min: ${slopes.map((s, i) => `s${i} ${s.toFixed(2)}`).join(', ')} (target < 1)`);
  console.log(`RSS outside the V8 heap, slope after warm-up, MB per 10 min: ${offHeapSlopes.map((s, i) => `s${i} ${s.toFixed(2)}`).join(', ')}`);
  console.log(`V8 heap used, slope after warm-up, MB per 10 min: ${slopeOf('heapMb').map((s, i) => `s${i} ${s.toFixed(2)}`).join(', ')}`);
  for (const [key, what] of [['smallAnonMb', 'V8 pages (anonymous mappings < 1 MiB)'], ['brkMb', 'malloc brk heap'], ['bigAnonMb', 'other anonymous'], ['fileMb', 'mapped files']]) {
    console.log(`${what}, slope after warm-up, MB per 10 min: ${slopeOf(key).map((s, i) => `s${i} ${s.toFixed(2)}`).join(', ')}`);
  }
  console.log(`refused or failed operations: ${JSON.stringify(stats.refused)}`);
  return { name, rows, slopes, offHeapSlopes, refused: stats.refused };
}

const results = [];
const dir = mkdtempSync(join(tmpdir(), 'palimpsest-soak-'));
try {
  if (STORES.includes('sqlite')) {
    const s = await serve(join(dir, 'soak.db'));
    try {
      results.push(await soak('SQLite (one server)', [s]));
    } finally {
      s.proc.kill('SIGTERM');
    }
  }
  if (STORES.includes('postgres')) {
    const cluster = arg('pg-admin-url') ? { adminUrl: arg('pg-admin-url'), stop: () => undefined } : await startCluster();
    try {
      const admin = new pg.Client({ connectionString: cluster.adminUrl });
      await admin.connect();
      const name = `soak_${Date.now().toString(36)}`;
      await admin.query(`CREATE DATABASE ${name}`);
      await admin.end();
      const url = cluster.adminUrl.replace(/\/postgres$/, `/${name}`);
      const replicas = [await serve(url), await serve(url)];
      try {
        results.push(await soak('PostgreSQL (two replicas)', replicas));
      } finally {
        for (const r of replicas) r.proc.kill('SIGTERM');
      }
    } finally {
      cluster.stop();
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (arg('json')) writeFileSync(arg('json'), JSON.stringify(results, null, 2));
