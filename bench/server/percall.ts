/**
 * CPU time per call of the server process (all threads, and its main thread alone) for
 * single-event unary AppendEvents against the bare grpc-js echo, and AppendStream single events:
 * steadier than calls/s on a busy machine (issue #37 per-call work).
 *
 *   npx tsx bench/server/percall.ts [--runs 5] [--calls 40000] [--inflight 64] [--durability full|normal] [--only echo,unary,stream] [--cpu-prof DIR] [--perf FILE [--perf-of echo]] [--alt BUNDLE_DIR]
 *
 * Each run sends a fixed number of calls (h2load -n, 64 in flight on one connection) and reads
 * the child's utime+stime from /proc before and after; runs are interleaved, the median printed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http2 from 'node:http2';
import { AppendEventsRequest } from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import { bundleServerChild } from './bundle.js';
import { cpuSeconds, spawnBenchChild, type BenchChild } from './bench-child.js';
import { streamLoad, streamRequest } from './append-stream-load.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const RUNS = Number(arg('--runs', '5'));
const CALLS = Number(arg('--calls', '40000'));
const INFLIGHT = Number(arg('--inflight', '64'));
const DURABILITY = arg('--durability', 'full');
const PROF = arg('--cpu-prof', '');
const only = arg('--only', 'echo,unary,stream').split(',');
const root = mkdtempSync(join(tmpdir(), 'palimpsest-percall-'));

const TICK_DATA = JSON.stringify({ n: 1, text: 'The quick brown fox jumps over the lazy dog; '.repeat(4) });
const tick: EventInput = { type: 'bench/tick', data: { kind: { $case: 'json', value: TICK_DATA } }, sourceEventSeqs: undefined, surfaceOp: undefined, ignorable: false };
const msg = Buffer.from(AppendEventsRequest.encode({ sessionId: 'one', events: [tick], idempotencyKey: '' }).finish());
const head = Buffer.alloc(5);
head.writeUInt32BE(msg.length, 1);
const bodyPath = join(root, 'body.bin');
writeFileSync(bodyPath, Buffer.concat([head, msg]));

type Child = BenchChild<Record<string, number> | null>;
const childCommand = await bundleServerChild();
const spawnChild = (args: string[], flags: string[] = [], command = childCommand): Promise<Child> => spawnBenchChild(command, args, flags);
const cpu = cpuSeconds;
function h2load(address: string, n: number): void {
  const r = spawnSync('h2load', ['-c', '1', '-m', String(INFLIGHT), '-n', String(n), '-d', bodyPath, '-H', 'content-type: application/grpc', '-H', 'te: trailers', `http://${address}/palimpsest.v1.SessionService/AppendEvents`], { encoding: 'utf8' });
  const ok = /(\d+) succeeded/.exec(r.stdout);
  if (!ok || Number(ok[1]) !== n) throw new Error(`h2load: ${r.stdout}${r.stderr}`);
}
async function createSession(address: string): Promise<void> {
  const s = http2.connect(`http://${address}`);
  const body = Buffer.from('\n\x03one', 'latin1');
  const h = Buffer.alloc(5);
  h.writeUInt32BE(body.length, 1);
  await new Promise<void>((resolve, reject) => {
    const req = s.request({ ':method': 'POST', ':path': '/palimpsest.v1.SessionService/CreateSession', 'content-type': 'application/grpc', te: 'trailers' });
    req.on('trailers', (t) => (t['grpc-status'] === '0' ? resolve() : reject(new Error(String(t['grpc-message'])))));
    req.on('data', () => undefined);
    req.end(Buffer.concat([h, body]));
  });
  s.close();
}

const PERF = arg('--perf', '');
const flags = PROF ? ['--cpu-prof', `--cpu-prof-dir=${PROF}`] : PERF ? ['--perf-basic-prof'] : [];
const echo = only.includes('echo') ? await spawnChild(['echo'], flags) : undefined;
const app = await spawnChild(['palimpsest', join(root, 'full.db'), DURABILITY], flags);
await createSession(app.address);
/** --alt DIR: a second server from another bundle (DIR/child.mjs, a copy of an earlier build), measured interleaved as `alt`. */
const ALT = arg('--alt', '');
const alt = ALT ? await spawnChild(['palimpsest', join(root, 'alt.db'), DURABILITY], flags, [...childCommand.slice(0, -1), join(ALT, 'child.mjs')]) : undefined;
if (alt) await createSession(alt.address);
const results: Record<string, { all: number[]; main: number[]; rate: number[] }> = {};
const measure = async (name: string, c: Child, fn: () => Promise<void> | void, calls: number): Promise<void> => {
  const r = (results[name] ??= { all: [], main: [], rate: [] });
  const s0 = c === echo ? null : await c.stats();
  const a0 = cpu(c.pid), m0 = cpu(c.pid, c.pid), t0 = performance.now();
  await fn();
  const s1 = c === echo ? null : await c.stats();
  if (s0 && s1) {
    const d = (k: string): number => s1[k]! - s0[k]!;
    console.error(`  ${name}: ${d('appends')} appends, ${(d('appends') / d('handOvers')).toFixed(1)} per hand-over, ${(d('appends') / d('groupCommits')).toFixed(1)} per group commit, ${(d('appends') / d('syncs')).toFixed(1)} per sync`);
  }
  const t = (performance.now() - t0) / 1000;
  r.all.push(((cpu(c.pid) - a0) / calls) * 1e6);
  r.main.push(((cpu(c.pid, c.pid) - m0) / calls) * 1e6);
  r.rate.push(calls / t);
};
/** AppendStream single events through one stream (node:http2 load) on `c`, as `name`. */
async function measureStream(name: string, c: Child): Promise<void> {
  let n = 0;
  await measure(name, c, async () => { n = (await streamLoad(c.address, streamRequest('one', tick, 1), 1, INFLIGHT, 0.2, 1.5)).rate * 1.7; }, 1);
  // streamLoad reports a rate, not a count: convert the last sample to per-call using the rate over 1.7 s.
  const r = results[name]!;
  r.all[r.all.length - 1] = r.all[r.all.length - 1]! / n;
  r.main[r.main.length - 1] = r.main[r.main.length - 1]! / n;
  r.rate[r.rate.length - 1] = n / 1.7;
}
// warm-up
if (echo) h2load(echo.address, 5000);
h2load(app.address, 5000);
if (alt) h2load(alt.address, 5000);
/** --perf-of echo: record the echo's process instead of Palimpsest's (the same per-call categories on both sides). */
const perfOf = arg('--perf-of', 'app') === 'echo' && echo ? echo : app;
const perf = PERF ? spawn('perf', ['record', '-e', 'cpu-clock', '-F', '1999', '-g', '-p', String(perfOf.pid), '-o', PERF], { stdio: 'inherit' }) : undefined;
for (let i = 0; i < RUNS; i++) {
  if (echo) await measure('echo', echo, () => h2load(echo.address, CALLS), CALLS);
  if (only.includes('unary')) await measure('unary', app, () => h2load(app.address, CALLS), CALLS);
  if (alt) await measure('alt', alt, () => h2load(alt.address, CALLS), CALLS);
  if (only.includes('stream')) {
    await measureStream('stream', app);
    if (alt) await measureStream('alt-stream', alt);
  }
}
if (perf) await new Promise((r) => { perf.once('exit', r); perf.kill('SIGINT'); });
const med = (v: number[]): number => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
const fmt = (v: number[]): string => `${med(v).toFixed(1)} (${Math.min(...v).toFixed(1)}-${Math.max(...v).toFixed(1)})`;
for (const [k, r] of Object.entries(results)) console.log(`${k.padEnd(7)} cpu/call all threads ${fmt(r.all)} us, main thread ${fmt(r.main)} us, rate ${fmt(r.rate.map((x) => x / 1000))}k/s`);
if (echo && results.unary) console.log(`unary/echo rate ratio ${(med(results.unary.rate) / med(results.echo!.rate)).toFixed(2)}; extra CPU per call (all threads) ${(med(results.unary.all) - med(results.echo!.all)).toFixed(1)} us`);
await echo?.stop();
await app.stop();
await alt?.stop();
