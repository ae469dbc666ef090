/**
 * Where the PostgreSQL store's time goes on the two figures of bench/postgres.bench.ts that issue
 * #37 tracks (pg-batch, pg-fanout): a profiling aid, not a bench (no HEADLINE).
 *
 *   npx tsx bench/pg-profile.ts [--runs N] [--batch-only | --fanout-only] [--cpu-prof DIR] [--base DIR] [--statements]
 *     [--search-index off] [--duration MS] [--single]
 *
 * Same cluster settings and the same loads as postgres.bench.ts (100-event batches at 16 in
 * flight over 16 sessions: the driver ceiling vs AppendEvents; fan-out to 100 subscribers at 50
 * appends/s, same replica vs cross-replica), plus per event:
 * - the statements each side sends (pg_stat_statements: calls and executor time per event, the
 *   top statements by time), and round trips (statement calls) per batch;
 * - CPU time per event of the server process (/proc), of the cluster's backends (the postmaster's
 *   children, /proc) and of this process (the load generator / ceiling client).
 * With --cpu-prof DIR the replicas write V8 CPU profiles there (stopped with SIGINT at the end).
 * With --base DIR (another checkout, built: e.g. `git archive main`, node_modules linked, `npm run
 * build`) that build's two replicas run the same loads in the same run, interleaved: an A/B on a
 * noisy machine. --single runs pg-append's load in place of the batches (single-event appends, 64
 * in flight over 64 sessions). With --search-index off the replicas run without the search follower (serve's flag):
 * its CPU (it indexes the ceiling's rows and Palimpsest's) is then out of both sides' figures.
 * The server's CPU per event is split into user and system time (system: mostly the socket
 * writes to PostgreSQL and to the gRPC client on loopback, the receiving side's TCP work included).
 */
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import pg from 'pg';
import { SessionServiceClient } from '../gen/palimpsest/v1/service.js';
import { openSubscribers } from './pg-subscribers.js';
import type { EventInput } from '../gen/palimpsest/v1/event.js';
import { findPgBin, startCluster } from '../test/support/pg-cluster.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../test/support/server-process.js';

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv[i + 1];
};
const RUNS = Number(arg('--runs') ?? 3);
const cpuProf = arg('--cpu-prof');
const batchOnly = process.argv.includes('--batch-only');
const fanoutOnly = process.argv.includes('--fanout-only');
/** Another build's root (e.g. main's, built): its replicas run the same loads in the same run, interleaved (A/B). */
const base = arg('--base');
/** Print the fan-out's most frequent statements per append. */
const statements = process.argv.includes('--statements');
const searchOff = arg('--search-index') === 'off';
const DURATION_MS = Number(arg('--duration') ?? 2500);
const WARMUP_MS = 500;
const FANOUT_MS = 4000;
const TICK_DATA = JSON.stringify({ n: 1, text: 'tick' });
const tick: EventInput = { type: 'bench/tick', data: { kind: { $case: 'json', value: TICK_DATA } }, sourceEventSeqs: undefined, surfaceOp: undefined, ignorable: false };
/** --single: the pg-append load instead (single-event appends, 64 in flight over 64 sessions). */
const single = process.argv.includes('--single');
const TICKS = single ? 1 : 100;
const IN_FLIGHT = single ? 64 : 16;
const HZ = 100;

type Client = SessionServiceClient;
const connect = (address: string): Client => new SessionServiceClient(address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
function unary<Req, Res>(fn: (req: Req, cb: (err: Error | null, res: Res) => void) => unknown, req: Req): Promise<Res> {
  return new Promise((resolve, reject) => fn(req, (err, res) => (err ? reject(err) : resolve(res))));
}
const append = (c: Client, sessionId: string, events: EventInput[]) =>
  unary(c.appendEvents.bind(c) as never, { sessionId, events, idempotencyKey: '' } as never) as Promise<{ seqs: number[] }>;
const create = (c: Client, sessionId: string) => unary(c.createSession.bind(c) as never, { sessionId, labels: {}, strict: false } as never);
async function freshSessions(c: Client, n: number, tag: string): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${tag}-${randomUUID().slice(0, 8)}-${i}`);
  for (let i = 0; i < ids.length; i += 16) await Promise.all(ids.slice(i, i + 16).map((id) => create(c, id)));
  return ids;
}
async function measure(inFlight: number, op: (worker: number) => Promise<void>): Promise<number> {
  const start = performance.now();
  const warm = start + WARMUP_MS;
  const end = warm + DURATION_MS;
  let counted = 0;
  await Promise.all(Array.from({ length: inFlight }, async (_, w) => {
    for (;;) {
      if (performance.now() >= end) return;
      await op(w);
      const done = performance.now();
      if (done >= warm && done < end) counted++;
    }
  }));
  return counted / (DURATION_MS / 1000);
}

/** utime + stime of a process, ms. */
function cpuOf(pid: number): number {
  const [user, sys] = userSys(pid);
  return user + sys;
}
/** [utime, stime] of a process, ms. */
function userSys(pid: number): [number, number] {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return [(Number(rest[11]) * 1000) / HZ, (Number(rest[12]) * 1000) / HZ];
  } catch {
    return [0, 0];
  }
}
/** CPU ms of the postmaster's children (backends, walwriter, checkpointer...), exited ones included via cutime of the postmaster. */
function clusterCpu(postmaster: number): number {
  let total = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const f = readFileSync(`/proc/${d}/stat`, 'utf8');
      const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
      if (Number(rest[1]) === postmaster) total += ((Number(rest[11]) + Number(rest[12])) * 1000) / HZ;
    } catch {
      // gone
    }
  }
  const f = readFileSync(`/proc/${postmaster}/stat`, 'utf8').slice(readFileSync(`/proc/${postmaster}/stat`, 'utf8').lastIndexOf(')') + 2).split(' ');
  return total + ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / HZ;
}
function postmasterPid(port: string): number {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (cmd[0]?.endsWith('/postgres') && cmd.includes(port)) return Number(d);
    } catch {
      // gone
    }
  }
  throw new Error('postmaster not found');
}

interface FanoutStat { p50: number; p99: number; cpu: number; stmts: number }
interface Sample { rate: number; serverCpu: number; serverSys: number; othersCpu: number; pgCpu: number; selfCpu: number; statements: { query: string; calls: number; ms: number }[] }

/** The replicas other than `server`: they receive its NOTIFY hints (bench/postgres.bench.ts runs three). */
let allReplicas: ServerProcess[] = [];
const othersCpu = (server: ServerProcess): number => allReplicas.reduce((t, p) => (p === server ? t : t + cpuOf(p.proc.pid!)), 0);

async function sampled(pool: pg.Pool, server: ServerProcess, postmaster: number, events: () => number, run: () => Promise<number>): Promise<Sample> {
  await pool.query('SELECT pg_stat_statements_reset()');
  const o0 = othersCpu(server);
  const s0 = cpuOf(server.proc.pid!);
  const sys0 = userSys(server.proc.pid!)[1];
  const p0 = clusterCpu(postmaster);
  const c0 = process.cpuUsage();
  const rate = await run();
  const c1 = process.cpuUsage(c0);
  const n = Math.max(1, events());
  const serverCpu = (cpuOf(server.proc.pid!) - s0) / n;
  const serverSys = (userSys(server.proc.pid!)[1] - sys0) / n;
  const others = (othersCpu(server) - o0) / n;
  const pgCpu = (clusterCpu(postmaster) - p0) / n;
  const stmts = await pool.query<{ query: string; calls: string; ms: number }>(
    `SELECT regexp_replace(query, '\\s+', ' ', 'g') AS query, calls, total_exec_time AS ms FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 8`);
  return {
    rate, serverCpu, serverSys, othersCpu: others, pgCpu, selfCpu: (c1.user + c1.system) / 1000 / n,
    statements: stmts.rows.map((r) => ({ query: r.query.slice(0, 90), calls: Number(r.calls) / n, ms: r.ms / n })),
  };
}

function report(label: string, samples: Sample[]): void {
  const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`\n## ${label}: ${Math.round(med(samples.map((s) => s.rate))).toLocaleString('en-US')} events/s (runs: ${samples.map((s) => Math.round(s.rate)).join(', ')})`);
  const range = (xs: number[]): string => `${(Math.min(...xs) * 1000).toFixed(1)}-${(Math.max(...xs) * 1000).toFixed(1)}`;
  console.log(`  per run (min-max): server ${range(samples.map((s) => s.serverCpu))}, cluster ${range(samples.map((s) => s.pgCpu))}, server + cluster + client ${range(samples.map((s) => s.serverCpu + s.pgCpu + s.selfCpu))}`);
  console.log(`CPU per 1000 events: server ${(med(samples.map((s) => s.serverCpu)) * 1000).toFixed(1)} ms (system ${(med(samples.map((s) => s.serverSys)) * 1000).toFixed(1)}), other replicas ${(med(samples.map((s) => s.othersCpu)) * 1000).toFixed(1)} ms, cluster ${(med(samples.map((s) => s.pgCpu)) * 1000).toFixed(1)} ms, client ${(med(samples.map((s) => s.selfCpu)) * 1000).toFixed(1)} ms`);
  console.log(`  server + cluster + client: ${(med(samples.map((s) => s.serverCpu + s.pgCpu + s.selfCpu)) * 1000).toFixed(1)} ms per 1000 events (median)`);
  const last = samples[samples.length - 1]!;
  for (const st of last.statements) console.log(`  ${(st.calls * 1000).toFixed(1)} calls, ${(st.ms * 1000).toFixed(1)} ms per 1000 events: ${st.query}`);
}

async function fanout(appendClient: Client, subClient: Client, tag: string, pool: pg.Pool, subServer: ServerProcess): Promise<FanoutStat> {
  const [id] = await freshSessions(appendClient, 1, tag);
  const { streams, arrivals } = await openSubscribers(subClient, id!, 100);
  await pool.query('SELECT pg_stat_statements_reset()');
  const cpu0 = cpuOf(subServer.proc.pid!);
  const sent = new Map<number, number>();
  const end = performance.now() + FANOUT_MS;
  let n = 0;
  while (performance.now() < end) {
    const sentAt = performance.now();
    const r = await append(appendClient, id!, [tick]);
    sent.set(r.seqs[0]!, sentAt);
    n++;
    const wait = sentAt + 20 - performance.now();
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
  }
  const deadline = performance.now() + 5000;
  while (arrivals.some((a) => !a.has(n - 1)) && performance.now() < deadline) await new Promise((res) => setTimeout(res, 10));
  const lat: number[] = [];
  for (const a of arrivals) for (const [seq, at0] of sent) lat.push((a.get(seq) ?? at0 + 5000) - at0);
  const cpu = (cpuOf(subServer.proc.pid!) - cpu0) / n;
  const calls = Number((await pool.query<{ n: string }>("SELECT sum(calls) AS n FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'")).rows[0]!.n) / n;
  if (statements) {
    const top = await pool.query<{ query: string; calls: string }>(
      "SELECT regexp_replace(query, '\\s+', ' ', 'g') AS query, calls FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC LIMIT 8");
    for (const r of top.rows) console.log(`  ${tag}: ${(Number(r.calls) / n).toFixed(2)} per append: ${r.query.slice(0, 110)}`);
  }
  for (const s of streams) s.cancel();
  lat.sort((x, y) => x - y);
  return { p50: lat[Math.floor(lat.length / 2)]!, p99: lat[Math.floor(lat.length * 0.99)]!, cpu, stmts: calls };
}

/** Waits (at most 60 s) until the search follower has indexed every feed record (see postgres.bench.ts settle()). */
async function settle(pool: pg.Pool): Promise<void> {
  if (searchOff) return;
  const deadline = performance.now() + 60_000;
  while (performance.now() < deadline) {
    const r = await pool.query<{ lag: string | null }>(
      'SELECT sum(h.position - coalesce(f.position, 0)) AS lag FROM palimpsest.feed_heads h LEFT JOIN palimpsest.search_follow f USING (tenant)');
    if (Number(r.rows[0]!.lag ?? 0) <= 0) return;
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** `palimpsest serve` of the build at `root` (spawnServer's, from another checkout). */
function spawnAt(root: string, serveArgs: string[], nodeArgs: string[]): Promise<ServerProcess> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [...nodeArgs, join(root, 'bin/palimpsest.mjs'), 'serve', '--listen', '127.0.0.1:0', '--log-level', 'silent', ...serveArgs], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.once('exit', (code, signal) => r({ code, signal })));
    proc.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /palimpsest listening on (\S+)/.exec(out);
      if (m) resolve({ proc, address: m[1]!, exited, stderr: () => err, stdout: () => out });
    });
    void exited.then(() => reject(new Error(`server at ${root} exited before listening: ${err}`)));
  });
}

async function main(): Promise<void> {
  const bin = findPgBin();
  if (bin === undefined) throw new Error('PostgreSQL is not installed');
  ensureBuilt();
  const cluster = await startCluster(bin, ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all']);
  const port = /:(\d+)\//.exec(cluster.adminUrl)![1]!;
  const postmaster = postmasterPid(port);
  const admin = new pg.Client({ connectionString: cluster.adminUrl });
  await admin.connect();
  await admin.query('CREATE DATABASE bench');
  await admin.end();
  const url = cluster.adminUrl.replace(/\/postgres$/, '/bench');
  const procs: ServerProcess[] = [];
  const nodeArgs = cpuProf === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${cpuProf}`];
  const serveArgs = ['--db', url, ...(searchOff ? ['--search-index', 'off'] : [])];
  try {
    for (let i = 0; i < 2; i++) procs.push(await spawnServer(serveArgs, 30_000, {}, nodeArgs));
    if (base !== undefined) for (let i = 0; i < 2; i++) procs.push(await spawnAt(base, serveArgs, nodeArgs));
    allReplicas = procs;
    const clients = procs.map((p) => connect(p.address));
    const variants = (base === undefined ? ['this build'] : ['this build', `base (${base})`]).map((name, v) => ({
      name, a: clients[2 * v]!, b: clients[2 * v + 1]!, pa: procs[2 * v]!, pb: procs[2 * v + 1]!,
      pal: [] as Sample[], same: [] as FanoutStat[], cross: [] as FanoutStat[],
    }));
    const pool = new pg.Pool({ connectionString: url, max: 10 });
    await pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const raw: Sample[] = [];
    for (let run = 0; run < RUNS; run++) {
      console.error(`run ${run + 1}/${RUNS}`);
      const a = clients[0]!;
      if (!fanoutOnly) {
        const rawIds = await freshSessions(a, IN_FLIGHT, 'raw');
        const sql = 'SELECT * FROM palimpsest.append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)';
        const heads = new Map(rawIds.map((id) => [id, { next: 0, writer: '' }]));
        for (const r of (await pool.query<{ id: string; writer: string }>('SELECT id, writer FROM palimpsest.sessions WHERE id = ANY($1)', [rawIds])).rows) heads.get(r.id)!.writer = r.writer;
        let rawEvents = 0;
        await settle(pool);
        raw.push(await sampled(pool, procs[0]!, postmaster, () => rawEvents, () => measure(IN_FLIGHT, async (w) => {
          const id = rawIds[w]!;
          const s = heads.get(id)!;
          const seqs = Array.from({ length: TICKS }, (_, i) => s.next + i);
          const writer = randomUUID();
          const r = await pool.query<{ outcome: string }>({ name: 'raw_append', text: sql, values: [
            id, s.next, s.writer, writer, seqs, seqs.map(() => 'bench/tick'), seqs.map(() => Date.now()), seqs.map(() => TICK_DATA),
            seqs.map(() => null), seqs.map(() => null), seqs.map(() => null), Buffer.byteLength(TICK_DATA) * TICKS, null, null, 0, 0, Date.now(),
          ] });
          if (r.rows[0]!.outcome !== 'appended') throw new Error(`raw append ${r.rows[0]!.outcome}`);
          s.next += TICKS;
          s.writer = writer;
          rawEvents += TICKS;
        }).then((x) => x * TICKS)));
        if (statements && !searchOff) {
          const lag = await pool.query<{ lag: string }>('SELECT sum(h.position - coalesce(f.position, 0)) AS lag FROM palimpsest.feed_heads h LEFT JOIN palimpsest.search_follow f USING (tenant)');
          console.log(`search follower behind by ${lag.rows[0]!.lag} feed records after the ceiling's phase (${rawEvents / TICKS} appends)`);
        }
        for (const v of variants) {
          const palIds = await freshSessions(v.a, IN_FLIGHT, 'pal');
          const events = Array.from({ length: TICKS }, () => tick);
          let palEvents = 0;
          await settle(pool);
          v.pal.push(await sampled(pool, v.pa, postmaster, () => palEvents, () => measure(IN_FLIGHT, async (w) => {
            await append(v.a, palIds[w]!, events);
            palEvents += TICKS;
          }).then((x) => x * TICKS)));
        }
      }
      if (!batchOnly) {
        for (const v of variants) {
          v.same.push(await fanout(v.a, v.a, 'same', pool, v.pa));
          v.cross.push(await fanout(v.a, v.b, 'cross', pool, v.pb));
        }
      }
    }
    if (!fanoutOnly) report(`driver ceiling, ${TICKS}-event append() calls, ${IN_FLIGHT} in flight`, raw);
    for (const v of variants) {
      if (!fanoutOnly) report(`AppendEvents, ${TICKS}-event batches, ${IN_FLIGHT} in flight: ${v.name}`, v.pal);
      if (!batchOnly) {
        const f = (xs: FanoutStat[]): string =>
          xs.map((x) => `${x.p50.toFixed(1)}/${x.p99.toFixed(1)} (server ${x.cpu.toFixed(1)} ms CPU, ${x.stmts.toFixed(1)} statements per append)`).join(', ');
        const med = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
        console.log(`\n## fan-out (${v.name}), sent -> delivery p50/p99 ms per run\nsame:  ${f(v.same)}\ncross: ${f(v.cross)}`);
        console.log(`p99 cross/same (medians): ${(med(v.cross.map((x) => x.p99)) / med(v.same.map((x) => x.p99))).toFixed(2)}x; p50 ${med(v.same.map((x) => x.p50)).toFixed(1)} vs ${med(v.cross.map((x) => x.p50)).toFixed(1)}`);
      }
    }
    await pool.end();
    for (const c of clients) c.close();
  } finally {
    for (const p of procs) p.proc.kill(cpuProf === undefined ? 'SIGKILL' : 'SIGINT');
    await Promise.all(procs.map((p) => p.exited));
    cluster.stop();
  }
}

await main();
