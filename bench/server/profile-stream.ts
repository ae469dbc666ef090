/**
 * Where an AppendStream append goes: one server (bench/server/child.ts, bundled), one stream of
 * single-event batches at 64 in flight on one session (append-stream-load.ts), RUNS runs; prints
 * per run the rate, the store's group commits and fdatasyncs per append, and the server's CPU per
 * append (all threads and the event loop, from /proc, Linux only), then the top self-time frames
 * of a `node --cpu-prof` profile of the server.
 *
 *   npx tsx bench/server/profile-stream.ts [full|memory|normal] [--events N] [--inflight M] [--runs R] [--seconds S] [--unary] [--grpc-client] [--no-profile]
 *
 * `--unary` drives unary AppendEvents calls through a grpc-js client instead (the same body), for
 * the same per-append figures on the unary path; `--grpc-client` drives the stream through a
 * grpc-js client (append-stream-load.ts grpcStreamLoad) instead of bare node:http2. Not part of `npm run bench`: a tool for working
 * on the stream path (bench/history/issue-37-grpc-js.md).
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { AppendEventsRequest } from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import { bundleServerChild } from './bundle.js';
import { grpcStreamLoad, streamLoad, streamRequest } from './append-stream-load.js';

const argv = process.argv.slice(2);
const mode = argv.find((a) => ['full', 'memory', 'normal'].includes(a)) ?? 'full';
const opt = (name: string, d: number): number => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : d;
};
const EVENTS = opt('--events', 1);
const INFLIGHT = opt('--inflight', 64);
const RUNS = opt('--runs', 5);
const SECONDS = opt('--seconds', 1.5);
const unary = argv.includes('--unary');
const grpcClient = argv.includes('--grpc-client');
const withProfile = !argv.includes('--no-profile');
const root = mkdtempSync(join(tmpdir(), 'palimpsest-profile-stream-'));
const identity = (b: Buffer): Buffer => b;

const TICK_DATA = JSON.stringify({ n: 1, text: 'The quick brown fox jumps over the lazy dog; '.repeat(4) });
const tick: EventInput = { type: 'bench/tick', data: { kind: { $case: 'json', value: TICK_DATA } }, sourceEventSeqs: undefined, surfaceOp: undefined, ignorable: false };

/** CPU seconds of a process: all threads, its main thread (the event loop), and each thread by name. */
function cpuOf(pid: number): { all: number; loop: number; threads: Map<string, number> } {
  const ticks = (file: string): number => {
    const f = readFileSync(file, 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / 100;
  };
  const threads = new Map<string, number>();
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = t === String(pid) ? 'loop' : `${readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim()}/${t}`;
      threads.set(name, (threads.get(name) ?? 0) + ticks(`/proc/${pid}/task/${t}/stat`));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return { all: ticks(`/proc/${pid}/stat`), loop: ticks(`/proc/${pid}/task/${pid}/stat`), threads };
}

/** The threads' CPU per event between two readings, busiest first. */
function perThread(c0: ReturnType<typeof cpuOf>, c1: ReturnType<typeof cpuOf>, n: number): string {
  return [...c1.threads]
    .map(([name, t]) => [name, ((t - (c0.threads.get(name) ?? 0)) * 1e6) / n] as const)
    .filter(([, us]) => us >= 0.1)
    .sort((a, b) => b[1] - a[1])
    .map(([name, us]) => `${name} ${us.toFixed(1)}`)
    .join(', ');
}

async function unaryLoad(address: string, body: Buffer, inflight: number, seconds: number): Promise<number> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const end = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(Array.from({ length: inflight }, async () => {
    while (performance.now() < end) {
      await new Promise<void>((resolve, reject) => client.makeUnaryRequest('/palimpsest.v1.SessionService/AppendEvents', identity, identity, body, (e) => (e ? reject(e) : resolve())));
      done++;
    }
  }));
  client.close();
  return (done * EVENTS) / seconds;
}

async function main(): Promise<void> {
  const child = await bundleServerChild();
  const profDir = join(root, 'prof');
  const db = mode === 'memory' ? ':memory:' : join(root, 'p.db');
  const flags = withProfile ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  const proc = spawn(process.execPath, [...flags, ...child, 'palimpsest', db, mode === 'normal' ? 'normal' : 'full'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = createInterface({ input: proc.stdout! });
  const lines: string[] = [];
  const waiters: ((l: string) => void)[] = [];
  rl.on('line', (l) => {
    const w = waiters.shift();
    if (w) w(l);
    else lines.push(l);
  });
  const nextLine = (): Promise<string> => (lines.length > 0 ? Promise.resolve(lines.shift()!) : new Promise((r) => waiters.push(r)));
  const { port } = JSON.parse(await nextLine()) as { port: number };
  const address = `127.0.0.1:${port}`;
  const stats = async (): Promise<{ groupCommits: number; syncs: number; appends: number; handOvers?: number; checkpoints?: number } | null> => {
    proc.kill('SIGUSR2');
    const l = await nextLine();
    if (process.env.DEBUG_STATS) console.log(l);
    return (JSON.parse(l) as { stats: { groupCommits: number; syncs: number; appends: number; handOvers?: number; checkpoints?: number } | null }).stats;
  };
  const c = new grpc.Client(address, grpc.credentials.createInsecure());
  await new Promise<void>((resolve, reject) => c.makeUnaryRequest('/palimpsest.v1.SessionService/CreateSession', identity, identity, Buffer.from('\n\x03one', 'latin1'), (e) => (e ? reject(e) : resolve())));
  c.close();
  const req = streamRequest('one', tick, EVENTS);
  const body = Buffer.from(AppendEventsRequest.encode({ sessionId: 'one', events: Array.from({ length: EVENTS }, () => tick), idempotencyKey: '' }).finish());
  console.log(`${unary ? 'unary AppendEvents' : 'AppendStream'}, ${EVENTS} event(s)/batch, ${INFLIGHT} in flight, ${mode}`);
  let totalEvents = 0;
  for (let i = 0; i < RUNS; i++) {
    const s0 = await stats();
    const c0 = cpuOf(proc.pid!);
    const rate = unary ? await unaryLoad(address, body, INFLIGHT, SECONDS) : (await (grpcClient ? grpcStreamLoad : streamLoad)(address, req, EVENTS, INFLIGHT, 0.2, SECONDS)).rate;
    const c1 = cpuOf(proc.pid!);
    const s1 = await stats();
    const appended = s1 && s0 ? s1.appends - s0.appends : 0;
    const perCommit = s1 && s0 && s1.groupCommits > s0.groupCommits ? (appended / (s1.groupCommits - s0.groupCommits)).toFixed(1) : '-';
    const perSync = s1 && s0 && s1.syncs > s0.syncs ? (appended / (s1.syncs - s0.syncs)).toFixed(1) : '-';
    const perHandOver = s1?.handOvers && s0 && s1.handOvers > (s0.handOvers ?? 0) ? (appended / (s1.handOvers - (s0.handOvers ?? 0))).toFixed(1) : '-';
    // The store counts append calls (batches): events are EVENTS each.
    const n = appended > 0 ? appended * EVENTS : rate * (SECONDS + 0.2);
    totalEvents += n;
    console.log(`  ${Math.round(rate)} events/s; per group commit ${perCommit}, per fdatasync ${perSync}, per hand-over to the writer ${perHandOver}, WAL checkpoints off the writer ${(s1?.checkpoints ?? 0) - (s0?.checkpoints ?? 0)}; CPU per event all ${((c1.all - c0.all) * 1e6 / n).toFixed(1)} us, event loop ${((c1.loop - c0.loop) * 1e6 / n).toFixed(1)} us; by thread (us): ${perThread(c0, c1, n)}`);
  }
  await new Promise<void>((resolve) => {
    proc.once('exit', () => resolve());
    proc.kill('SIGTERM');
  });
  if (!withProfile) return;
  // One profile per thread: the event loop's, then the writer thread's (and any other worker's).
  const files = readdirSync(profDir).filter((f) => f.endsWith('.cpuprofile')).sort();
  const tops = Number(process.env.PROFILE_TOP ?? 30);
  for (const file of files) {
    if (process.env.PROFILE_KEEP) cpSync(join(profDir, file), join(process.env.PROFILE_KEEP, file));
    const prof = JSON.parse(readFileSync(join(profDir, file), 'utf8')) as { nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[]; samples: number[]; timeDeltas: number[] };
    const self = new Map<number, number>();
    for (let i = 0; i < prof.samples.length; i++) self.set(prof.samples[i]!, (self.get(prof.samples[i]!) ?? 0) + (prof.timeDeltas[i] ?? 0));
    const byFrame = new Map<string, number>();
    let total = 0;
    for (const node of prof.nodes) {
      const t = self.get(node.id) ?? 0;
      const f = node.callFrame;
      if (f.functionName === '(idle)' || f.functionName === '(program)') continue;
      total += t;
      const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(node_modules|src|gen)\//, '$1/').replace(/^.*\/palimpsest-bench\//, 'bundle/')}:${f.lineNumber + 1}`;
      byFrame.set(key, (byFrame.get(key) ?? 0) + t);
    }
    console.log(`${file}: ${(total / 1000).toFixed(0)} ms busy (${(total / totalEvents).toFixed(2)} us per event of the runs); top self time (idle and (program) excluded):`);
    for (const [k, t] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, tops)) console.log(`${((t / total) * 100).toFixed(1).padStart(5)}%  ${k}`);
  }
}

try {
  await main();
} finally {
  rmSync(root, { recursive: true, force: true });
}
