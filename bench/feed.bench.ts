/**
 * Session feed benchmark (issue #35): delivery latency of SubscribeSessions against the
 * per-session stream (SubscribeEvents) in the same run, and the cost of an append with 0 and
 * with 100 feed subscribers.
 *
 *   npx tsx bench/feed.bench.ts [--quick] [--runs N] [--postgres | --db postgres://...] [--replicas] [--rate N] [--feed-subscribers N] [--no-batch]
 *
 * The feed subscribers opt into batched delivery (SubscribeSessionsRequest.batch: the changes
 * ready together come in one message); --no-batch measures one change per message.
 *
 * Each run is a fresh server (and database); the tables give every run and the medians over the
 * runs (default 5; --quick 1), and the HEADLINE figures are medians. Latencies are measured from
 * the AppendEvents acknowledgement (the target's definition; clamped at 0, a per-session delivery
 * often arrives before its ack, so its p99 can be 0 on an idle machine) and from the moment the
 * append was sent (never clamped: the ratio stays defined).
 *
 * --replicas (PostgreSQL): two servers on one database, appends through A, the feed subscribers
 * on B (default 200 appends/s and 10 subscribers, so that fan-out throughput does not hide the
 * wake-up path); cross-replica feed delivery p99 with the feed on NOTIFY hints (the default) and
 * with hints off (the 200 ms poll), interleaved in the same run.
 *
 * One server (SQLite file with durability full by default; `--postgres` a throwaway PostgreSQL
 * cluster of its own, test/support/pg-cluster.ts; `--db` a PostgreSQL URL), 100
 * sessions, one SubscribeEvents stream per session, appends of one event at 1,000 events/s spread
 * over the sessions (10 appends every 10 ms, round robin).
 * The subscribers (the SubscribeEvents and SubscribeSessions streams and their decoding) run in a
 * worker thread (bench/feed-clients.ts), as clients elsewhere would: 100 feed subscribers of 1,000
 * appends/s decode 100,000 changes/s, which in the server's own thread measured the clients. The
 * appends are sent from the bench's main thread, beside the server.
 * 1. Cost: process CPU time (user + system, every thread: the clients' worker too) per append
 *    over a phase without feed subscribers, then over a phase with 100 SubscribeSessions streams.
 * 2. Latency (the second phase): per delivery, from the AppendEvents acknowledgement to its
 *    arrival at the client (clamped at 0: a delivery may arrive before the ack), for the feed's
 *    `appended` items (100 streams) and the per-session streams' events; p50 and p99 of each and
 *    the ratio of the p99s (target: under 2x); and per feed delivery, how long after the
 *    per-session stream's delivery of the same append it arrived (what the feed adds, steadier
 *    than either latency on a loaded machine).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import pg from 'pg';
import { Worker } from 'node:worker_threads';
import { startServer } from '../src/main.js';
import type { FeedClientsData } from './feed-clients.js';
import { findPgBin, startCluster, type TestCluster } from '../test/support/pg-cluster.js';
import { SessionServiceClient } from '../gen/palimpsest/v1/service.js';
import type { EventInput } from '../gen/palimpsest/v1/event.js';

const quick = process.argv.includes('--quick');
const dbArg = process.argv.indexOf('--db');
const argNum = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Math.max(1, Number(process.argv[i + 1])) : dflt;
};

const replicas = process.argv.includes('--replicas');
/** Feed subscribers ask for several changes per message (SubscribeSessionsRequest.batch); --no-batch: one per message. */
const BATCH = !process.argv.includes('--no-batch');
const SESSIONS = 100;
// --replicas measures the hint path, not fan-out throughput: a lighter default load.
const FEED_SUBSCRIBERS = argNum('--feed-subscribers', replicas ? 10 : 100);
const CHANNELS = 10;
const RATE = argNum('--rate', replicas ? 200 : 1000);
const TICK_MS = 10;
const PHASE_SECONDS = quick ? 2 : 5;
const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg >= 0 ? Math.max(1, Number(process.argv[runsArg + 1])) : quick ? 1 : 5;

/** Milliseconds, comparable with the worker's arrival times (performance.timeOrigin differs per thread). */
const now = (): number => performance.timeOrigin + performance.now();
const pct = (sorted: number[], p: number): number => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!);

function userMessage(i: number): EventInput {
  const data = { id: `m${i}`, role: 'user', content: [{ type: 'text', text: `message ${i} `.padEnd(160, '.') }], source: { kind: 'user' } };
  return { type: 'user/message', data: { kind: { $case: 'json', value: JSON.stringify(data) } }, surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: undefined, ignorable: false };
}

type Arrival = [string, number];

type WorkerReport =
  | { type: 'ready' }
  | { type: 'feedReady' }
  | { type: 'arrivals'; streamArrivals: Arrival[]; feedArrivals: Arrival[]; feedMessages: number };

interface RunResult {
  cpu0: number;
  cpu100: number;
  rate0: number;
  rate100: number;
  feedAck: number[];
  streamAck: number[];
  feedSend: number[];
  streamSend: number[];
  /** Per feed delivery: its arrival minus the per-session stream's arrival of the same append (what the feed adds). */
  feedBehind: number[];
  /** Feed messages with changes, and `appended` changes, received while measuring. */
  feedMessages: number;
  feedDeliveries: number;
}

async function freshDb(dir: string, cluster: TestCluster | undefined, n: number): Promise<string> {
  if (dbArg >= 0) return process.argv[dbArg + 1]!;
  if (cluster === undefined) return join(dir, `feed-${n}.db`);
  const admin = new pg.Client({ connectionString: cluster.adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE feedbench${n}`);
  await admin.end();
  return cluster.adminUrl.replace(/\/postgres$/, `/feedbench${n}`);
}

function latencies(arrivals: Arrival[], from: Map<string, number>, clamp: boolean): number[] {
  const out: number[] = [];
  for (const [k, t] of arrivals) {
    const a = from.get(k);
    if (a !== undefined) out.push(clamp ? Math.max(0, t - a) : t - a);
  }
  return out.sort((x, y) => x - y);
}

/**
 * One run: 100 sessions with a SubscribeEvents stream each on `writeAddr`'s server, appends at
 * 1,000/s through it; phase 1 without feed subscribers, phase 2 with 100 on `feedAddr`'s server.
 */
async function runOnce(writeAddr: string, feedAddr: string): Promise<RunResult> {
  const opts = { 'grpc.use_local_subchannel_pool': 1 };
  const writer = new SessionServiceClient(writeAddr, credentials.createInsecure(), opts);
  const ids = Array.from({ length: SESSIONS }, (_, i) => `feed-bench-${Date.now()}-${i}`);
  for (const id of ids) await new Promise<void>((res, rej) => writer.createSession({ sessionId: id, labels: {}, strict: false }, (e) => (e ? rej(e) : res())));

  // `${session} ${seq}` -> when its AppendEvents was sent / acknowledged.
  const sent = new Map<string, number>();
  const acked = new Map<string, number>();

  // The subscribers run in a worker thread (feed-clients.ts): their decoding is the clients', not the server's.
  const data: FeedClientsData = { streamAddr: writeAddr, feedAddr, ids, feedSubscribers: FEED_SUBSCRIBERS, channels: CHANNELS, batch: BATCH };
  // Node 20 does not carry the main thread's module hooks (tsx) into a worker: register them there.
  const boot = `import('tsx/esm/api').then((api) => { api.register(); return import(${JSON.stringify(new URL('./feed-clients.ts', import.meta.url).href)}); })`;
  const worker = new Worker(boot, { eval: true, workerData: data });
  const signals = new Map<string, (m: WorkerReport) => void>();
  worker.on('message', (m: WorkerReport) => signals.get(m.type)?.(m));
  worker.on('error', (e) => console.error(e));
  const reported = (type: WorkerReport['type']): Promise<WorkerReport> => new Promise((resolve) => signals.set(type, resolve));
  const ready = reported('ready');
  await ready;

  const next = new Map<string, number>(ids.map((id) => [id, 0]));
  let turn = 0;
  let appends = 0;
  let inFlight = 0;
  const appendOne = (): void => {
    const id = ids[turn++ % SESSIONS]!;
    const seq = next.get(id)!;
    next.set(id, seq + 1);
    inFlight++;
    const key = `${id} ${seq}`;
    sent.set(key, now());
    writer.appendEvents({ sessionId: id, events: [userMessage(seq)], idempotencyKey: '' }, (e) => {
      inFlight--;
      if (e) throw e;
      appends++;
      acked.set(key, now());
    });
  };
  const phase = async (): Promise<{ cpuPerAppendUs: number; appendsPerSec: number }> => {
    const startAppends = appends;
    const cpu0 = process.cpuUsage();
    const t0 = now();
    const perTick = (RATE * TICK_MS) / 1000;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        // Catch up on timer drift: the rate is per wall-clock time.
        const due = Math.floor(((now() - t0) / 1000) * RATE) - (appends - startAppends) - inFlight;
        for (let i = 0; i < Math.min(due, perTick * 3); i++) appendOne();
        if (now() - t0 >= PHASE_SECONDS * 1000) {
          clearInterval(timer);
          resolve();
        }
      }, TICK_MS);
    });
    while (inFlight > 0) await new Promise((r) => setTimeout(r, 5));
    const cpu = process.cpuUsage(cpu0);
    const n = appends - startAppends;
    return { cpuPerAppendUs: (cpu.user + cpu.system) / n, appendsPerSec: n / ((now() - t0) / 1000) };
  };

  // Phase 1: no feed subscribers.
  const without = await phase();

  // Phase 2: the feed subscribers from now on.
  const feedReady = reported('feedReady');
  worker.postMessage('feed');
  await feedReady;
  worker.postMessage('measure');
  const withFeed = await phase();
  await new Promise((r) => setTimeout(r, 500));
  const collected = reported('arrivals');
  worker.postMessage('collect');
  const { streamArrivals, feedArrivals, feedMessages } = await collected as Extract<WorkerReport, { type: 'arrivals' }>;
  await worker.terminate();
  writer.close();
  return {
    cpu0: without.cpuPerAppendUs, cpu100: withFeed.cpuPerAppendUs, rate0: without.appendsPerSec, rate100: withFeed.appendsPerSec,
    feedAck: latencies(feedArrivals, acked, true), streamAck: latencies(streamArrivals, acked, true),
    feedSend: latencies(feedArrivals, sent, false), streamSend: latencies(streamArrivals, sent, false),
    feedBehind: latencies(feedArrivals, new Map(streamArrivals), false),
    feedMessages, feedDeliveries: feedArrivals.length,
  };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : String(x));
const ratio = (a: number, b: number): number => (b > 0 ? a / b : NaN);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-feed-bench-'));
  let cluster: TestCluster | undefined;
  if (process.argv.includes('--postgres') || (replicas && dbArg < 0)) {
    const bin = findPgBin();
    if (bin === undefined) throw new Error('PostgreSQL is not installed');
    cluster = await startCluster(bin);
  }
  const storeName = cluster !== undefined || dbArg >= 0 ? 'PostgreSQL' : 'SQLite (file, durability full)';
  try {
    if (replicas) {
      await crossReplica(dir, cluster);
      return;
    }
    const results: RunResult[] = [];
    for (let r = 0; r < RUNS; r++) {
      const db = await freshDb(dir, cluster, r);
      const srv = await startServer({ listen: '127.0.0.1:0', db, logLevel: 'silent', heartbeatMs: 60_000 });
      try {
        results.push(await runOnce(srv.address, srv.address));
      } finally {
        await srv.shutdown();
      }
    }
    console.log(`store: ${storeName}; ${RUNS} run(s), each a fresh server and database; 100 sessions, ${RATE} appends/s, ${FEED_SUBSCRIBERS} feed subscribers in phase 2 (${BATCH ? 'batched delivery' : 'one change per message'})\n`);
    console.log('| run | appends/s 0 / 100 feed subs | CPU/append µs 0 / 100 | feed p50 / p99 from ack (ms) | stream p50 / p99 from ack (ms) | feed p99 / stream p99 from send (ms) | ratio from ack | ratio from send | feed behind the stream p50 / p99 (ms) |');
    console.log('|---|---|---|---|---|---|---|---|---|');
    const rows = results.map((r) => ({
      feedAck99: pct(r.feedAck, 0.99), streamAck99: pct(r.streamAck, 0.99), feedSend99: pct(r.feedSend, 0.99), streamSend99: pct(r.streamSend, 0.99),
    }));
    results.forEach((r, i) => {
      const x = rows[i]!;
      console.log(`| ${i + 1} | ${r.rate0.toFixed(0)} / ${r.rate100.toFixed(0)} | ${r.cpu0.toFixed(0)} / ${r.cpu100.toFixed(0)} | ${f2(pct(r.feedAck, 0.5))} / ${f2(x.feedAck99)} | ${f2(pct(r.streamAck, 0.5))} / ${f2(x.streamAck99)} | ${f2(x.feedSend99)} / ${f2(x.streamSend99)} | ${f2(ratio(x.feedAck99, x.streamAck99))} | ${f2(ratio(x.feedSend99, x.streamSend99))} | ${f2(pct(r.feedBehind, 0.5))} / ${f2(pct(r.feedBehind, 0.99))} |`);
    });
    const m = {
      rate0: median(results.map((r) => r.rate0)), rate100: median(results.map((r) => r.rate100)),
      cpu0: median(results.map((r) => r.cpu0)), cpu100: median(results.map((r) => r.cpu100)),
      feedAck99: median(rows.map((x) => x.feedAck99)), streamAck99: median(rows.map((x) => x.streamAck99)),
      feedSend99: median(rows.map((x) => x.feedSend99)), streamSend99: median(rows.map((x) => x.streamSend99)),
      ratioAck: median(rows.map((x) => ratio(x.feedAck99, x.streamAck99)).filter(Number.isFinite)),
      ratioSend: median(rows.map((x) => ratio(x.feedSend99, x.streamSend99))),
    };
    console.log(`| **median** | ${m.rate0.toFixed(0)} / ${m.rate100.toFixed(0)} | ${m.cpu0.toFixed(0)} / ${m.cpu100.toFixed(0)} | – / ${f2(m.feedAck99)} | – / ${f2(m.streamAck99)} | ${f2(m.feedSend99)} / ${f2(m.streamSend99)} | ${f2(m.ratioAck)} | ${f2(m.ratioSend)} | – / ${f2(median(results.map((r) => pct(r.feedBehind, 0.99))))} |`);
    console.log(`\nfeed \`appended\` changes per message received: ${results.map((r) => f2(ratio(r.feedDeliveries, r.feedMessages))).join(', ')} (per run)`);
    const store = storeName.startsWith('PostgreSQL') ? 'postgres' : 'sqlite';
    console.log(`HEADLINE ${JSON.stringify({
      id: `feed-p99-ratio-${store}`, label: `feed delivery p99 / per-session stream p99 from ack, ${storeName}, ${BATCH ? 'batched' : 'one change per message'} (median of ${RUNS})`,
      value: Number.isFinite(m.ratioAck) ? `${f2(m.ratioAck)}x (${f2(m.feedAck99)} vs ${f2(m.streamAck99)} ms)` : null, target: '< 2x', met: m.ratioAck < 2,
      detail: `from the append being sent: ${f2(m.ratioSend)}x (${f2(m.feedSend99)} vs ${f2(m.streamSend99)} ms)`,
    })}`);
    console.log(`HEADLINE ${JSON.stringify({
      id: `feed-append-cost-${store}`, label: `CPU per append with ${FEED_SUBSCRIBERS} feed subscribers / with 0, ${storeName} (whole process, median of ${RUNS})`,
      value: `${f2(ratio(m.cpu100, m.cpu0))}x (${m.cpu100.toFixed(0)} vs ${m.cpu0.toFixed(0)} µs)`, target: 'none (reported)',
    })}`);
  } finally {
    cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Cross-replica feed delivery on PostgreSQL: hints (NOTIFY) vs the 200 ms poll, RUNS runs each, interleaved. */
async function crossReplica(dir: string, cluster: TestCluster | undefined): Promise<void> {
  const out: { hints: boolean; feed99: number; feed50: number; stream99: number }[] = [];
  let n = 100;
  for (let r = 0; r < RUNS; r++) {
    for (const hints of [false, true]) {
      const db = await freshDb(dir, cluster, n++);
      const a = await startServer({ listen: '127.0.0.1:0', db, logLevel: 'silent', heartbeatMs: 60_000, feedHints: hints });
      const b = await startServer({ listen: '127.0.0.1:0', db, logLevel: 'silent', heartbeatMs: 60_000, feedHints: hints });
      try {
        const res = await runOnce(a.address, b.address);
        out.push({ hints, feed99: pct(res.feedAck, 0.99), feed50: pct(res.feedAck, 0.5), stream99: pct(res.streamAck, 0.99) });
      } finally {
        await b.shutdown();
        await a.shutdown();
      }
    }
  }
  console.log(`store: PostgreSQL, two servers on one database: appends (${RATE}/s) and per-session streams on A, ${FEED_SUBSCRIBERS} feed subscribers on B; ${RUNS} run(s) per mode, interleaved\n`);
  console.log('| run | feed on | cross-replica feed p50 / p99 from ack (ms) | per-session stream p99 on A (ms) |');
  console.log('|---|---|---|---|');
  out.forEach((o, i) => console.log(`| ${Math.floor(i / 2) + 1} | ${o.hints ? 'NOTIFY hints (5 s safety poll)' : '200 ms poll'} | ${f2(o.feed50)} / ${f2(o.feed99)} | ${f2(o.stream99)} |`));
  const poll = median(out.filter((o) => !o.hints).map((o) => o.feed99));
  const notify = median(out.filter((o) => o.hints).map((o) => o.feed99));
  console.log(`| **median** | poll / NOTIFY | p99 ${f2(poll)} / ${f2(notify)} | |`);
  console.log(`HEADLINE ${JSON.stringify({
    id: 'feed-cross-replica-p99', label: `cross-replica feed delivery p99, NOTIFY / 200 ms poll (PostgreSQL, median of ${RUNS})`,
    value: `${f2(ratio(notify, poll))}x (${f2(notify)} vs ${f2(poll)} ms)`, target: 'none (reported)',
  })}`);
}

void main().then(() => process.exit(0), (e: unknown) => {
  console.error(e);
  process.exit(1);
});
