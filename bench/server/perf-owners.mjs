/**
 * On-CPU time of one thread per call, by owner: `perf script` output of a `perf record -e
 * cpu-clock -g` of a bench server (bench/server/percall.ts `--perf FILE [--perf-of echo]`, which
 * starts the server with `--perf-basic-prof` so JIT frames are named). Each sample is charged to
 * its innermost JavaScript frame's owner (the native code it called counts with it): Palimpsest
 * (the bundle's `// src/...` module, listed), protobuf, grpc-js, node:* ; samples inside a garbage
 * collection are GC; samples with no JavaScript frame are native (nghttp2, node's C++, malloc) or
 * kernel / libuv poll. Unlike `node --cpu-prof` (sampled on a wall-clock timer, so a thread
 * descheduled after waking another keeps being charged where it stopped), only CPU time counts.
 *
 *   perf script -i FILE > FILE.txt
 *   node bench/server/perf-owners.mjs FILE.txt <tid> <calls> [bundle dir] [--functions REGEXP]
 *
 * <tid>: the thread (the server's pid for its event loop; `perf report --sort pid -g none` lists
 * them); <calls>: the calls the recording covered (percall.ts: warm-up 5,000 + runs x calls);
 * bundle dir: node_modules/.cache/palimpsest-bench (to name Palimpsest's modules).
 * `--functions REGEXP`: also list the innermost JS functions matching REGEXP, in us per call.
 */
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const fi = args.indexOf('--functions');
const fnFilter = fi >= 0 ? new RegExp(args[fi + 1]) : undefined;
const [file, tid, callsArg, dir] = fi >= 0 ? [...args.slice(0, fi), ...args.slice(fi + 2)] : args;
const calls = Number(callsArg);
if (!file || !tid || !(calls > 0)) {
  console.error('usage: perf-owners.mjs <perf script output> <tid> <calls> [bundle dir] [--functions REGEXP]');
  process.exit(2);
}

/** The bundle's module marks (`// src/...` comments esbuild writes), per bundle file. */
const marks = new Map();
function moduleOf(bundleFile, line) {
  if (!dir) return '?';
  if (!marks.has(bundleFile)) {
    const list = [];
    try {
      readFileSync(`${dir}/${bundleFile}`, 'utf8').split('\n').forEach((l, i) => {
        const m = /^\/\/ ((?:src|gen|node_modules)\/\S+)/.exec(l);
        if (m) list.push([i + 1, m[1]]);
      });
    } catch {
      // Another build's bundle: modules unnamed.
    }
    marks.set(bundleFile, list);
  }
  let best = '?';
  for (const [at, name] of marks.get(bundleFile)) {
    if (at > line) break;
    best = name;
  }
  return best;
}

const owners = new Map();
const modules = new Map();
const functions = new Map();
let samples = 0;
let period = 0;
const add = (map, key, n = 1) => map.set(key, (map.get(key) ?? 0) + n);
for (const block of readFileSync(file, 'utf8').split('\n\n')) {
  const lines = block.trim().split('\n');
  if (lines.length < 2) continue;
  const head = lines[0].trim().split(/\s+/);
  if (head[1] !== tid) continue;
  // "<comm> <tid> <time>: <period> cpu-clock...": the sample's weight in ns.
  const p = /:\s+(\d+)\s+cpu-clock/.exec(lines[0]);
  const w = p ? Number(p[1]) : 0;
  samples++;
  period += w;
  const frames = lines.slice(1).map((l) => l.trim().replace(/^\S+\s+/, '').replace(/\+0x[0-9a-f]+ \(.*$/, ''));
  if (frames.some((f) => /Scavenger|Heap::CollectGarbage|MarkCompact|Heap::PerformGarbageCollection/.test(f))) {
    add(owners, 'garbage collector', w);
    continue;
  }
  const js = frames.find((f) => f.startsWith('JS:'));
  if (js === undefined) {
    add(owners, frames.some((f) => /epoll|uv__io_poll|entry_SYSCALL|do_syscall/.test(f)) ? 'kernel and libuv poll' : 'native, no JS frame', w);
    continue;
  }
  if (fnFilter?.test(js)) add(functions, js.replace(/file:\/\/\/\S*palimpsest-bench\//, 'bundle/').replace(/\/\S*node_modules\//, ''), w);
  const b = /palimpsest-bench\/([^:\s]+):(\d+)/.exec(js);
  if (b) {
    const mod = moduleOf(b[1], Number(b[2]));
    if (mod.startsWith('gen/') || mod.includes('protobuf')) add(owners, 'protobuf (generated and runtime)', w);
    else if (mod.startsWith('node_modules/')) add(owners, `bundled ${mod}`, w);
    else {
      add(owners, 'Palimpsest', w);
      add(modules, mod, w);
    }
  } else if (js.includes('@grpc/grpc-js')) add(owners, 'grpc-js', w);
  else if (/protobuf/.test(js)) add(owners, 'protobuf (generated and runtime)', w);
  else if (/JS:\S* node:/.test(js)) add(owners, 'node:* JS (http2, streams, timers, ticks)', w);
  else add(owners, 'other JS', w);
}
const us = (ns) => (ns / 1000 / calls).toFixed(2).padStart(7);
console.log(`thread ${tid}: ${samples} samples, ${(period / 1e9).toFixed(2)} s on CPU, ${us(period)} us per call`);
for (const [k, ns] of [...owners].sort((a, b) => b[1] - a[1])) console.log(`${us(ns)} us  ${((ns / period) * 100).toFixed(1).padStart(5)}%  ${k}`);
if (modules.size > 0) {
  console.log('Palimpsest by module:');
  for (const [k, ns] of [...modules].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${us(ns)} us  ${k}`);
}
if (functions.size > 0) {
  console.log(`innermost JS functions matching ${fnFilter}:`);
  for (const [k, ns] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`${us(ns)} us  ${k}`);
}
