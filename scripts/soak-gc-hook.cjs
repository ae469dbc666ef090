/**
 * Soak-only (scripts/soak.mjs --forced-gc; never loaded by a production server): preloaded with
 * `node --expose-gc --require scripts/soak-gc-hook.cjs`, so it runs in the main thread and in every
 * worker thread (the SQLite writer thread). On the IPC message `{ op: 'gc', id }` from the soak the
 * main thread asks every thread to run a full collection (a BroadcastChannel), runs one itself,
 * waits `settleMs` for V8 to unmap the freed pages, and answers `{ op: 'gc-done', id, threads, liveHeap }` (`liveHeap`: the main heap's used bytes
 * right after its collection, i.e. its live objects).
 * `{ op: 'snapshot', dir }` (soak --heap-snapshots): every worker thread writes a heap snapshot of
 * its own isolate to `dir` (`worker-<threadId>-<n>.heapsnapshot`; SIGUSR2 covers the main thread only).
 * The soak then reads RSS at the same point of every minute: after a full collection of both
 * isolates, not wherever the collector's heuristics happened to be (bench/soak.md).
 */
'use strict';
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a --require preload is CommonJS: it is what also runs in worker threads
const { isMainThread, threadId } = require('node:worker_threads');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
const { join } = require('node:path');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
const v8 = require('node:v8');

const CHANNEL = 'palimpsest-soak-gc';
if (typeof globalThis.gc !== 'function') throw new Error('soak-gc-hook needs node --expose-gc');
// `gc()` without options: on node 20 (V8 11.3) `gc({ type: 'major', execution: 'sync' })` does not
// collect the old generation (garbage objects and their ArrayBuffers stay: bench/soak.md
// 2026-12-05, test/unit/soak-gc-hook.test.ts), so every figure "after a forced GC" was not.
const fullGc = () => globalThis.gc();

if (!isMainThread) {
  const bc = new BroadcastChannel(CHANNEL);
  let snapshots = 0;
  bc.onmessage = (e) => {
    if (e.data?.op === 'snapshot') v8.writeHeapSnapshot(join(e.data.dir, `worker-${threadId}-${++snapshots}.heapsnapshot`));
    if (e.data?.op !== 'gc') return;
    fullGc();
    bc.postMessage({ op: 'thread-done', id: e.data.id, threadId });
  };
  bc.unref();
} else if (typeof process.send === 'function') {
  const bc = new BroadcastChannel(CHANNEL);
  const waiting = new Map();
  bc.onmessage = (e) => {
    const w = waiting.get(e.data?.id);
    if (e.data?.op === 'thread-done' && w) w.threads.push(e.data.threadId);
  };
  bc.unref();
  process.channel?.unref();
  process.on('message', (m) => {
    if (m?.op === 'snapshot') bc.postMessage(m);
    if (m?.op !== 'gc') return;
    const w = { threads: [], before: process.memoryUsage() };
    waiting.set(m.id, w);
    bc.postMessage({ op: 'gc', id: m.id });
    // The threads answer within a turn of their event loop; the main thread collects after them.
    setTimeout(() => {
      fullGc();
      fullGc();
      // The live heap right after the collection (before the load allocates again): the leak indicator.
      const live = process.memoryUsage().heapUsed;
      setTimeout(() => {
        waiting.delete(m.id);
        const after = process.memoryUsage();
        process.send({ op: 'gc-done', id: m.id, threads: w.threads.length, heapUsedBefore: w.before.heapUsed, liveHeap: live, heapTotalAfter: after.heapTotal, rssAfter: after.rss, arrayBuffersAfter: after.arrayBuffers });
      }, m.settleMs ?? 300).unref();
    }, m.threadWaitMs ?? 500).unref();
  });
}
