#!/usr/bin/env node
/**
 * The SQLite writer thread's young-generation bound (THREAD_YOUNG_GENERATION_MB, docs/operations.md):
 * CPU time per append (process.cpuUsage, every thread) and the writer's heap, with V8's default
 * young generation (48 MB) and with the bound, in alternating rounds on one process. Eight
 * sessions append concurrently through the writer thread (single events, a 20-event batch every
 * 7th); not run in CI.
 *
 *   npm run build && node bench/writer-young-gen.mjs [--rounds 5] [--appends 8000]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const arg = (name, dflt) => (args.includes(`--${name}`) ? args[args.indexOf(`--${name}`) + 1] : dflt);
const ROUNDS = Number(arg('rounds', '5'));
const APPENDS = Number(arg('appends', '8000'));
const dist = (p) => join(ROOT, 'dist/src/store/sqlite', p);
const { SqliteSessionStore } = await import(dist('sqlite-store.js'));
const { THREAD_YOUNG_GENERATION_MB } = await import(dist('append-thread.js'));
const { trackThread, threadHeaps } = await import(dist('thread-heap.js'));
const SESSIONS = 8;
const msg = (seq) => ({ type: 'user/message', seq, time: 1_700_000_000_000 + seq, data: { id: `u${seq}`, role: 'user', content: [{ type: 'text', text: `hello ${seq} alpha beta gamma delta` }], source: { kind: 'user' } }, surfaceOp: 'append' });

/** A store whose writer thread has `youngMb` (0: V8's default); the median CPU µs per append over the rounds and the writer's heap after them. */
async function measure(youngMb) {
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-young-gen-'));
  const startWriter = (config) => {
    const w = new Worker(new URL(`file://${dist('append-thread-worker.js')}`), { workerData: config, ...(youngMb > 0 ? { resourceLimits: { maxYoungGenerationSizeMb: youngMb } } : {}) });
    trackThread(w);
    return w;
  };
  const store = new SqliteSessionStore({ path: join(dir, 'a.db'), appendWriter: 'thread', startWriter });
  await store.writerReady();
  const next = new Array(SESSIONS).fill(0);
  for (let s = 0; s < SESSIONS; s++) await store.createSession({ header: { version: 0, id: `s${s}`, createdAt: 1_700_000_000_000 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w' }, []);
  const round = (appends) => Promise.all(Array.from({ length: SESSIONS }, async (_, s) => {
    for (let i = 0; i < appends / SESSIONS; i++) {
      const from = next[s];
      const n = i % 7 === 0 ? 20 : 1;
      const r = await store.append(`s${s}`, { expectedNextSeq: from, expectedWriter: 'w', writer: 'w', events: Array.from({ length: n }, (_, k) => msg(from + k)), surfaceLength: from + n });
      if (r.kind !== 'appended') throw new Error(JSON.stringify(r));
      next[s] += n;
    }
  }));
  await round(APPENDS / 2);
  const cpu = [];
  for (let k = 0; k < ROUNDS; k++) {
    const c0 = process.cpuUsage();
    await round(APPENDS);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / APPENDS);
  }
  const writer = (await threadHeaps()).find((h) => h.thread === 'writer');
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  cpu.sort((a, b) => a - b);
  return { cpu: cpu[Math.floor(cpu.length / 2)], newMb: writer.spaces.find((x) => x.name === 'new_space').size / 2 ** 20, totalMb: writer.total / 2 ** 20 };
}

const runs = { default: [], bound: [] };
for (let rep = 0; rep < 2; rep++) {
  runs.default.push(await measure(0));
  runs.bound.push(await measure(THREAD_YOUNG_GENERATION_MB));
}
for (const [name, rs] of Object.entries(runs)) {
  console.log(`${name === 'default' ? "V8's default young generation (48 MB)" : `young generation ${THREAD_YOUNG_GENERATION_MB} MB`}: CPU µs per append ${rs.map((r) => r.cpu.toFixed(1)).join(', ')}; writer new space ${rs.map((r) => r.newMb.toFixed(0)).join(', ')} MB, heap total ${rs.map((r) => r.totalMb.toFixed(1)).join(', ')} MB`);
}
