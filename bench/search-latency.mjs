#!/usr/bin/env node
/**
 * The search follower's cost to the server's event loop (issue #40): a SQLite store under a steady
 * append load (RATE events/s: every 10 ms a 10-event append to each of a few sessions, round-robin
 * over SESSIONS), with the search index's follower running as the server runs it (useIndex), for
 * SECONDS, after a backlog of BACKLOG events appended before the follower starts (a server
 * restarted, or a burst: the follower indexes it while the load runs). Measured on the process's main thread, the server's: the event-loop delay
 * (perf_hooks monitorEventLoopDelay, 1 ms resolution: p50/p99/max) and the append acknowledgement
 * latency (p50/p99/max), and a session-feed subscriber's delivery latency from the time the store
 * recorded each change (p50/p99/max, ms resolution; what WatchSessions streams). The same load without the
 * index is measured first in the same run (the ceiling). Appends go through the writer thread, the
 * server's default (`--writer inline`: the event loop writes them, `--sqlite-writer inline`). `--in-process` runs the follower's
 * batches on the main thread (as before the worker), `--batch N` sets its batch size.
 *
 *   node --import tsx bench/search-latency.mjs [--seconds 10] [--rate 2000] [--backlog 20000] [--sessions 100] [--in-process] [--batch N] [--writer thread|inline]
 *
 * Prints HEADLINE `search-follower-loop-delay` (bench/results.mjs).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { SessionService } from '../src/app/session-service.ts';
import { SqliteSessionStore } from '../src/store/sqlite/sqlite-store.ts';
import { SqliteSearchIndex } from '../src/store/sqlite/search.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string' }, rate: { type: 'string' }, sessions: { type: 'string' }, 'in-process': { type: 'boolean' }, batch: { type: 'string' }, backlog: { type: 'string' }, writer: { type: 'string' } } });
const BACKLOG = Number(values.backlog ?? 20_000);
const SECONDS = Number(values.seconds ?? 10);
const RATE = Number(values.rate ?? 2000);
const SESSIONS = Number(values.sessions ?? 100);
const PER_APPEND = 10;
const APPENDS_PER_TICK = Math.max(1, Math.round(RATE / 100 / PER_APPEND));

let seed = 42;
const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
const VOCAB = Array.from({ length: 5000 }, (_, i) => `w${(i * 7919 % 99991).toString(36)}${'aeiou'[i % 5]}`);
const words = (n) => Array.from({ length: n }, () => VOCAB[Math.floor(rand() * VOCAB.length)]).join(' ');
function eventAt(seq, time) {
  if (seq % 2 === 0) return { type: 'user/message', seq, time, data: { id: `u${seq}`, role: 'user', content: [{ type: 'text', text: words(30) }], source: { kind: 'user' } }, surfaceOp: 'append' };
  return { type: 'assistant/message', seq, time, data: { turn: 1, step: 1, message: { id: `a${seq}`, role: 'assistant', content: [{ type: 'text', text: words(30) }], source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append' };
}
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? 0;
const ms = (ns) => ns / 1e6;

/** Runs the load on a fresh store; `index`: with the search index and its follower. */
async function run(root, name, index) {
  const path = join(root, `${name}.db`);
  const store = new SqliteSessionStore({ path, appendWriter: values.writer === 'inline' ? 'inline' : 'thread' });
  const app = new SessionService(store);
  const next = new Array(SESSIONS).fill(0);
  for (let s = 0; s < SESSIONS; s++) {
    await store.createSession({ header: { version: 0, id: `s${s}`, createdAt: 1_700_000_000_000 + s }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w' }, []);
  }
  let time = 1_700_000_000_000;
  // The backlog: appended before the follower starts, so it is indexed while the load runs.
  for (let b = 0; b < BACKLOG; b += PER_APPEND * SESSIONS) {
    await Promise.all(next.map(async (from, s) => {
      const evs = Array.from({ length: PER_APPEND }, (_, i) => eventAt(from + i, time++));
      await store.append(`s${s}`, { expectedNextSeq: from, expectedWriter: 'w', writer: 'w', events: evs, surfaceLength: from + PER_APPEND });
      next[s] += PER_APPEND;
    }));
  }
  if (index) {
    const batch = values.batch === undefined ? {} : { batchEvents: Number(values.batch), maxBatchEvents: Number(values.batch) };
    app.search.useIndex(new SqliteSearchIndex(path, { inProcess: values['in-process'] === true, ...batch }), batch);
  }
  // A subscriber of the session feed (what WatchSessions streams): each change timed from when the
  // store recorded it (its `time`, ms) to its delivery (the store's appends are poked into the feed
  // as the service does).
  const sub = await app.sessionFeed.subscribe({ tenant: '' }, { fromNow: true });
  const delivery = [];
  const consuming = (async () => {
    for (;;) {
      const item = await sub.next();
      if (item === undefined) return;
      if (item.kind === 'change') delivery.push(Date.now() - item.time);
    }
  })();
  const busy = new Set();
  const latency = [];
  let events = 0;
  let cursor = 0;
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const end = performance.now() + SECONDS * 1000;
  await new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      if (performance.now() >= end) {
        clearInterval(timer);
        resolve();
        return;
      }
      for (let k = 0; k < APPENDS_PER_TICK; k++) {
        const s = cursor++ % SESSIONS;
        if (busy.has(s)) continue;
        busy.add(s);
        const from = next[s];
        const evs = Array.from({ length: PER_APPEND }, (_, i) => eventAt(from + i, time++));
        const t0 = performance.now();
        store.append(`s${s}`, { expectedNextSeq: from, expectedWriter: 'w', writer: 'w', events: evs, surfaceLength: from + PER_APPEND }).then((r) => {
          if (r.kind !== 'appended') throw new Error(`append s${s}@${from}: ${r.kind}`);
          const now = performance.now();
          latency.push(now - t0);
          app.sessionFeed.poke();
          next[s] += PER_APPEND;
          events += PER_APPEND;
          busy.delete(s);
        }).catch(reject);
      }
    }, 10);
  });
  h.disable();
  sub.close();
  await consuming;
  const lag = index ? await app.search.lag() : { events: 0 };
  await app.close();
  const r = { name, events, rate: events / SECONDS, loopP50: ms(h.percentile(50)), loopP99: ms(h.percentile(99)), loopMax: ms(h.max), appendP50: pct(latency, 0.5), appendP99: pct(latency, 0.99), appendMax: pct(latency, 1), deliveryP50: pct(delivery, 0.5), deliveryP99: pct(delivery, 0.99), deliveryMax: pct(delivery, 1), lag: lag.events };
  console.log(`${name}: ${events} events (${r.rate.toFixed(0)}/s); event-loop delay p50 ${r.loopP50.toFixed(1)} ms, p99 ${r.loopP99.toFixed(1)} ms, max ${r.loopMax.toFixed(1)} ms; append ack p50 ${r.appendP50.toFixed(1)} ms, p99 ${r.appendP99.toFixed(1)} ms, max ${r.appendMax.toFixed(1)} ms; feed delivery (${delivery.length}) p50 ${r.deliveryP50.toFixed(1)} ms, p99 ${r.deliveryP99.toFixed(1)} ms, max ${r.deliveryMax.toFixed(1)} ms${index ? `; index lag at the end ${lag.events} events` : ''}`);
  return r;
}

const root = mkdtempSync(join(tmpdir(), 'palimpsest-search-latency-'));
console.log(`search follower latency bench: ${RATE} events/s for ${SECONDS} s over ${SESSIONS} sessions after a backlog of ${BACKLOG}, follower ${values['in-process'] ? 'on the main thread' : 'in its worker thread'}, batch ${values.batch ?? 'default'}, ${values.writer ?? 'thread'} writer, ${cpus().length} cpus, load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
try {
  const off = await run(root, 'index off', false);
  const on = await run(root, 'index on', true);
  console.log(`HEADLINE ${JSON.stringify({
    id: 'search-follower-loop-delay',
    label: `event-loop delay p99 / max of a SQLite server appending ${RATE} events/s with the search follower running (${values['in-process'] ? 'main thread' : 'worker thread'}), vs the index off`,
    value: `p99 ${on.loopP99.toFixed(1)} ms, max ${on.loopMax.toFixed(1)} ms (off: p99 ${off.loopP99.toFixed(1)} ms, max ${off.loopMax.toFixed(1)} ms); append p99 ${on.appendP99.toFixed(1)} vs ${off.appendP99.toFixed(1)} ms; feed delivery p99 ${on.deliveryP99.toFixed(1)} vs ${off.deliveryP99.toFixed(1)} ms`,
    target: 'p99 <= 20 ms', met: on.loopP99 <= 20,
  })}`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
