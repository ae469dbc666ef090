/**
 * Many idle subscribers on one server process: memory per SubscribeSurface stream, and the time
 * for one append to reach all of them.
 *
 *   npx tsx bench/subscribers.bench.ts [--quick] [--subscribers N] [--db sqlite]     (normally via `npm run bench`)
 *
 * The server runs on @grpc/grpc-js; its per-stream memory is compared with a bare grpc-js
 * server's floor (child.ts hold) measured in the same run.
 *
 * The server (bench/server/child.ts, in-memory store, or with --db sqlite a SQLite file written by
 * the writer thread, durability full; --expose-gc) runs in its own process; this
 * process holds CHANNELS client channels (separate connections) and SUBSCRIBERS streams spread
 * over them, all on one session. Memory: the server's RSS and heap (after a full GC, through
 * SIGUSR2) with the channels connected and no stream open, then with every stream open and
 * caught up (each has received `caughtUp`); per subscriber = the difference / SUBSCRIBERS.
 * Delivery: RUNS appends of one user/message, one at a time (also against the bare server, whose
 * AppendEvents writes one delta, encoded once, to every held stream: the fan-out floor); for each, the time from sending
 * AppendEvents to the arrival of its delta on every stream (the client keeps the raw bytes and
 * the arrival time, decoding after the run, so decoding 10,000 messages does not queue the
 * arrivals behind it); p50 / p99 / max per append, and the median over the appends. Client and
 * server share the machine's 2 cores: the client's own receive work is part of the figure.
 */
import { bundleServerChild } from './server/bundle.js';
import v8 from 'node:v8';
v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { cpus, loadavg, tmpdir } from 'node:os';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { AppendEventsRequest, AppendEventsResponse, CreateSessionRequest, SubscribeSurfaceRequest, SubscribeSurfaceResponse } from '../gen/palimpsest/v1/service.js';

const quick = process.argv.includes('--quick');
const subArg = process.argv.indexOf('--subscribers');
const SUBSCRIBERS = subArg >= 0 ? Number(process.argv[subArg + 1]) : quick ? 2_000 : 10_000;
const CHANNELS = 100;
const TRANSPORT = 'grpc-js';
const RUNS = 5;
/** --db sqlite: the server on a SQLite file (its default writer thread) instead of the in-memory store. */
const DB = process.argv.includes('--db') && process.argv[process.argv.indexOf('--db') + 1] === 'sqlite' ? 'sqlite' : 'memory';
const SERVICE = '/palimpsest.v1.SessionService/';
const identity = (b: Buffer): Buffer => b;
const now = (): number => performance.now();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Memory { rss: number; heapUsed: number; external: number; arrayBuffers: number }
interface Measured { before: Memory; after: Memory; openMs: number; runs: { p50: number; p99: number; max: number; ack: number }[] }

/**
 * One server process: `palimpsest` (the real server, in-memory store) or `hold` (the grpc-js floor:
 * a bare server that answers `caughtUp` and holds the stream; memory only, no deliveries).
 */
async function measure(mode: 'palimpsest' | 'hold' | 'h2hold'): Promise<Measured> {
  const childArgs = await bundleServerChild();
  const proc = spawn(process.execPath, [...(process.env.SUB_NODE_FLAGS ?? '').split(' ').filter(Boolean), '--expose-gc', ...childArgs, ...(mode === 'palimpsest' ? ['palimpsest', DB === 'sqlite' ? join(mkdtempSync(join(tmpdir(), 'palimpsest-subs-')), 'subs.db') : ':memory:', 'full', `--grpc-transport=${TRANSPORT}`] : [mode])], { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = createInterface({ input: proc.stdout! });
  const lines: ((l: string) => void)[] = [];
  rl.on('line', (l) => lines.shift()?.(l));
  const nextLine = (): Promise<string> => new Promise((r) => lines.push(r));
  const port = (JSON.parse(await nextLine()) as { port: number }).port;
  const address = `127.0.0.1:${port}`;
  const memory = async (): Promise<Memory> => {
    const l = nextLine();
    proc.kill('SIGUSR2');
    const m = (JSON.parse(await l) as { memory: Memory }).memory;
    // VmRSS after the GC (memoryUsage().rss is the same number; /proc is the authority).
    const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))?.[1]) * 1024;
    return { ...m, rss };
  };
  console.error(`subscribers bench (${mode}${mode === 'palimpsest' ? `, ${TRANSPORT} transport` : ''}): ${SUBSCRIBERS.toLocaleString('en-US')} SubscribeSurface streams over ${CHANNELS} channels, one server process, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);

  const channels = Array.from({ length: CHANNELS }, () => new grpc.Client(address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
  const unary = (c: grpc.Client, method: string, body: Uint8Array): Promise<Buffer> =>
    new Promise((resolve, reject) => c.makeUnaryRequest(SERVICE + method, identity, identity, Buffer.from(body), (e, r) => (e ? reject(e) : resolve(r!))));
  const id = 'fan';
  await unary(channels[0]!, 'CreateSession', CreateSessionRequest.encode(CreateSessionRequest.fromPartial({ sessionId: id })).finish());
  // Connect every channel (a cheap call each), then the baseline.
  await Promise.all(channels.map((c) => unary(c, 'GetSession', Buffer.from(`\n${String.fromCharCode(id.length)}${id}`, 'latin1'))));
  await sleep(200);
  const before = await memory();

  // Open the streams; each keeps the arrival time and bytes of its messages.
  const subReq = Buffer.from(SubscribeSurfaceRequest.encode(SubscribeSurfaceRequest.fromPartial({ sessionId: id })).finish());
  const arrivals: { t: number; b: Buffer }[][] = [];
  let caughtUp = 0;
  const streams: grpc.ClientReadableStream<Buffer>[] = [];
  const t0 = now();
  for (let s = 0; s < SUBSCRIBERS; s++) {
    const mine: { t: number; b: Buffer }[] = [];
    arrivals.push(mine);
    let first = true;
    const st = channels[s % CHANNELS]!.makeServerStreamRequest(SERVICE + 'SubscribeSurface', identity, identity, subReq);
    st.on('data', (b: Buffer) => {
      if (first) {
        first = false;
        if (SubscribeSurfaceResponse.decode(b).kind?.$case === 'caughtUp') caughtUp++;
        return;
      }
      mine.push({ t: now(), b });
    });
    st.on('error', (e: grpc.ServiceError) => {
      if (e.code !== grpc.status.CANCELLED) console.error(`stream ${s}: ${e.message}`);
    });
    streams.push(st);
    if (s % 500 === 499) await sleep(0);
  }
  while (caughtUp < SUBSCRIBERS) {
    if (now() - t0 > 120_000) throw new Error(`only ${caughtUp} of ${SUBSCRIBERS} streams caught up`);
    await sleep(20);
  }
  const openMs = now() - t0;
  await sleep(500);
  const after = await memory();
  if (process.env.SUB_SNAPSHOT) {
    // With SUB_NODE_FLAGS=--heapsnapshot-signal=SIGUSR1: a heap snapshot of the server, all streams open.
    proc.kill('SIGUSR1');
    await sleep(Number(process.env.SUB_SNAPSHOT));
  }

  // Deliveries: one append at a time, wait for all streams.
  const ev = { type: 'user/message', data: { kind: { $case: 'json' as const, value: JSON.stringify({ id: 'm', role: 'user', content: [{ type: 'text', text: 'hello '.padEnd(160, '.') }], source: { kind: 'user' } }) } }, surfaceOp: { $case: 'append' as const, value: {} }, sourceEventSeqs: undefined, ignorable: false };
  const runs: Measured['runs'] = [];
  for (let r = 0; r < (mode === 'h2hold' ? 0 : RUNS); r++) {
    for (const a of arrivals) a.length = 0;
    const body = AppendEventsRequest.encode({ sessionId: id, events: [ev], idempotencyKey: '' }).finish();
    const sent = now();
    const res = AppendEventsResponse.decode(await unary(channels[r % CHANNELS]!, 'AppendEvents', body));
    const ack = now() - sent;
    const seq = res.seqs[0]!;
    const deadline = now() + 60_000;
    for (;;) {
      let missing = 0;
      for (const a of arrivals) if (!a.some((x) => x.b.length > 20)) missing++;
      if (missing === 0) break;
      if (now() > deadline) throw new Error(`${missing} streams did not receive seq ${seq}`);
      await sleep(5);
    }
    const lat: number[] = [];
    for (const a of arrivals) {
      const hit = a.find((x) => { const m = SubscribeSurfaceResponse.decode(x.b); return m.kind?.$case === 'append' && m.kind.value.seq === seq; });
      if (hit === undefined) throw new Error(`a stream got something other than the append of seq ${seq}`);
      lat.push(hit.t - sent);
    }
    lat.sort((a, b) => a - b);
    runs.push({ p50: lat[Math.floor(lat.length * 0.5)]!, p99: lat[Math.floor(lat.length * 0.99)]!, max: lat[lat.length - 1]!, ack });
    console.error(`  append ${r + 1}: ack ${ack.toFixed(1)} ms, delivered to all: p50 ${runs[r]!.p50.toFixed(1)} ms, p99 ${runs[r]!.p99.toFixed(1)} ms, max ${runs[r]!.max.toFixed(1)} ms`);
    await sleep(200);
  }
  for (const st of streams) st.cancel();
  for (const c of channels) c.close();
  proc.kill('SIGTERM');
  console.error(`  ${mode}: per subscriber RSS ${((after.rss - before.rss) / SUBSCRIBERS / 1024).toFixed(2)} KiB, heap ${((after.heapUsed - before.heapUsed) / SUBSCRIBERS / 1024).toFixed(2)} KiB`);
  return { before, after, openMs, runs };
}

async function main(): Promise<void> {
  const bare = await measure('hold');
  const bareH2 = undefined as Awaited<ReturnType<typeof measure>> | undefined;
  const { before, after, openMs, runs } = await measure('palimpsest');
  const med = (k: 'p50' | 'p99' | 'max' | 'ack'): string => {
    const s = runs.map((x) => x[k]).sort((a, b) => a - b);
    return `${s[Math.floor(s.length / 2)]!.toFixed(1)} (${s[0]!.toFixed(1)}–${s[s.length - 1]!.toFixed(1)})`;
  };
  const per = (k: keyof Memory, m: Measured = { before, after, openMs, runs }): number => (m.after[k] - m.before[k]) / SUBSCRIBERS / 1024;
  const p99s = runs.map((x) => x.p99).sort((a, b) => a - b);
  const p99 = p99s[Math.floor(p99s.length / 2)]!;
  const bareP99s = bare.runs.map((x) => x.p99).sort((a, b) => a - b);
  const bareP99 = bareP99s[Math.floor(bareP99s.length / 2)]!;
  console.log(`HEADLINE ${JSON.stringify({ section: 'Subscribers', id: 'sub-mem', label: `Server memory per idle SubscribeSurface stream (${SUBSCRIBERS.toLocaleString('en-US')} over ${CHANNELS} channels, ${TRANSPORT} transport), RSS delta after GC, vs a bare grpc-js server holding the same streams`, value: `${(per('rss') / per('rss', bare)).toFixed(2)}x (${per('rss').toFixed(1)} vs ${per('rss', bare).toFixed(1)} KiB)`, target: '<= 1.3x', met: per('rss') <= 1.3 * per('rss', bare) })}`);
  console.log(`HEADLINE ${JSON.stringify({ section: 'Subscribers', id: 'sub-p99', label: `One append delivered to all ${SUBSCRIBERS.toLocaleString('en-US')} streams, p99 (median of ${RUNS}, ${TRANSPORT} transport)`, value: `${p99.toFixed(1)} ms`, target: '< 250 ms', met: p99 < 250,
    ratio: `${(p99 / bareP99).toFixed(2)}x`, ceiling: `${bareP99.toFixed(1)} ms (bare grpc-js fan-out, same run: one delta encoded once, written to every stream)` })}`);
  console.log(`### Subscribers (${SUBSCRIBERS.toLocaleString('en-US')} idle SubscribeSurface streams, ${CHANNELS} channels, ${TRANSPORT} transport, ${DB === 'sqlite' ? 'SQLite file, writer thread' : 'in-memory store'})${quick ? ' — quick' : ''}\n`);
  console.log(`${cpus()[0]?.model ?? ''}, ${cpus().length} cores, node ${process.version}; streams opened and caught up in ${(openMs / 1000).toFixed(1)} s; load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
  console.log('| measure | value |\n|---|---:|');
  const mib = (b: number): string => `${(b / 2 ** 20).toFixed(1)} MiB`;
  console.log(`| server RSS, channels connected, no stream / all streams open (after GC) | ${mib(before.rss)} / ${mib(after.rss)} |`);
  console.log(`| server heapUsed, same | ${mib(before.heapUsed)} / ${mib(after.heapUsed)} |`);
  console.log(`| per subscriber: RSS / heapUsed / external | ${per('rss').toFixed(2)} / ${per('heapUsed').toFixed(2)} / ${per('external').toFixed(2)} KiB |`);
  console.log(`| floor, a bare grpc-js server holding the same streams (one message each, nothing else): per stream RSS / heapUsed | ${per('rss', bare).toFixed(2)} / ${per('heapUsed', bare).toFixed(2)} KiB |`);
  if (bareH2) console.log(`| floor, a bare node:http2 server holding the same streams: per stream RSS / heapUsed | ${per('rss', bareH2).toFixed(2)} / ${per('heapUsed', bareH2).toFixed(2)} KiB |`);
  console.log(`| one append, send -> delivered, p50 (median of ${RUNS} appends, min–max) | ${med('p50')} ms |`);
  console.log(`| one append, send -> delivered, p99 | ${med('p99')} ms |`);
  console.log(`| one append, send -> delivered, max | ${med('max')} ms |`);
  console.log(`| AppendEvents acknowledgement | ${med('ack')} ms |`);
  const bmed = (k: 'p50' | 'p99'): string => {
    const x = bare.runs.map((r) => r[k]).sort((a, b) => a - b);
    return `${x[Math.floor(x.length / 2)]!.toFixed(1)} (${x[0]!.toFixed(1)}–${x[x.length - 1]!.toFixed(1)})`;
  };
  console.log(`| floor, a bare grpc-js fan-out to the same streams (one delta encoded once, written to each): send -> delivered p50 / p99 | ${bmed('p50')} / ${bmed('p99')} ms |`);
  console.log(`| p99 vs the bare fan-out (medians) | ${(p99 / bareP99).toFixed(2)}x |`);
}

await main();
