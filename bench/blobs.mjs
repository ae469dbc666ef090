#!/usr/bin/env node
/**
 * Blobs (issue #39), in-process over the SQLite store (dist/: `npm run -s build` first):
 *
 *  1. dedup: 20 user messages attaching the same 1 MiB PNG grow the database by about 1 MiB; a
 *     second session attaching it again adds only its rows;
 *  2. an image-heavy session of BLOB_BENCH_MB (default 200) MB of base64 images, blobs on vs off:
 *     a computer-use agent's log, where each user message carries the new 256 KiB screenshot and
 *     re-attaches the previous WINDOW - 1 (default 10 in all: the repeated screenshots are what
 *     makes such logs huge); the database size, and the time of GetSurface and GetMessages (model
 *     history) on a cold service (a fresh SessionService over the reopened file);
 *  3. append throughput of events carrying a 256 KiB image, blobs on vs off (the inline path).
 *
 * Not a test: prints a table and HEADLINE lines (bench/results.mjs). Medians of RUNS runs.
 *   node bench/blobs.mjs            BLOB_BENCH_MB=50 RUNS=3 node bench/blobs.mjs
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SessionService, ANONYMOUS, DEFAULT_LIMITS } from '../dist/src/app/session-service.js';
import { BlobbingStore } from '../dist/src/app/blobbing-store.js';
import { SqliteSessionStore } from '../dist/src/store/sqlite/sqlite-store.js';

const MB = Number(process.env.BLOB_BENCH_MB ?? 200);
const RUNS = Number(process.env.RUNS ?? 3);
const dir = mkdtempSync(join(tmpdir(), 'palimpsest-blobs-bench-'));
const limits = { ...DEFAULT_LIMITS, maxEventBytes: 8 << 20 };
let n = 0;

function png(bytes) {
  const b = randomBytes(bytes);
  b.write('\x89PNG\r\n\x1a\n', 0, 'latin1');
  return b.toString('base64');
}

function imageMessage(i, data, text = `look at this ${i}`) {
  const datas = Array.isArray(data) ? data : [data];
  return {
    type: 'user/message', surfaceOp: 'append',
    data: { id: `u${i}`, role: 'user', content: [{ type: 'text', text }, ...datas.map((d) => ({ type: 'image', attachment: { mimeType: 'image/png', data: d } }))], source: { kind: 'user' } },
  };
}

function assistant(i) {
  return {
    type: 'assistant/message', surfaceOp: 'append', sourceEventSeqs: [],
    data: { turn: i, step: 1, message: { id: `a${i}`, role: 'assistant', content: [{ type: 'text', text: `I see picture ${i}.` }], source: { kind: 'model', provider: 'bench', model: 'b-1' } } },
  };
}

function open(minBytes) {
  const path = join(dir, `db-${n++}.db`);
  const inner = new SqliteSessionStore({ path, durability: 'normal' });
  return { path, inner, app: new SessionService(new BlobbingStore(inner, minBytes), limits) };
}

/** Bytes the database uses (pages in use, checkpointed: free pages and a leftover WAL file are not data). */
function fileBytes(path) {
  const db = new Database(path);
  try {
    db.pragma('wal_checkpoint(TRUNCATE)');
    const pages = db.pragma('page_count', { simple: true }) - db.pragma('freelist_count', { simple: true });
    return pages * db.pragma('page_size', { simple: true });
  } finally {
    db.close();
  }
}

async function settle(inner, path) {
  await inner.close();
  // Checkpointed and closed: the file is the database.
  return fileBytes(path);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = (b) => `${(b / 2 ** 20).toFixed(2)} MiB`;
const headline = (h) => console.log(`HEADLINE ${JSON.stringify(h)}`);

// 1. dedup
{
  const image = png(1 << 20);
  const { path, inner, app } = open(65_536);
  await app.createSession(ANONYMOUS, { id: 'empty' });
  const base = await settle(inner, path);
  const again = new SqliteSessionStore({ path, durability: 'normal' });
  const app2 = new SessionService(new BlobbingStore(again, 65_536), limits);
  await app2.createSession(ANONYMOUS, { id: 'a' });
  for (let i = 0; i < 20; i++) await app2.append(ANONYMOUS, 'a', [imageMessage(i, image)]);
  await again.close();
  const one = fileBytes(path);
  const third = new SqliteSessionStore({ path, durability: 'normal' });
  const app3 = new SessionService(new BlobbingStore(third, 65_536), limits);
  await app3.createSession(ANONYMOUS, { id: 'b' });
  for (let i = 0; i < 20; i++) await app3.append(ANONYMOUS, 'b', [imageMessage(i, image)]);
  await third.close();
  const two = fileBytes(path);
  console.log(`dedup: 20 messages x the same 1 MiB PNG grew the database by ${mib(one - base)}; a second session by ${mib(two - one)}`);
  headline({ id: 'blobs-dedup', label: '20 messages attaching one 1 MiB PNG: database growth', value: `${mib(one - base)} (second session +${mib(two - one)})`, target: '~1 MiB, second session only rows', met: one - base < 1.5 * 2 ** 20 && two - one < 0.25 * 2 ** 20 });
}

// 2. image-heavy session, blobs on vs off
const WINDOW = Number(process.env.WINDOW ?? 10);
const imageBytes = 256 << 10;
const turns = Math.max(1, Math.round((MB * 2 ** 20) / (WINDOW * imageBytes * 4 / 3)));
const shots = Array.from({ length: turns }, () => png(imageBytes));
async function heavy(minBytes) {
  const { path, inner, app } = open(minBytes);
  await app.createSession(ANONYMOUS, { id: 'heavy' });
  for (let i = 0; i < turns; i++) {
    const attached = shots.slice(Math.max(0, i - WINDOW + 1), i + 1);
    await app.append(ANONYMOUS, 'heavy', [imageMessage(i, attached), assistant(i)]);
  }
  const size = await settle(inner, path);
  const surface = [];
  const messages = [];
  // One untimed cold read first (the file's pages into the OS cache, the read path compiled).
  {
    const store = new SqliteSessionStore({ path, durability: 'normal' });
    await new SessionService(new BlobbingStore(store, minBytes), limits).getMessages(ANONYMOUS, 'heavy', 'model');
    await store.close();
  }
  for (let r = 0; r < RUNS; r++) {
    const store = new SqliteSessionStore({ path, durability: 'normal' });
    const cold = new SessionService(new BlobbingStore(store, minBytes), limits);
    let t = performance.now();
    await cold.getSurface(ANONYMOUS, 'heavy');
    surface.push(performance.now() - t);
    const store2 = new SqliteSessionStore({ path, durability: 'normal' });
    const cold2 = new SessionService(new BlobbingStore(store2, minBytes), limits);
    t = performance.now();
    await cold2.getMessages(ANONYMOUS, 'heavy', 'model');
    messages.push(performance.now() - t);
    await store.close();
    await store2.close();
  }
  // Cold in a fresh process (bench/blobs-cold.mjs): the first call after start opens the session from disk.
  const proc = { surface: [], messages: [], refs: [], surfaceRead: [], messagesRead: [], refsRead: [] };
  for (let r = 0; r < RUNS; r++) {
    for (const what of ['surface', 'messages', 'refs']) {
      const out = JSON.parse(execFileSync(process.execPath, [new URL('./blobs-cold.mjs', import.meta.url).pathname, path, String(minBytes), what], { encoding: 'utf8' }));
      proc[what].push(out.ms);
      proc[`${what}Read`].push(out.readBytes);
    }
  }
  return {
    size, surface: median(surface), messages: median(messages),
    procSurface: median(proc.surface), procMessages: median(proc.messages), surfaceRead: median(proc.surfaceRead), messagesRead: median(proc.messagesRead),
    procRefs: median(proc.refs), refsRead: median(proc.refsRead),
  };
}
const on = await heavy(65_536);
const off = await heavy(0);
console.log(`image-heavy session (${turns} turns, each with up to ${WINDOW} 256 KiB screenshots, ~${MB} MB of base64): database ${mib(on.size)} with blobs vs ${mib(off.size)} without`);
console.log(`  cold GetSurface ${on.surface.toFixed(1)} ms vs ${off.surface.toFixed(1)} ms; cold GetMessages (model, images included) ${on.messages.toFixed(1)} ms vs ${off.messages.toFixed(1)} ms`);
console.log(`  fresh process, first call: GetSurface ${on.procSurface.toFixed(1)} ms vs ${off.procSurface.toFixed(1)} ms (read syscalls ${mib(on.surfaceRead)} vs ${mib(off.surfaceRead)}); GetMessages ${on.procMessages.toFixed(1)} ms vs ${off.procMessages.toFixed(1)} ms (${mib(on.messagesRead)} vs ${mib(off.messagesRead)})`);
headline({ id: 'blobs-size', label: `image-heavy session (~${MB} MB): database size, blobs on vs off`, value: `${(100 * on.size / off.size).toFixed(1)}% (${mib(on.size)} vs ${mib(off.size)})`, target: 'under 10%', met: on.size < 0.1 * off.size });
headline({ id: 'blobs-surface', label: 'image-heavy session: cold GetSurface, blobs off / on', value: `${(off.surface / on.surface).toFixed(2)}x (${on.surface.toFixed(1)} vs ${off.surface.toFixed(1)} ms)`, target: '>= 5x', met: off.surface / on.surface >= 5 });
headline({ id: 'blobs-surface-process', label: 'image-heavy session: GetSurface as the first call of a fresh process, blobs off / on', value: `${(off.procSurface / on.procSurface).toFixed(2)}x (${on.procSurface.toFixed(1)} vs ${off.procSurface.toFixed(1)} ms; read ${mib(on.surfaceRead)} vs ${mib(off.surfaceRead)})`, target: '>= 5x', met: off.procSurface / on.procSurface >= 5 });
headline({ id: 'blobs-messages-process', label: 'image-heavy session: GetMessages as the first call of a fresh process, blobs off / on', value: `${(off.procMessages / on.procMessages).toFixed(2)}x (${on.procMessages.toFixed(1)} vs ${off.procMessages.toFixed(1)} ms)`, target: '>= 5x', met: off.procMessages / on.procMessages >= 5 });
console.log(`  fresh process, first call: GetMessages with blob_refs (no image bytes) ${on.procRefs.toFixed(1)} ms (${mib(on.refsRead)}) vs GetMessages blobs off ${off.procMessages.toFixed(1)} ms`);
headline({ id: 'blobs-messages-refs', label: 'image-heavy session: GetMessages without images (blob_refs) vs blobs off, first call of a fresh process', value: `${(off.procMessages / on.procRefs).toFixed(2)}x (${on.procRefs.toFixed(1)} vs ${off.procMessages.toFixed(1)} ms; read ${mib(on.refsRead)} vs ${mib(off.messagesRead)})`, target: '>= 5x', met: off.procMessages / on.procRefs >= 5 });
headline({ id: 'blobs-messages', label: 'image-heavy session: cold GetMessages (images included), blobs off / on', value: `${(off.messages / on.messages).toFixed(2)}x (${on.messages.toFixed(1)} vs ${off.messages.toFixed(1)} ms)`, target: '>= 5x', met: off.messages / on.messages >= 5 });

// 3. append throughput with a 256 KiB image
async function appends(minBytes) {
  const { inner, app } = open(minBytes);
  await app.createSession(ANONYMOUS, { id: 't' });
  const count = 100;
  const datas = Array.from({ length: count }, () => png(256 << 10));
  const t = performance.now();
  for (let i = 0; i < count; i++) await app.append(ANONYMOUS, 't', [imageMessage(i, datas[i])]);
  const rate = count / ((performance.now() - t) / 1000);
  await inner.close();
  return rate;
}
const rOn = [];
const rOff = [];
for (let r = 0; r < RUNS; r++) {
  rOff.push(await appends(0));
  rOn.push(await appends(65_536));
}
const ratio = median(rOn) / median(rOff);
console.log(`appends with a 256 KiB image: ${median(rOn).toFixed(0)}/s with blobs vs ${median(rOff).toFixed(0)}/s inline`);
headline({ id: 'blobs-append', label: 'appends of events with a 256 KiB image, blobs vs inline', value: `${ratio.toFixed(2)}x (${median(rOn).toFixed(0)} vs ${median(rOff).toFixed(0)} events/s)`, target: '>= 1x', met: ratio >= 1 });

if (process.env.BLOB_BENCH_KEEP) console.log(`kept ${dir}`);
else rmSync(dir, { recursive: true, force: true });
