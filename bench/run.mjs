#!/usr/bin/env node
/**
 * The benchmark harness: runs every bench/*.bench.ts in its own process, one after the other (the
 * machine has 2 cores: concurrent benches would measure each other), and prints one report: the
 * machine, a summary of the headline targets (met / missed) and each bench's table.
 *
 *   npm run bench                 full suite (minutes)
 *   npm run bench:quick           small sizes, under 2 minutes on an idle machine
 *   node bench/run.mjs [--quick] [--only server,sqlite] [--server-only appends] [--out FILE]
 *
 *
 * A bench reports headline figures by printing lines `HEADLINE {"id","label","value","target",
 * "met",["detail"]}` on stdout; the harness removes them from its table and lists them in the
 * summary, and a full run (not --quick, not --no-results) rewrites their rows of bench/RESULTS.md
 * with the date and the commit (bench/results.mjs). The engine bench's cost ratio and the fan-out bench's p99 ratio are read from their tables. Needs h2load (apt-get install
 * nghttp2-client) for the server bench.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseHeadline, updateResults } from './results.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const onlyArg = args.indexOf('--only');
const only = onlyArg >= 0 ? new Set(args[onlyArg + 1].split(',')) : undefined;
/** `--server-only appends|coldopen|reads|cost`: the server bench runs that section only (its own --only). */
const serverOnlyArg = args.indexOf('--server-only');
const serverOnly = serverOnlyArg >= 0 ? ['--only', args[serverOnlyArg + 1]] : [];
const outArg = args.indexOf('--out');
const out = outArg >= 0 ? args[outArg + 1] : join(tmpdir(), `palimpsest-bench${quick ? '-quick' : ''}.md`);

/** In run order: in-process benches first, the server (which spawns servers and h2load) last. */
const BENCHES = [
  { name: 'engine', file: 'engine.bench.ts', title: 'Engine (in-process)' },
  { name: 'sqlite', file: 'sqlite.bench.ts', title: 'SQLite store' },
  { name: 'fanout', file: 'fanout.bench.ts', title: 'Fan-out (subscriptions)' },
  { name: 'viewer', file: 'viewer.bench.ts', title: 'Viewer (headless Chromium)' },
  { name: 'provider', file: 'provider.bench.ts', title: 'Provider-safe surfaces (compaction planning, time travel)' },
  { name: 'subscribers', file: 'subscribers.bench.ts', title: 'Subscribers (10,000 idle streams)' },
  { name: 'feed', file: 'feed.bench.ts', title: 'Session feed (SubscribeSessions, SQLite)' },
  { name: 'server', file: 'server.bench.ts', title: 'Server (gRPC)' },
  { name: 'postgres', file: 'postgres.bench.ts', title: 'PostgreSQL store (replicas)' },
  { name: 'peer', file: 'peer.bench.ts', title: 'Peer (Durable Streams)' },
];

function run(file, extra = []) {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = spawn(process.execPath, ['--no-concurrent-array-buffer-sweeping', '--import', 'tsx', join(here, file), ...(quick ? ['--quick'] : []), ...extra], {
      cwd: join(here, '..'),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.on('exit', (code) => resolve({ code, stdout, seconds: (performance.now() - started) / 1000 }));
  });
}

const t0 = performance.now();
const machine = `${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB; node ${process.version}; benches run with --no-concurrent-array-buffer-sweeping`;
process.stderr.write(`palimpsest bench${quick ? ' --quick' : ''}: ${machine}; load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);

const headlines = [];
const sections = [];
let failed = false;
for (const b of BENCHES) {
  if (only && !only.has(b.name)) continue;
  if (!existsSync(join(here, b.file))) {
    sections.push(`## ${b.title}\n\n(bench/${b.file} is not in this tree)\n`);
    continue;
  }
  process.stderr.write(`\n=== ${b.file}\n`);
  const r = await run(b.file, b.name === 'server' ? serverOnly : []);
  const lines = r.stdout.split('\n');
  for (const l of lines) {
    const h = parseHeadline(l);
    if (h) headlines.push({ bench: b.name, ...h });
  }
  // The engine bench prints its in-process cost ratio as a table row.
  const ratio = lines.find((l) => l.startsWith('| append cost ratio 1M / 1k'));
  if (b.name === 'engine' && ratio) {
    const v = Number(ratio.split('|')[2]?.trim());
    headlines.push({ bench: 'engine', id: 'engine-cost', label: 'Engine append cost, 1M vs 1k events (in-process)', value: v.toFixed(2), target: '<= 1.2', met: v <= 1.2 });
  }
  // The fan-out bench prints its p99 ratio (Palimpsest vs bare fan-out) as a table row.
  const fan = lines.find((l) => l.startsWith('| p99 publish/write -> delivery'));
  if (b.name === 'fanout' && fan && !headlines.some((h) => h.bench === 'fanout')) {
    const cells = fan.split('|').map((c) => c.trim());
    const v = Number(cells[4]?.replace(/x$/, ''));
    headlines.push({ bench: 'fanout', id: 'fanout', label: 'Fan-out p99 (publish -> delivery), 100 subscribers, vs bare grpc-js fan-out', value: `${v.toFixed(2)}x (${cells[2]} vs ${cells[3]} ms)`, target: '<= 1.5x', met: v <= 1.5 });
  }
  if (r.code !== 0) failed = true;
  const body = lines.filter((l) => !l.startsWith('HEADLINE ')).join('\n').trim();
  sections.push(`## ${b.title}${r.code === 0 ? '' : ` — FAILED (exit ${r.code})`}\n\n${body || '(no output)'}\n\n_${r.seconds.toFixed(0)} s_\n`);
}

if (!headlines.some((h) => h.bench === 'fanout') && (!only || only.has('fanout'))) {
  headlines.push({ bench: 'fanout', id: 'fanout', label: 'Fan-out p99 vs bare fan-out', value: existsSync(join(here, 'fanout.bench.ts')) ? 'see the Fan-out table' : 'not measured (no bench/fanout.bench.ts)', target: '<= 1.5x', met: undefined });
}

const summary = ['| target | measured | wanted | met |', '|---|---|---|---|'];
for (const h of headlines) summary.push(`| ${h.label} | ${h.value}${h.detail ? ` — ${h.detail}` : ''} | ${h.target ?? '—'} | ${h.met === undefined ? (h.target === undefined ? 'recorded' : '?') : h.met ? 'met' : '**missed**'} |`);

const report = [
  `# Palimpsest benchmarks${quick ? ' (quick)' : ''}`,
  '',
  `${new Date().toISOString().slice(0, 16)}Z; ${machine}; load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}; ${((performance.now() - t0) / 1000).toFixed(0)} s`,
  '',
  '## Targets',
  '',
  ...summary,
  '',
  ...sections,
].join('\n');
console.log(report);
writeFileSync(out, report);
process.stderr.write(`\nreport written to ${out}\n`);

/** The commit measured: HEAD's short hash, `-dirty` with uncommitted changes. */
function commitOf() {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty', '--abbrev=7'], { cwd: here, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}
// Quick runs (small sizes, fewer runs) never stand for today's figures.
if (!quick && !args.includes('--no-results')) {
  const results = join(here, 'RESULTS.md');
  const n = updateResults(results, headlines.filter((h) => h.met !== undefined || h.target === undefined) /* not the 'see the table' placeholders (a target, no verdict); a recorded figure (no target) is written */, { date: new Date().toISOString().slice(0, 10), commit: commitOf() });
  process.stderr.write(`${n} figure(s) written to ${results}\n`);
}
process.exitCode = failed ? 1 : 0;
