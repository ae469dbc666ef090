/**
 * PostgreSQL store benchmarks (issue #13): replicas of the real server (`palimpsest serve --db
 * postgresql://...`, child processes) on a throwaway cluster of their own (test/support/pg-cluster.ts:
 * initdb in a temp dir, fsync on, synchronous_commit on), every figure next to its ceiling
 * measured in the same run.
 *
 *   npx tsx bench/postgres.bench.ts [--quick]      (or node bench/run.mjs --only postgres)
 *
 * 1. Appends vs the driver ceiling. Ceiling: the very write the store issues for an append (one
 *    call of the schema's `append` function: row lock on the session, head + writer check,
 *    events insert, head/counters update, one implicit transaction) sent straight through `pg`
 *    from this process as a named prepared statement (as the store sends it) with the same pool
 *    size as a server (10) and the same number in flight
 *    over the same number of sessions (one in flight per session: each caller knows its head, so
 *    no call conflicts). Palimpsest: AppendEvents through gRPC to one replica, same concurrency.
 *    Single-event appends at 64 in flight over 64 sessions, and 100-event batches at 16 in flight
 *    over 16 sessions. Also single-event appends at 64 in flight on ONE session. The store sends
 *    the appends queued while its append transactions run (any sessions) together in one
 *    transaction (group commit, src/store/postgres/group-commit.ts); the driver ceiling sends one
 *    transaction per append, the way a plain application would. Both do the same durable work per
 *    append (synchronous_commit on, the cluster's defaults, the same function and checks); the
 *    table also shows the transactions committed per append on each side (pg_stat_database).
 * 2. Cross-replica fan-out: 100 SubscribeEvents streams on one session, appends (one event, 50/s)
 *    through replica A; streams on A (same replica) vs on B (cross-replica: NOTIFY hint, then the
 *    subscriptions read the store by seq). Latency per delivery from the moment AppendEvents is
 *    sent (the ratio target: on the same replica a delta is published before the ack, so
 *    ack -> delivery is ~0 there), and from the acknowledgement (clamped at 0).
 * 3. Throughput 1 -> 3 replicas: single-event appends, 64 in flight over 64 sessions, the load
 *    generator spreading sessions round-robin over the replicas.
 * Every figure is the median of RUNS runs (min-max), configurations interleaved run by run. The
 * batch phases start with the search follower idle (settle()): each pays for indexing its own rows.
 */
import { randomUUID } from 'node:crypto';
import { cpus } from 'node:os';
import { credentials } from '@grpc/grpc-js';
import pg from 'pg';
import { SessionServiceClient } from '../gen/palimpsest/v1/service.js';
import { openSubscribers } from './pg-subscribers.js';
import type { EventInput } from '../gen/palimpsest/v1/event.js';
import { findPgBin, startCluster } from '../test/support/pg-cluster.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../test/support/server-process.js';

const quick = process.argv.includes('--quick');
const RUNS = quick ? 1 : 5;
const DURATION_MS = quick ? 800 : 2500;
const WARMUP_MS = quick ? 200 : 500;
const FANOUT_MS = quick ? 1500 : 4000;
const SUBSCRIBERS = 100;
const POOL = 10;

interface Stat {
  median: number;
  min: number;
  max: number;
}
function stat(values: number[]): Stat {
  const s = [...values].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)]!, min: s[0]!, max: s[s.length - 1]! };
}
const fmt = (n: number): string => (n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(n >= 10 ? 1 : 2));
const fmtStat = (s: Stat, unit = ''): string => `${fmt(s.median)}${unit} (${fmt(s.min)}-${fmt(s.max)})`;
function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const TICK_DATA = JSON.stringify({ n: 1, text: 'tick' });
const tick: EventInput = { type: 'bench/tick', data: { kind: { $case: 'json', value: TICK_DATA } }, sourceEventSeqs: undefined, surfaceOp: undefined, ignorable: false };

type Client = SessionServiceClient;
function connect(address: string): Client {
  return new SessionServiceClient(address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
}
function unary<Req, Res>(fn: (req: Req, cb: (err: Error | null, res: Res) => void) => unknown, req: Req): Promise<Res> {
  return new Promise((resolve, reject) => fn(req, (err, res) => (err ? reject(err) : resolve(res))));
}
const append = (c: Client, sessionId: string, events: EventInput[]) =>
  unary(c.appendEvents.bind(c) as never, { sessionId, events, idempotencyKey: '' } as never) as Promise<{ seqs: number[] }>;
const create = (c: Client, sessionId: string) => unary(c.createSession.bind(c) as never, { sessionId, labels: {}, strict: false } as never);

/** Runs `loop(i)` on `inFlight` workers for the duration; returns completed operations per second (after warm-up). */
async function measure(inFlight: number, op: (worker: number) => Promise<void>): Promise<number> {
  const start = performance.now();
  const warm = start + WARMUP_MS;
  const end = warm + DURATION_MS;
  let counted = 0;
  await Promise.all(Array.from({ length: inFlight }, async (_, w) => {
    for (;;) {
      const t = performance.now();
      if (t >= end) return;
      await op(w);
      const done = performance.now();
      if (done >= warm && done < end) counted++;
    }
  }));
  return counted / (DURATION_MS / 1000);
}

/** Creates `n` fresh sessions through `c`; returns their ids. */
async function freshSessions(c: Client, n: number, tag: string): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${tag}-${randomUUID().slice(0, 8)}-${i}`);
  for (let i = 0; i < ids.length; i += 16) await Promise.all(ids.slice(i, i + 16).map((id) => create(c, id)));
  return ids;
}

/** The raw ceiling: the store's append function through the driver, one in flight per session. */
async function rawAppends(pool: pg.Pool, ids: string[], perCall: number): Promise<number> {
  const heads = await pool.query<{ id: string; next_seq: string; writer: string }>('SELECT id, next_seq, writer FROM palimpsest.sessions WHERE id = ANY($1)', [ids]);
  const state = new Map(heads.rows.map((r) => [r.id, { next: Number(r.next_seq), writer: r.writer }]));
  const bytes = Buffer.byteLength(TICK_DATA) * perCall;
  const sql = 'SELECT * FROM palimpsest.append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)';
  return measure(ids.length, async (w) => {
    const id = ids[w]!;
    const s = state.get(id)!;
    const seqs = Array.from({ length: perCall }, (_, i) => s.next + i);
    const writer = randomUUID();
    const r = await pool.query<{ outcome: string }>({ name: 'raw_append', text: sql, values: [
      id, s.next, s.writer, writer, seqs, seqs.map(() => 'bench/tick'), seqs.map(() => Date.now()), seqs.map(() => TICK_DATA),
      seqs.map(() => null), seqs.map(() => null), seqs.map(() => null), bytes, null, null, 0, 0, Date.now(),
    ] });
    if (r.rows[0]!.outcome !== 'appended') throw new Error(`raw append ${r.rows[0]!.outcome}`);
    s.next += perCall;
    s.writer = writer;
  });
}

/**
 * Committed transactions in the bench database per append while `run` appends to the fresh
 * sessions `ids` (pg_stat_database.xact_commit: every statement the server sends is one, the
 * appends' and everything else: NOTIFY hints, feed and head reads), and the run's result.
 */
async function perAppend(pool: pg.Pool, ids: string[], run: () => Promise<number>): Promise<{ result: number; xacts: number }> {
  const commits = async (): Promise<number> => {
    // The cumulative statistics are flushed by each backend at most once a second.
    await new Promise((r) => setTimeout(r, 1100));
    await pool.query('SELECT pg_stat_clear_snapshot()');
    return Number((await pool.query<{ n: string }>('SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0]!.n);
  };
  const before = await commits();
  const result = await run();
  const after = await commits();
  const calls = Number((await pool.query<{ n: string }>('SELECT sum(next_seq) AS n FROM palimpsest.sessions WHERE id = ANY($1)', [ids])).rows[0]!.n);
  return { result, xacts: (after - before) / Math.max(1, calls) };
}

/**
 * Waits (at most 60 s) until the search index's follower has indexed every feed record, so that
 * each measured phase starts with the follower idle: it indexes what a phase appended (the
 * ceiling's rows as well as Palimpsest's) partly during the phase and the rest afterwards, and
 * without this the next phase (Palimpsest's, right after the ceiling's) paid for the indexing of
 * the previous one's rows (issue #37: 591 of 806 batches still unindexed after a ceiling phase).
 */
async function settle(pool: pg.Pool): Promise<void> {
  const deadline = performance.now() + 60_000;
  while (performance.now() < deadline) {
    const r = await pool.query<{ lag: string | null }>(
      'SELECT sum(h.position - coalesce(f.position, 0)) AS lag FROM palimpsest.feed_heads h LEFT JOIN palimpsest.search_follow f USING (tenant)');
    if (Number(r.rows[0]!.lag ?? 0) <= 0) return;
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** Palimpsest: AppendEvents over gRPC, worker w appending to session ids[w % ids.length] through clients[w % clients.length]. */
function palimpsestAppends(clients: Client[], ids: string[], inFlight: number, perCall: number): Promise<number> {
  const events = Array.from({ length: perCall }, () => tick);
  return measure(inFlight, async (w) => {
    await append(clients[w % clients.length]!, ids[w % ids.length]!, events);
  });
}

/** Fan-out latency: SUBSCRIBERS streams on `subClient`, appends at 50/s through `appendClient`; ack -> delivery, ms. */
async function fanout(appendClient: Client, subClient: Client, tag: string): Promise<{ p50: number; p99: number; sentP50: number; sentP99: number; deliveries: number }> {
  const [id] = await freshSessions(appendClient, 1, tag);
  const { streams, arrivals } = await openSubscribers(subClient, id!, SUBSCRIBERS);
  const acks = new Map<number, number>();
  const sent = new Map<number, number>();
  const end = performance.now() + FANOUT_MS;
  let n = 0;
  while (performance.now() < end) {
    const sentAt = performance.now();
    const due = sentAt + 20;
    const r = await append(appendClient, id!, [tick]);
    acks.set(r.seqs[0]!, performance.now());
    sent.set(r.seqs[0]!, sentAt);
    n++;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
  }
  const last = n - 1;
  // Let the last deliveries arrive (bounded).
  const deadline = performance.now() + 5000;
  while (arrivals.some((a) => !a.has(last)) && performance.now() < deadline) await new Promise((res) => setTimeout(res, 10));
  const lat: number[] = [];
  const fromSend: number[] = [];
  for (const a of arrivals) for (const [seq, ack] of acks) {
    const at = a.get(seq);
    lat.push(at === undefined ? 5000 : Math.max(0, at - ack));
    fromSend.push(at === undefined ? 5000 : at - sent.get(seq)!);
  }
  for (const s of streams) s.cancel();
  lat.sort((x, y) => x - y);
  fromSend.sort((x, y) => x - y);
  return { p50: percentile(lat, 50), p99: percentile(lat, 99), sentP50: percentile(fromSend, 50), sentP99: percentile(fromSend, 99), deliveries: lat.length };
}

async function main(): Promise<void> {
  const bin = findPgBin();
  if (bin === undefined) throw new Error('PostgreSQL is not installed: run .ci/system-deps');
  ensureBuilt();
  const cluster = await startCluster(bin);
  const admin = new pg.Client({ connectionString: cluster.adminUrl });
  await admin.connect();
  await admin.query('CREATE DATABASE bench');
  await admin.end();
  const url = cluster.adminUrl.replace(/\/postgres$/, '/bench');
  const procs: ServerProcess[] = [];
  try {
    for (let i = 0; i < 3; i++) procs.push(await spawnServer(['--db', url], 30_000));
    const clients = procs.map((p) => connect(p.address));
    const pool = new pg.Pool({ connectionString: url, max: POOL });
    const r = {
      raw1: [] as number[], pal1: [] as number[], rawXacts: [] as number[], palXacts: [] as number[], raw100: [] as number[], pal100: [] as number[], hot: [] as number[],
      rep1: [] as number[], rep3: [] as number[], sameP50: [] as number[], sameP99: [] as number[], crossP50: [] as number[], crossP99: [] as number[],
      sameSentP50: [] as number[], sameSentP99: [] as number[], crossSentP50: [] as number[], crossSentP99: [] as number[],
    };
    for (let run = 0; run < RUNS; run++) {
      console.error(`run ${run + 1}/${RUNS}`);
      const rawIds = await freshSessions(clients[0]!, 64, 'raw1');
      const raw = await perAppend(pool, rawIds, () => rawAppends(pool, rawIds, 1));
      r.raw1.push(raw.result);
      r.rawXacts.push(raw.xacts);
      const palIds = await freshSessions(clients[0]!, 64, 'pal1');
      const pal = await perAppend(pool, palIds, () => palimpsestAppends([clients[0]!], palIds, 64, 1));
      r.pal1.push(pal.result);
      r.palXacts.push(pal.xacts);
      const raw100Ids = await freshSessions(clients[0]!, 16, 'raw100');
      await settle(pool);
      r.raw100.push((await rawAppends(pool, raw100Ids, 100)) * 100);
      const pal100Ids = await freshSessions(clients[0]!, 16, 'pal100');
      await settle(pool);
      r.pal100.push((await palimpsestAppends([clients[0]!], pal100Ids, 16, 100)) * 100);
      r.hot.push(await palimpsestAppends([clients[0]!], await freshSessions(clients[0]!, 1, 'hot'), 64, 1));
      r.rep1.push(r.pal1[r.pal1.length - 1]!);
      r.rep3.push(await palimpsestAppends(clients, await freshSessions(clients[0]!, 64, 'rep3'), 64, 1));
      const same = await fanout(clients[0]!, clients[0]!, 'same');
      const cross = await fanout(clients[0]!, clients[1]!, 'cross');
      r.sameP50.push(same.p50);
      r.sameP99.push(same.p99);
      r.crossP50.push(cross.p50);
      r.crossP99.push(cross.p99);
      r.sameSentP50.push(same.sentP50);
      r.sameSentP99.push(same.sentP99);
      r.crossSentP50.push(cross.sentP50);
      r.crossSentP99.push(cross.sentP99);
    }
    await pool.end();
    for (const c of clients) c.close();

    const s = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, stat(v)])) as Record<keyof typeof r, Stat>;
    const pct = (a: Stat, b: Stat): string => `${Math.round((100 * a.median) / b.median)}%`;
    console.log(`Machine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}; PostgreSQL ${bin}; ${RUNS} runs of ${DURATION_MS} ms (median, min-max)\n`);
    console.log('| measure | Palimpsest | ceiling (pg driver, same write) | ratio | target |');
    console.log('| --- | --- | --- | --- | --- |');
    console.log(`| single-event appends, 64 in flight, 64 sessions, 1 replica | ${fmtStat(s.pal1, '/s')} | ${fmtStat(s.raw1, '/s')} | ${pct(s.pal1, s.raw1)} | >= 60% |`);
    console.log(`| 100-event batches, 16 in flight, 16 sessions (events/s) | ${fmtStat(s.pal100, '/s')} | ${fmtStat(s.raw100, '/s')} | ${pct(s.pal100, s.raw100)} | >= 80% |`);
    console.log(`| transactions committed per single-event append (pg_stat_database, everything the process sends) | ${fmtStat(s.palXacts)} | ${fmtStat(s.rawXacts)} | | |`);
    console.log(`| single-event appends, 64 in flight, ONE session (grouped per session) | ${fmtStat(s.hot, '/s')} | ${fmtStat(s.raw1, '/s')} (64 sessions) | ${pct(s.hot, s.raw1)} | |`);
    console.log(`| single-event appends, 64 in flight, 64 sessions, 3 replicas | ${fmtStat(s.rep3, '/s')} | 1 replica: ${fmtStat(s.rep1, '/s')} | ${pct(s.rep3, s.rep1)} of 1 replica | |`);
    console.log('');
    const ratio = (a: Stat, b: Stat): string => (b.median > 0.001 ? `${(a.median / b.median).toFixed(1)}x` : 'n/a (same-replica figure is 0)');
    console.log(`| fan-out, ${SUBSCRIBERS} subscribers on one session, 50 appends/s | p50 | p99 | p99 cross / same | target |`);
    console.log('| --- | --- | --- | --- | --- |');
    console.log(`| same replica, AppendEvents sent -> delivery | ${fmtStat(s.sameSentP50, ' ms')} | ${fmtStat(s.sameSentP99, ' ms')} | | |`);
    console.log(`| cross-replica (A -> B), AppendEvents sent -> delivery | ${fmtStat(s.crossSentP50, ' ms')} | ${fmtStat(s.crossSentP99, ' ms')} | ${ratio(s.crossSentP99, s.sameSentP99)} | <= 2x |`);
    console.log(`| same replica, ack on A -> delivery (clamped at 0: deltas may precede the ack) | ${fmtStat(s.sameP50, ' ms')} | ${fmtStat(s.sameP99, ' ms')} | | |`);
    console.log(`| cross-replica, ack on A -> delivery on B | ${fmtStat(s.crossP50, ' ms')} | ${fmtStat(s.crossP99, ' ms')} | ${ratio(s.crossP99, s.sameP99)} | |`);
    const headline = (id: string, label: string, value: string, target: string, met: boolean): void =>
      console.log(`HEADLINE ${JSON.stringify({ id, label, value, target, met })}`);
    const x = (a: Stat, b: Stat, unit: string): string => `${(a.median / b.median).toFixed(2)}x (${Math.round(a.median).toLocaleString('en-US')} vs ${Math.round(b.median).toLocaleString('en-US')} ${unit})`;
    headline('pg-append', 'PG: single-event appends, 64 in flight, 64 sessions, vs node-postgres sending the same write (same run)', x(s.pal1, s.raw1, 'appends/s'), '>= 0.6x', s.pal1.median >= 0.6 * s.raw1.median);
    headline('pg-batch', 'PG: 100-event batches, 16 in flight, vs node-postgres sending the same write (same run)', x(s.pal100, s.raw100, 'events/s'), '>= 0.8x', s.pal100.median >= 0.8 * s.raw100.median);
    headline('pg-fanout', 'PG: cross-replica fan-out p99 vs same replica (AppendEvents sent -> delivery)', s.sameSentP99.median > 0.001 ? `${(s.crossSentP99.median / s.sameSentP99.median).toFixed(2)}x (${s.crossSentP99.median.toFixed(1)} vs ${s.sameSentP99.median.toFixed(1)} ms)` : ratio(s.crossSentP99, s.sameSentP99), '<= 2x', s.crossSentP99.median <= 2 * s.sameSentP99.median);
  } finally {
    for (const p of procs) p.proc.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    cluster.stop();
  }
}

await main();
