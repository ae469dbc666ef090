/**
 * Palimpsest next to a peer, on the same machine in the same run: Electric's Durable Streams, its
 * Node.js reference server `@durable-streams/server` (dev dependency, exact version pinned).
 *
 *   npx tsx bench/peer.bench.ts [--quick] [--sqlite-writer inline]        (normally via `npm run bench`)
 *
 * Palimpsest runs on its gRPC port (@grpc/grpc-js).
 *
 * Both servers run in their own processes (bench/server/child.ts, bench/server/peer-child.mjs),
 * both driven by h2load with the same event (~290 B: type `bench/tick` + 197 B of JSON data):
 * Palimpsest's AppendEvents over one HTTP/2 connection with N streams in flight (its clients'
 * shape), or its AppendStream (one stream, N batches in flight, driven by gRPC framing on bare
 * node:http2, as cheap per request as h2load: bench/server/append-stream-load.ts; the targets are on these rows), the peer's POST /<stream> (content-type application/json; a batch is a JSON array,
 * which it stores element by element) over N HTTP/1.1 connections, one request in flight each
 * (its protocol is HTTP/1.1; Node's http server has no h2c). Configurations alternate run by run
 * (A B A B ...), RUNS runs each, median (min-max); ratio = Palimpsest / peer.
 *
 * Pairs: in memory (Palimpsest `--db :memory:`, the peer without dataDir) for single events at
 * 16 and 64 in flight and 10- and 100-event batches at 16; durable (Palimpsest's SQLite store at
 * durability full, the peer's file store, both fdatasync before acknowledging) for 100-event
 * batches and single events at 16 in flight. The single-event in-memory rows also run a bare
 * grpc-js echo (bench/server/child.ts echo) the same way, each run next to the pair: the ceiling
 * of any server on grpc-js, so its ratio to the peer bounds Palimpsest's there.
 */
import { bundleServerChild, SERVER_NODE_FLAGS, sqliteWriterArg } from './server/bundle.js';
import { streamLoad, streamRequest } from './server/append-stream-load.js';
import v8 from 'node:v8';
v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { AppendEventsRequest, GetSessionRequest, GetSessionResponse } from '../gen/palimpsest/v1/service.js';
import type { EventInput } from '../gen/palimpsest/v1/event.js';

const quick = process.argv.includes('--quick');
const TRANSPORT = 'grpc-js';
/** --sqlite-writer inline: the durable runs write SQLite appends in the event loop (default: the writer thread). */
const WRITER = sqliteWriterArg(process.argv);
const transportFlag = [`--sqlite-writer=${WRITER}`];
/** The single-event rows' ceiling: a bare grpc-js echo server (child.ts echo). */
const ECHO_MODE = 'echo';
const ECHO_LABEL = 'bare grpc-js echo';
const RUNS = 5;
const DURATION = quick ? 0.4 : 1.5;
const WARMUP = quick ? 0.1 : 0.3;
const here = fileURLToPath(new URL('.', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'palimpsest-peer-bench-'));
const SERVICE = '/palimpsest.v1.SessionService/';

interface Stat { median: number; min: number; max: number }
function stat(values: number[]): Stat {
  const s = [...values].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)]!, min: s[0]!, max: s[s.length - 1]! };
}
const fmt = (n: number): string => (Number.isNaN(n) ? '–' : n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(n >= 10 ? 1 : 2));
const fmtStat = (s: Stat): string => `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;

interface Child { address: string; proc: ChildProcess; stop(): Promise<void> }
async function spawnChild(args: string[]): Promise<Child> {
  const proc = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = createInterface({ input: proc.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    rl.once('line', (l) => resolve((JSON.parse(l) as { port: number }).port));
    proc.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
  return {
    address: `127.0.0.1:${port}`, proc,
    stop: () => new Promise<void>((resolve) => {
      if (proc.exitCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
    }),
  };
}
let palimpsestChild: string[] = ['--import', 'tsx', join(here, 'server', 'child.ts')];
async function bundleChild(): Promise<void> {
  palimpsestChild = await bundleServerChild();
}

const TICK_DATA = JSON.stringify({ n: 1, text: 'The quick brown fox jumps over the lazy dog; '.repeat(4) });
const tick: EventInput = { type: 'bench/tick', data: { kind: { $case: 'json', value: TICK_DATA } }, sourceEventSeqs: undefined, surfaceOp: undefined, ignorable: false };
const peerEvent = `{"type":"bench/tick","data":${TICK_DATA}}`;
let fileNo = 0;
function file(bytes: Buffer): string {
  const path = join(root, `body${fileNo++}.bin`);
  writeFileSync(path, bytes);
  return path;
}
function grpcBody(sessionId: string, n: number): string {
  const msg = Buffer.from(AppendEventsRequest.encode({ sessionId, events: Array.from({ length: n }, () => tick), idempotencyKey: '' }).finish());
  const head = Buffer.alloc(5);
  head.writeUInt32BE(msg.length, 1);
  return file(Buffer.concat([head, msg]));
}
const peerBody = (n: number): string => file(Buffer.from(n === 1 ? peerEvent : `[${Array.from({ length: n }, () => peerEvent).join(',')}]`));

interface Run { rate: number; p50: number; p99: number; succeeded: number }
function h2load(args: string[], url: string, perRequest: number): Promise<Run> {
  const log = join(root, `h2load-${fileNo++}.log`);
  return new Promise((resolve, reject) => {
    const p = spawn('h2load', [...args, '-D', `${DURATION * 1000}ms`, `--warm-up-time=${WARMUP * 1000}ms`, `--log-file=${log}`, url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.on('exit', () => {
      const rps = /finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(out);
      const req = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out);
      if (!rps || !req) return reject(new Error(`h2load output not understood:\n${out}`));
      if (Number(req[5]) + Number(req[6]) > 0) return reject(new Error(`h2load: ${req[5]} failed, ${req[6]} errored requests (${url})\n${out}`));
      const entries = readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split('\t').map(Number));
      rmSync(log, { force: true });
      // A loop, not Math.min(...): a fast run logs more entries than a call may take arguments.
      const first = entries.reduce((m, e) => Math.min(m, e[0]!), Infinity);
      const lat = entries.filter((e) => e[0]! >= first + WARMUP * 1e6).map((e) => e[2]! / 1000).sort((a, b) => a - b);
      const pc = (p: number): number => lat[Math.min(lat.length - 1, Math.floor((lat.length * p) / 100))] ?? NaN;
      resolve({ rate: Number(rps[1]) * perRequest, p50: pc(50), p99: pc(99), succeeded: Number(req[4]) });
    });
    p.on('error', reject);
  });
}

function unary(address: string, method: string, body: Buffer): Promise<Buffer> {
  const c = new grpc.Client(address, grpc.credentials.createInsecure());
  const id = (b: Buffer): Buffer => b;
  return new Promise<Buffer>((resolve, reject) => c.makeUnaryRequest(SERVICE + method, id, id, body, (e, r) => (e ? reject(e) : resolve(r!)))).finally(() => c.close());
}
async function eventCount(address: string, id: string): Promise<number> {
  return GetSessionResponse.decode(await unary(address, 'GetSession', Buffer.from(GetSessionRequest.encode({ sessionId: id }).finish()))).session?.eventCount ?? 0;
}
async function peerCreate(address: string, path: string): Promise<void> {
  const r = await fetch(`http://${address}/${path}`, { method: 'PUT', headers: { 'content-type': 'application/json' } });
  if (r.status !== 201 && r.status !== 200) throw new Error(`peer PUT /${path}: ${r.status} ${await r.text()}`);
}

async function main(): Promise<void> {
  if (spawnSync('h2load', ['--version']).status !== 0) throw new Error('h2load not found: apt-get install -y nghttp2-client');
  const peerVersion = (JSON.parse(readFileSync(join(here, '..', 'node_modules', '@durable-streams', 'server', 'package.json'), 'utf8')) as { version: string }).version;
  console.error(`peer bench${quick ? ' (quick)' : ''}: @durable-streams/server ${peerVersion}, ${RUNS} alternating runs of ${DURATION}s, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  await bundleChild();
  const pm = await spawnChild([...palimpsestChild, 'palimpsest', ':memory:', 'full', ...transportFlag]);
  const pf = await spawnChild([...palimpsestChild, 'palimpsest', join(root, 'full.db'), 'full', ...transportFlag]);
  const dm = await spawnChild([...SERVER_NODE_FLAGS, join(here, 'server', 'peer-child.mjs'), 'memory']);
  const df = await spawnChild([...SERVER_NODE_FLAGS, join(here, 'server', 'peer-child.mjs'), 'file', join(root, 'peer-data')]);
  // The ceiling of the single-event rows: a bare node:http2 server (no gRPC library, no work) that
  // answers each request, driven the same way; Palimpsest cannot pass it on this transport.
  const he = await spawnChild([...palimpsestChild, ECHO_MODE]);
  const table: string[] = [];
  const headlines: { id: string; label: string; ratio: number; target: number; a: number; b: number }[] = [];
  try {
    const counts = new Map<Child, number>();
    for (const s of [pm, pf]) {
      await unary(s.address, 'CreateSession', Buffer.from('\n\x03one', 'latin1'));
      counts.set(s, 0);
    }
    for (const s of [dm, df]) await peerCreate(s.address, 'one');
    const grpcArgs = (m: number, body: string): string[] => ['-c', '1', '-m', String(m), '-d', body, '-H', 'content-type: application/grpc', '-H', 'te: trailers'];
    const peerArgs = (m: number, body: string): string[] => ['--h1', '-c', String(m), '-m', '1', '-d', body, '-H', 'content-type: application/json'];
    const palimpsest = async (s: Child, m: number, n: number, body: string): Promise<Run> => {
      const r = await h2load(grpcArgs(m, body), `http://${s.address}${SERVICE}AppendEvents`, n);
      // h2load cannot see grpc-status: the session must have grown by at least the measured requests.
      const now = await eventCount(s.address, 'one');
      if (now - counts.get(s)! < r.succeeded * n) throw new Error(`Palimpsest session grew by ${now - counts.get(s)!}, expected >= ${r.succeeded * n}`);
      counts.set(s, now);
      return r;
    };
    const peer = (s: Child, m: number, n: number, body: string): Promise<Run> => h2load(peerArgs(m, body), `http://${s.address}/one`, n);
    const echo = (m: number, n: number, body: string): Promise<Run> => h2load(grpcArgs(m, body), `http://${he.address}${SERVICE}AppendEvents`, n);

    const pairs: { id?: string; label: string; target: number; a: () => Promise<Run>; b: () => Promise<Run>; ceiling?: () => Promise<Run> }[] = [];
    const stream = (s: Child, m: number, n: number): (() => Promise<Run>) => {
      const request = streamRequest('one', tick, n);
      return async () => ({ ...(await streamLoad(s.address, request, n, m, WARMUP, DURATION)), succeeded: 0 });
    };
    for (const m of [16, 64]) pairs.push({ id: `1 event/request, ${m} in flight, in memory`, label: `AppendStream 1 event/batch, ${m} in flight, in memory`, target: 1.5, a: stream(pm, m, 1), b: ((b) => () => peer(dm, m, 1, b))(peerBody(1)), ceiling: ((b) => () => echo(m, 1, b))(grpcBody('one', 1)) });
    pairs.push({ label: 'AppendEvents (unary) 1 event/request, 64 in flight, in memory', target: 0, a: ((b) => () => palimpsest(pm, 64, 1, b))(grpcBody('one', 1)), b: ((b) => () => peer(dm, 64, 1, b))(peerBody(1)) });
    for (const n of [10, 100]) pairs.push({ id: `${n} events/request, 16 in flight, in memory`, label: `AppendStream ${n} events/batch, 16 in flight, in memory`, target: 1, a: stream(pm, 16, n), b: ((b) => () => peer(dm, 16, n, b))(peerBody(n)) });
    pairs.push({ id: '100 events/request, 16 in flight, durable (SQLite full / file store)', label: 'AppendStream 100 events/batch, 16 in flight, durable (SQLite full / file store)', target: 2, a: stream(pf, 16, 100), b: ((b) => () => peer(df, 16, 100, b))(peerBody(100)) });
    pairs.push({ label: 'AppendEvents (unary) 1 event/request, 16 in flight, durable (SQLite full / file store)', target: 0, a: ((b) => () => palimpsest(pf, 16, 1, b))(grpcBody('one', 1)), b: ((b) => () => peer(df, 16, 1, b))(peerBody(1)) });

    table.push('| events/s | Palimpsest median (min–max) | p50 / p99 ms | Durable Streams median (min–max) | p50 / p99 ms | ratio | target |', '|---|---:|---:|---:|---:|---:|---|');
    for (const pair of pairs) {
      const a: Run[] = [];
      const b: Run[] = [];
      const c: Run[] = [];
      for (let i = 0; i < RUNS; i++) {
        // Alternate which goes first, so a drift in machine load spreads over both.
        // The ceiling (when there is one) goes first in even runs and last in odd ones.
        if (i % 2 === 0) {
          if (pair.ceiling) c.push(await pair.ceiling());
          a.push(await pair.a());
          b.push(await pair.b());
        } else {
          b.push(await pair.b());
          a.push(await pair.a());
          if (pair.ceiling) c.push(await pair.ceiling());
        }
      }
      const sa = stat(a.map((r) => r.rate));
      const sb = stat(b.map((r) => r.rate));
      const ratio = sa.median / sb.median;
      const line = `| ${pair.label} | ${fmtStat(sa)} | ${fmt(stat(a.map((r) => r.p50)).median)} / ${fmt(stat(a.map((r) => r.p99)).median)} | ${fmtStat(sb)} | ${fmt(stat(b.map((r) => r.p50)).median)} / ${fmt(stat(b.map((r) => r.p99)).median)} | ${ratio.toFixed(2)}x | ${pair.target ? `>= ${pair.target}x` : '–'} |`;
      console.error(line);
      table.push(line);
      if (c.length > 0) {
        const sc = stat(c.map((r) => r.rate));
        const ceiling = `|   ceiling: ${ECHO_LABEL}, unary calls, same in flight (h2load) (Palimpsest ${(100 * sa.median / sc.median).toFixed(0)}% of it) | ${fmtStat(sc)} | ${fmt(stat(c.map((r) => r.p50)).median)} / ${fmt(stat(c.map((r) => r.p99)).median)} | | | ${(sc.median / sb.median).toFixed(2)}x | |`;
        console.error(ceiling);
        table.push(ceiling);
      }
      if (pair.target) headlines.push({ id: pair.id ?? pair.label, label: pair.label, ratio, target: pair.target, a: sa.median, b: sb.median });
    }
  } finally {
    for (const s of [pm, pf, dm, df, he]) await s.stop();
  }
  for (const h of headlines) {
    console.log(`HEADLINE ${JSON.stringify({ section: 'Peer (Durable Streams)', id: `peer-${h.id}`, label: `vs Durable Streams ${peerVersion}: ${h.label} (${TRANSPORT} transport)`, value: `${h.ratio.toFixed(2)}x (${fmt(h.a)} vs ${fmt(h.b)} events/s)`, target: `>= ${h.target}x`, met: h.ratio >= h.target })}`);
  }
  console.log(`### Palimpsest (${TRANSPORT} transport) vs Durable Streams (@durable-streams/server ${peerVersion})${quick ? ' — quick' : ''}\n`);
  console.log(`${cpus()[0]?.model ?? ''}, ${cpus().length} cores, node ${process.version}; ${RUNS} alternating runs of ${DURATION} s (+${WARMUP} s warm-up); load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
  console.log(table.join('\n'));
}

try {
  await main();
} finally {
  rmSync(root, { recursive: true, force: true });
}
