/**
 * Session feed benchmark (issue #35): delivery latency of SubscribeSessions against the
 * per-session stream (SubscribeEvents) in the same run, and the cost of an append with 0 and
 * with 100 feed subscribers.
 *
 *   npx tsx bench/feed.bench.ts [--quick] [--postgres | --db postgres://...]
 *
 * One server (SQLite file with durability full by default; `--postgres` a throwaway PostgreSQL
 * cluster of its own, test/support/pg-cluster.ts; `--db` a PostgreSQL URL), 100
 * sessions, one SubscribeEvents stream per session, appends of one event at 1,000 events/s spread
 * over the sessions (10 appends every 10 ms, round robin).
 * 1. Cost: process CPU time (user + system, every thread; clients share the process) per append
 *    over a phase without feed subscribers, then over a phase with 100 SubscribeSessions streams.
 * 2. Latency (the second phase): per delivery, from the AppendEvents acknowledgement to its
 *    arrival at the client (clamped at 0: a delivery may arrive before the ack), for the feed's
 *    `appended` items (100 streams) and the per-session streams' events; p50 and p99 of each and
 *    the ratio of the p99s (target: under 2x).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import pg from 'pg';
import { startServer } from '../src/main.js';
import { findPgBin, startCluster, type TestCluster } from '../test/support/pg-cluster.js';
import {
  SessionServiceClient, SubscribeEventsRequest, SubscribeSessionsRequest, type SubscribeEventsResponse, type SubscribeSessionsResponse,
} from '../gen/palimpsest/v1/service.js';
import type { EventInput } from '../gen/palimpsest/v1/event.js';

const quick = process.argv.includes('--quick');
const dbArg = process.argv.indexOf('--db');
const SESSIONS = 100;
const FEED_SUBSCRIBERS = 100;
const CHANNELS = 10;
const RATE = 1000;
const TICK_MS = 10;
const PHASE_SECONDS = quick ? 2 : 5;

const now = (): number => performance.now();
const pct = (sorted: number[], p: number): number => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!);

function userMessage(i: number): EventInput {
  const data = { id: `m${i}`, role: 'user', content: [{ type: 'text', text: `message ${i} `.padEnd(160, '.') }], source: { kind: 'user' } };
  return { type: 'user/message', data: { kind: { $case: 'json', value: JSON.stringify(data) } }, surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: undefined, ignorable: false };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-feed-bench-'));
  let cluster: TestCluster | undefined;
  let db = dbArg >= 0 ? process.argv[dbArg + 1]! : join(dir, 'feed.db');
  if (process.argv.includes('--postgres')) {
    const bin = findPgBin();
    if (bin === undefined) throw new Error('PostgreSQL is not installed');
    cluster = await startCluster(bin);
    const admin = new pg.Client({ connectionString: cluster.adminUrl });
    await admin.connect();
    await admin.query('CREATE DATABASE feedbench');
    await admin.end();
    db = cluster.adminUrl.replace(/\/postgres$/, '/feedbench');
  }
  const srv = await startServer({ listen: '127.0.0.1:0', db, logLevel: 'silent', heartbeatMs: 60_000 });
  const clients = Array.from({ length: CHANNELS }, () => new SessionServiceClient(srv.address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
  const writer = clients[0]!;
  const ids = Array.from({ length: SESSIONS }, (_, i) => `feed-bench-${Date.now()}-${i}`);
  for (const id of ids) await new Promise<void>((res, rej) => writer.createSession({ sessionId: id, labels: {}, strict: false }, (e) => (e ? rej(e) : res())));

  // `${session} ${seq}` -> when its AppendEvents was acknowledged.
  const acked = new Map<string, number>();
  const streamArrivals: [string, number][] = [];
  const feedArrivals: [string, number][] = [];
  let measuring = false;

  let streamsUp = 0;
  for (let s = 0; s < SESSIONS; s++) {
    const id = ids[s]!;
    const st = clients[s % CHANNELS]!.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: id }));
    st.on('data', (m: SubscribeEventsResponse) => {
      if (m.kind?.$case === 'caughtUp') streamsUp++;
      if (m.kind?.$case === 'event' && measuring) streamArrivals.push([`${id} ${m.kind.value.seq}`, now()]);
    });
    st.on('error', () => undefined);
  }
  while (streamsUp < SESSIONS) await new Promise((r) => setTimeout(r, 10));

  const next = new Map<string, number>(ids.map((id) => [id, 0]));
  let turn = 0;
  let appends = 0;
  let inFlight = 0;
  const appendOne = (): void => {
    const id = ids[turn++ % SESSIONS]!;
    const seq = next.get(id)!;
    next.set(id, seq + 1);
    inFlight++;
    writer.appendEvents({ sessionId: id, events: [userMessage(seq)], idempotencyKey: '' }, (e) => {
      inFlight--;
      if (e) throw e;
      appends++;
      acked.set(`${id} ${seq}`, now());
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

  // Phase 2: 100 feed subscribers from now on.
  let feedUp = 0;
  for (let f = 0; f < FEED_SUBSCRIBERS; f++) {
    const st = clients[f % CHANNELS]!.subscribeSessions(SubscribeSessionsRequest.fromPartial({ fromNow: true }));
    st.on('data', (m: SubscribeSessionsResponse) => {
      if (m.kind?.$case === 'caughtUp') feedUp++;
      if (m.kind?.$case === 'change' && measuring && m.kind.value.kind === 4) feedArrivals.push([`${m.kind.value.sessionId} ${m.kind.value.headSeq}`, now()]);
    });
    st.on('error', () => undefined);
  }
  while (feedUp < FEED_SUBSCRIBERS) await new Promise((r) => setTimeout(r, 10));
  measuring = true;
  const withFeed = await phase();
  await new Promise((r) => setTimeout(r, 500));
  measuring = false;

  const latencies = (arrivals: [string, number][]): number[] => {
    const out: number[] = [];
    for (const [k, t] of arrivals) {
      const a = acked.get(k);
      if (a !== undefined) out.push(Math.max(0, t - a));
    }
    return out.sort((x, y) => x - y);
  };
  const feed = latencies(feedArrivals);
  const stream = latencies(streamArrivals);
  const rows = [
    ['store', db.startsWith('postgres') ? 'PostgreSQL' : 'SQLite (file, durability full)'],
    ['appends/s (target 1,000), without / with feed subscribers', `${without.appendsPerSec.toFixed(0)} / ${withFeed.appendsPerSec.toFixed(0)}`],
    ['CPU per append, 0 feed subscribers (µs, whole process)', without.cpuPerAppendUs.toFixed(0)],
    ['CPU per append, 100 feed subscribers (µs, whole process)', withFeed.cpuPerAppendUs.toFixed(0)],
    ['feed deliveries measured', String(feed.length)],
    ['feed delivery after ack p50 / p99 (ms)', `${pct(feed, 0.5).toFixed(2)} / ${pct(feed, 0.99).toFixed(2)}`],
    ['per-session stream deliveries measured', String(stream.length)],
    ['per-session stream after ack p50 / p99 (ms)', `${pct(stream, 0.5).toFixed(2)} / ${pct(stream, 0.99).toFixed(2)}`],
    ['feed p99 / stream p99 (target < 2)', (pct(feed, 0.99) / pct(stream, 0.99)).toFixed(2)],
  ];
  console.log('| measure | value |\n|---|---|');
  for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  const ratio = pct(feed, 0.99) / pct(stream, 0.99);
  console.log(`HEADLINE ${JSON.stringify({ id: 'feed-p99-ratio', label: 'feed delivery p99 / per-session stream p99', value: Number(ratio.toFixed(2)), target: 2, met: ratio < 2 })}`);
  for (const c of clients) c.close();
  await srv.shutdown();
  cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
}

void main().then(() => process.exit(0), (e: unknown) => {
  console.error(e);
  process.exit(1);
});
