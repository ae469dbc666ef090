#!/usr/bin/env node
/**
 * Issue #33 (the soak's PostgreSQL replicas, malloc `[heap]` growth): one replica on a throwaway
 * cluster, one kind of operation at a time, and every period, after a forced full collection,
 * the malloc brk heap (/proc/PID/smaps `[heap]`), RSS, and process.memoryUsage()'s external and
 * arrayBuffers; at the end the slopes in bytes per operation. Not in CI.
 *
 *   npm run build && node scripts/pg-native-probe.mjs --ops append [--minutes 4] [--period-s 30] [--workers 8]
 *                      [--wrap "heaptrack -o /tmp/ht"] [--env MALLOC_ARENA_MAX=1,...] [--keep-sessions 40]
 *
 * --ops: append | batch | subscribe | compact | export | create (a session created and deleted
 * per operation) | unknown (appends to a session that does not exist: refused) | mix (the soak's).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import pg from 'pg';
import { json, listening, soakOperations, startCluster, svc, unary, userMessage } from './soak-support.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { SessionServiceClient } = svc;
const args = process.argv.slice(2);
const arg = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const OPS = arg('ops', 'append');
const MINUTES = Number(arg('minutes', '4'));
const PERIOD_S = Number(arg('period-s', '30'));
const WORKERS = Number(arg('workers', '8'));
const WRAP = String(arg('wrap', '')).split(' ').filter(Boolean);
const ENV = Object.fromEntries(String(arg('env', '')).split(',').filter(Boolean).map((kv) => kv.split('=')));
const REPLICAS = Number(arg('replicas', '1'));
const NODE_FLAGS = String(arg('node-flags', '--initial-old-space-size=128')).split(' ').filter(Boolean);



const HOOK = join(mkdtempSync(join(tmpdir(), 'probe-hook-')), 'hook.cjs');
writeFileSync(HOOK, `'use strict';
process.channel?.unref();
process.on('message', (m) => {
  if (m?.op !== 'gc') return;
  globalThis.gc();
  globalThis.gc();
  setTimeout(() => process.send({ op: 'gc-done', id: m.id, mem: process.memoryUsage(), handles: process._getActiveHandles().length }), 300);
});
`);

async function serve(db) {
  const cmd = [...WRAP, process.execPath, ...NODE_FLAGS, '--expose-gc', '--require', HOOK, join(ROOT, 'bin/palimpsest.mjs'), 'serve', '--listen', '127.0.0.1:0', '--db', db, '--log-level', 'warn', '--metrics-listen', '127.0.0.1:0'];
  const proc = spawn(cmd[0], cmd.slice(1), { cwd: ROOT, env: { ...process.env, ...ENV }, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const { address, metricsPort } = await listening(proc);
  // With a wrapper the pid to measure is node's, the wrapper's child.
  let pid = proc.pid;
  if (WRAP.length > 0) {
    const kids = (p) => readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    for (let i = 0; i < 5; i++) {
      const k = kids(pid).filter((c) => readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('palimpsest.mjs') || true);
      if (k.length === 0) break;
      pid = k[0];
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('palimpsest.mjs') && readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('node')) break;
    }
  }
  return { proc, address, pid, metricsPort };
}

let gcId = 0;
const forceGc = (s) => new Promise((resolve) => {
  const id = ++gcId;
  const on = (m) => {
    if (m?.op === 'gc-done' && m.id === id) {
      s.proc.off('message', on);
      resolve(m);
    }
  };
  s.proc.on('message', on);
  s.proc.send({ op: 'gc', id });
});

function smaps(pid) {
  const out = { brk: 0, anon: 0 };
  let kind = 'other';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (m) kind = m[3] === '[heap]' ? 'brk' : m[3] === '' ? 'anon' : 'other';
    else if (line.startsWith('Rss:') && kind !== 'other') out[kind] += Number(line.split(/\s+/)[1]) * 1024;
  }
  return out;
}


async function load(addresses, stop, stats) {
  const clients = addresses.map((a) => new SessionServiceClient(a, grpc.credentials.createInsecure()));
  let c = clients[0];
  const sessions = [];
  let op = 0;
  const newSession = async () => {
    const id = `probe-${Date.now().toString(36)}-${op}`;
    await unary(c, 'createSession', { sessionId: id, labels: {} });
    sessions.push(id);
    while (sessions.length > 40) await unary(c, 'deleteSession', { sessionId: sessions.shift() }).catch(() => undefined);
  };
  for (let i = 0; i < 8; i++) await newSession();
  for (const id of sessions) await unary(c, 'appendEvents', { sessionId: id, events: Array.from({ length: 20 }, (_, i) => userMessage(`s${i}`, `seed ${i}`)) });
  const ops = () => soakOperations(c);
  const append = (id, n) => ops().append(id, n);
  const kinds = {
    append: (id, n) => append(id, n),
    batch: (id, n) => ops().batch(id, n),
    unknown: (id, n) => append(`nope-${n % 1000}`, n),
    create: async (id, n) => {
      const s = `rot-${n}`;
      await unary(c, 'createSession', { sessionId: s, labels: {} });
      await unary(c, 'deleteSession', { sessionId: s });
    },
    // Created and deleted through one replica, written through the other (with --replicas 2).
    rotate: async (id, n) => {
      const s = `rot-${n}`;
      const [a, b] = [clients[0], clients[clients.length - 1]];
      await unary(a, 'createSession', { sessionId: s, labels: {} });
      await unary(b, 'appendEvents', { sessionId: s, events: Array.from({ length: 20 }, (_, i) => json('x/note', { n, i })) });
      await unary(a, 'deleteSession', { sessionId: s });
    },
    subscribe: async (id, n) => {
      const appending = append(id, n);
      await ops().subscribe(id, n);
      await appending;
    },
    compact: async (id, n) => {
      await append(id, n);
      await ops().compact(id, n);
    },
    export: (id, n) => ops().exportImport(id, n),
  };
  const mix = (id, n) => (n % 300 === 0 ? newSession() : n % 200 === 0 ? kinds.compact(id, n) : n % 97 === 0 ? kinds.export(id, n) : n % 41 === 0 ? kinds.subscribe(id, n) : n % 7 === 0 ? kinds.batch(id, n) : append(id, n));
  const fn = OPS === 'mix' ? mix : kinds[OPS];
  if (!fn) throw new Error(`unknown --ops ${OPS}`);
  const worker = async (w) => {
    while (!stop.now) {
      const n = op++;
      c = clients[(n + w) % clients.length];
      const id = sessions[sessions.length - 1 - ((n + w) % Math.min(sessions.length, 8))];
      try {
        await fn(id, n);
        stats.ok++;
      } catch (e) {
        stats.failed++;
        if (OPS !== 'unknown' && stats.failed < 5) console.error(String(e.details ?? e.message).slice(0, 200));
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
  for (const x of clients) x.close();
}

function slope(points) {
  const n = points.length;
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  const sxx = points.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
  return points.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0) / sxx;
}

const cluster = await startCluster('palimpsest-probe-pg-', '-c fsync=off');
try {
  const admin = new pg.Client({ connectionString: cluster.adminUrl });
  await admin.connect();
  await admin.query('CREATE DATABASE probe');
  await admin.end();
  const servers = [];
  for (let i = 0; i < REPLICAS; i++) servers.push(await serve(cluster.adminUrl.replace(/\/postgres$/, '/probe')));
  const s = servers[0];
  const stop = { now: false };
  const stats = { ok: 0, failed: 0 };
  const running = load(servers.map((x) => x.address), stop, stats);
  const rows = [];
  const started = Date.now();
  console.log(`ops=${OPS} workers=${WORKERS} wrap=${WRAP.join(' ') || '-'} env=${JSON.stringify(ENV)} pid=${s.pid}`);
  console.log('t_s\tcached\tops_total\tbrk_MB\tanon_MB\trss_MB\texternal_MB\tarrayBuffers_MB\theapUsed_MB\thandles');
  for (let t = PERIOD_S; t <= MINUTES * 60; t += PERIOD_S) {
    await new Promise((r) => setTimeout(r, started + t * 1000 - Date.now()));
    const g = await forceGc(s);
    const m = smaps(s.pid);
    const row = { t, ops: stats.ok + stats.failed, brk: m.brk, anon: m.anon, rss: g.mem.rss, external: g.mem.external, ab: g.mem.arrayBuffers, heap: g.mem.heapUsed, handles: g.handles };
    rows.push(row);
    const mb = (x) => (x / 2 ** 20).toFixed(2);
    if (String(arg('snap-at', '')).split(',').includes(String(t))) process.kill(s.pid, 'SIGUSR2');
    const cached = (await Promise.all(servers.map(async (x) => /^palimpsest_cached_sessions (\d+)/m.exec(await (await fetch(`http://127.0.0.1:${x.metricsPort}/metrics`)).text())?.[1]))).join('/');
    console.log([t, cached, row.ops, mb(row.brk), mb(row.anon), mb(row.rss), mb(row.external), mb(row.ab), mb(row.heap), row.handles].join('\t'));
  }
  stop.now = true;
  await running;
  const after = rows.slice(Math.min(2, rows.length - 3));
  const per = (k) => slope(after.map((r) => [r.ops, r[k]]));
  console.log(`RESULT ops=${OPS} ok=${stats.ok} failed=${stats.failed} bytes/op: brk ${per('brk').toFixed(1)} rss ${per('rss').toFixed(1)} external ${per('external').toFixed(1)} arrayBuffers ${per('ab').toFixed(1)} heapUsed ${per('heap').toFixed(1)}`);
  for (const x of servers) {
    const exited = new Promise((r) => x.proc.once('exit', r));
    process.kill(x.pid, 'SIGTERM');
    await exited;
  }
} finally {
  cluster.stop();
  rmSync(HOOK, { force: true });
}
