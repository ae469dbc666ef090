/**
 * Where one ListEvents page's time goes (issue #37, reads): the bench's `reads` shape (a
 * 10,000-event session read in pages of 1,000, one page after another, explicit from_seq) against
 * the real server and the bare grpc-js server answering the same page bytes (child.ts replay), with
 * a grpc-js client (default channel options, or the bulk reader's 4 MiB window). Per page: wall
 * time (mean of the run, median of the runs), the client's CPU (process.cpuUsage), the server process's
 * CPU (all threads, /proc/<pid>/stat) and its main thread's (the event loop's: /proc/<pid>/task/<pid>/stat). Steadier than events/s on a busy machine.
 *
 *   npx tsx bench/server/reads-percall.ts [--runs 5] [--pages 300] [--window default|bulk] [--alt BUNDLE_DIR] [--cpu-prof DIR]
 *
 * Configurations are interleaved run by run. `--alt DIR`: a second server from another bundle
 * (DIR/child.mjs, a copy of an earlier build, e.g. main's) measured the same way as `alt`.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { ListEventsRequest, ListEventsResponse } from '../../gen/palimpsest/v1/service.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import { SESSION_FORMAT_VERSION, type CandidateEvent } from '../../src/domain/event.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { bundleServerChild } from './bundle.js';
import { cpuSeconds, spawnBenchChild, stepEvents, type BenchChild } from './bench-child.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const RUNS = Number(arg('--runs', '5'));
const PAGES = Number(arg('--pages', '300'));
const WINDOW = arg('--window', 'bulk');
const ALT = arg('--alt', '');
const PROF = arg('--cpu-prof', '');
const SESSION = 10_000;
const PAGE = 1_000;
const SERVICE = '/palimpsest.v1.SessionService/';
const root = mkdtempSync(join(tmpdir(), 'palimpsest-reads-'));


async function buildFixture(path: string): Promise<void> {
  const store = new SqliteSessionStore({ path, durability: 'normal' });
  await store.createSession({ header: { version: SESSION_FORMAT_VERSION, id: 'reads', createdAt: 0, delegationDepth: 0 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0', pending: { owner: 'bench', leaseUntil: Number.MAX_SAFE_INTEGER } }, []);
  const engine = SessionEngine.create();
  const batch: CandidateEvent[] = [];
  for (let seq = 0; seq < SESSION; seq += 8) batch.push(...stepEvents(seq / 8, seq));
  const plan = engine.plan(batch, { mode: 'import', now: Date.now, sessionId: 'reads', lookup: () => undefined });
  engine.commit(plan);
  await store.appendPending('reads', plan.events, { owner: 'bench', leaseUntil: Number.MAX_SAFE_INTEGER });
  await store.publishSession('reads', 'bench');
  await store.close();
}

type Child = BenchChild;
const childCommand = await bundleServerChild();
const spawnChild = (args: string[], command = childCommand): Promise<Child> => spawnBenchChild(command, args, PROF ? ['--cpu-prof', '--cpu-prof-dir', PROF] : []);
const cpu = cpuSeconds;

const identity = (b: Buffer): Buffer => b;
function client(address: string): grpc.Client {
  return new grpc.Client(address, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1,
    ...(WINDOW === 'bulk' ? { 'grpc-node.flow_control_window': 4 * 1024 * 1024 } : {}),
  });
}
function call(c: grpc.Client, body: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => c.makeUnaryRequest(SERVICE + 'ListEvents', identity, identity, body, (e, r) => (e ? reject(e) : resolve(r!))));
}
const pageReq = (from: number): Buffer => Buffer.from(ListEventsRequest.encode({ sessionId: 'reads', fromSeq: from, direction: 1, pageSize: PAGE, pageToken: '', types: [], dataFormat: 0, blobRefs: false }).finish());
const pages = Array.from({ length: SESSION / PAGE }, (_, i) => pageReq(i * PAGE));

const fixture = join(root, 'fixture.db');
await buildFixture(fixture);
const altFixture = join(root, 'alt.db');
if (ALT) await buildFixture(altFixture);
const ours = await spawnChild(['palimpsest', fixture, 'normal']);
const alt = ALT ? await spawnChild(['palimpsest', altFixture, 'normal'], [...childCommand.slice(0, -1), join(ALT, 'child.mjs')]) : undefined;
const c = client(ours.address);
const first = await call(c, pages[0]!);
if (ListEventsResponse.decode(first).events.length !== PAGE) throw new Error('short page');
const listFile = join(root, 'list-page.bin');
writeFileSync(listFile, first);
writeFileSync(join(root, 'm.bin'), Buffer.alloc(0));
const replay = await spawnChild(['replay', listFile, join(root, 'm.bin')]);
const targets: [string, Child, grpc.Client][] = [['ours', ours, c], ['replay', replay, client(replay.address)]];
if (alt) targets.push(['alt', alt, client(alt.address)]);
// Warm every server and client.
for (const [, , cl] of targets) for (let i = 0; i < 50; i++) await call(cl, pages[i % pages.length]!);

const results: Record<string, { wall: number[]; client: number[]; server: number[]; main: number[] }> = {};
let pageNo = 0;
for (let run = 0; run < RUNS; run++) {
  for (const [name, child, cl] of targets) {
    const lat: number[] = [];
    const s0 = cpu(child.pid);
    const m0 = cpu(child.pid, child.pid);
    const c0 = process.cpuUsage();
    for (let i = 0; i < PAGES; i++) {
      const a = performance.now();
      await call(cl, pages[pageNo++ % pages.length]!);
      lat.push(performance.now() - a);
    }
    const cu = process.cpuUsage(c0);
    const s1 = cpu(child.pid);
    const m1 = cpu(child.pid, child.pid);
    lat.sort((x, y) => x - y);
    const r = (results[name] ??= { wall: [], client: [], server: [], main: [] });
    r.main.push(((m1 - m0) * 1000) / PAGES);
    r.wall.push(lat.reduce((x, y) => x + y, 0) / PAGES);
    r.client.push((cu.user + cu.system) / 1000 / PAGES);
    r.server.push(((s1 - s0) * 1000) / PAGES);
  }
}
const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const f = (xs: number[]): string => `${med(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)})`;
console.log(`ListEvents pages of ${PAGE}, ${WINDOW} window, ${RUNS} runs x ${PAGES} pages; load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
console.log('| server | wall per page ms | client CPU per page ms | server CPU per page ms (all threads) | server main thread CPU per page ms |');
console.log('|---|---:|---:|---:|---:|');
for (const [name, r] of Object.entries(results)) console.log(`| ${name} | ${f(r.wall)} | ${f(r.client)} | ${f(r.server)} | ${f(r.main)} |`);
const readAhead = (s: unknown): string => { const x = s as { readAheadHits?: number; readAheadMisses?: number; readAheadBuilt?: number } | null; return x?.readAheadHits === undefined ? 'no read-ahead' : `read-ahead hits ${x.readAheadHits}, misses ${x.readAheadMisses}, built ${x.readAheadBuilt}`; };
console.log(`ours: ${readAhead(await ours.stats())}${alt ? `; alt: ${readAhead(await alt.stats())}` : ''}`);
for (const [, child, cl] of targets) {
  cl.close();
  await child.stop();
}
