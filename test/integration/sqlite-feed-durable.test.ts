/**
 * Feed reads against the writer thread's commit gate (issue #35 feed latency): a feed read answers
 * at once with the records known durable and leaves the rest for the next read, instead of waiting
 * for the sync of the group committed after them; it never answers a record not known durable.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { GroupCommit, type QueuedAppend } from '../../src/store/sqlite/group-commit.js';
import { SharedCommitGate, type WriterConfig } from '../../src/store/sqlite/append-thread-wire.js';
import { prepareStatements } from '../../src/store/sqlite/statements.js';
import { configureConnection } from '../../src/store/sqlite/open-database.js';
import { encodeEvents } from '../../src/store/sqlite/row-codec.js';
import type { WalSync } from '../../src/store/sqlite/wal-sync.js';
import { WRITER0, ev, newSession, req } from './store-contract.js';
import { HeldSync } from '../support/held-sync.js';

const root = mkdtempSync(join(tmpdir(), 'palimpsest-feed-durable-'));
let n = 0;
const fresh = (): string => join(root, `f${n++}.db`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

function call(seq: number): QueuedAppend {
  const r = req(seq, [ev(seq)]);
  return {
    sessionId: 's', expectedNextSeq: r.expectedNextSeq, expectedWriter: seq === 0 ? WRITER0 : `w${seq - 1}`, writer: `w${seq}`,
    rows: encodeEvents('s', r.events).rows, dataBytes: 10, surfaceLength: 0, idempotency: undefined, maxBytes: 0, at: 0,
    resolve: () => undefined, reject: () => undefined,
  };
}

/** A scripted writer thread: an append numbers a group (nothing is written) and reports the feed durable up to `durableFeed`; `durable` passes the groups. */
const SCRIPTED = `
const { parentPort, workerData } = require('node:worker_threads');
const cells = new BigInt64Array(workerData.gate);
const counters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
parentPort.on('message', (m) => {
  if (m.kind === 'append') {
    Atomics.add(cells, 0, 1n);
    Atomics.store(cells, 2, BigInt(workerData.durableFeed));
    parentPort.postMessage({ kind: 'done', results: m.calls.map((c) => [c[0], { kind: 'appended' }, null]), heads: [], counters, syncs: 0 });
  } else if (m.kind === 'durable') {
    Atomics.store(cells, 1, Atomics.load(cells, 0));
    parentPort.postMessage({ kind: 'done', results: [], heads: [], counters, syncs: 1 });
  } else if (m.kind === 'close') {
    parentPort.postMessage({ kind: 'closed' });
  }
});`;

async function turns(k = 5): Promise<void> {
  for (let i = 0; i < k; i++) await new Promise((r) => setImmediate(r));
}

describe('the durable feed position of the commit gate', () => {
  it("is the feed's end as a group's transaction left it, passed only once that group's sync ended", async () => {
    const path = fresh();
    const store = new SqliteSessionStore({ path });
    await store.createSession(newSession('s'), []);
    await store.close();
    const db = new Database(path);
    configureConnection(db, 'full', true);
    const end = (): number => db.prepare('SELECT max(position) FROM feed').pluck().get() as number;
    const gate = new SharedCommitGate();
    const sync = new HeldSync();
    const groups = new GroupCommit(db, prepareStatements(db, false), sync as unknown as WalSync, { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 }, 'microtask', undefined, gate);
    const created = end();

    groups.enqueue(call(0));
    groups.flush();
    const first = end();
    expect(first).toBeGreaterThan(created);
    // Committed (visible to the store's reads), not durable: nothing of it is passed.
    expect([gate.owed(), gate.durableFeedPosition()]).toEqual([1, 0]);
    sync.finish();
    await turns();
    expect([gate.owed(), gate.durableFeedPosition()]).toEqual([0, first]);

    groups.enqueue(call(1));
    groups.flush();
    // The next group is visible and owed: the durable position stays at the first group's end.
    expect(end()).toBeGreaterThan(first);
    expect([gate.owed(), gate.durableFeedPosition()]).toEqual([2, first]);
    sync.finish();
    await turns();
    expect([gate.owed(), gate.durableFeedPosition()]).toEqual([0, end()]);
    db.close();
  });
});

describe('SqliteSessionStore.readFeed with the writer thread', () => {
  it('answers at once with the records known durable, never one above; the rest once the owed group is durable', async () => {
    let worker: Worker | undefined;
    // The scripted thread reports the feed durable up to position 2 with the group it numbers.
    const start = (config: WriterConfig): Worker => (worker = new Worker(SCRIPTED, { eval: true, workerData: { ...config, durableFeed: 2 } }));
    const store = new SqliteSessionStore({ path: fresh(), appendWriter: 'thread', startWriter: start });
    for (const id of ['a', 'b', 'c', 's']) await store.createSession(newSession(id), []);
    const positions = async (after: number): Promise<number[]> => (await store.readFeed({ tenant: '', after, limit: 10 })).map((r) => r.position);
    expect(await positions(0)).toEqual([1, 2, 3, 4]);

    // A group the thread made visible and has not synced (the feed may hold records of it).
    expect(await store.append('s', req(0, [ev(0)]))).toEqual({ kind: 'appended' });
    expect(await positions(0)).toEqual([1, 2]);
    // A read that finds nothing has nothing to wait for.
    expect(await positions(4)).toEqual([]);
    // Nothing above 2 is known durable: a read after it waits for the sync (the rule of every read).
    let rest: number[] | undefined;
    const pending = positions(2).then((p) => (rest = p));
    await turns();
    expect(rest).toBeUndefined();

    worker!.postMessage({ kind: 'durable' });
    await pending;
    expect(rest).toEqual([3, 4]);
    expect(await positions(0)).toEqual([1, 2, 3, 4]);
    await store.close();
  });
});
