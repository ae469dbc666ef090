/**
 * The SQLite store's writer thread (src/store/sqlite/append-thread.ts): the commit gate that keeps
 * reads on durable state across the two connections, and fail-stop when the thread cannot write.
 * The store contract runs against the thread too (sqlite-store.test.ts).
 */
import Database from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { GROUP_ROWS, GroupCommit, type QueuedAppend, type WriteCounters } from '../../src/store/sqlite/group-commit.js';
import { SharedCommitGate, type WriterConfig } from '../../src/store/sqlite/append-thread-wire.js';
import { waitFor } from '../support/poll.js';
import { AppendThread, startThread } from '../../src/store/sqlite/append-thread.js';
import { prepareStatements } from '../../src/store/sqlite/statements.js';
import { configureConnection, openDatabase } from '../../src/store/sqlite/open-database.js';
import { encodeEvents } from '../../src/store/sqlite/row-codec.js';
import { readHeads } from '../../src/store/sqlite/head-record.js';
import { WalSync } from '../../src/store/sqlite/wal-sync.js';
import { StorageError } from '../../src/app/storage-error.js';
import type { AppendOutcome } from '../../src/app/store-port.js';
import { WRITER0, ev, newSession, req } from './store-contract.js';
import { HeldSync } from '../support/held-sync.js';
import { BOUND_FRAMES, CHECKPOINT_BYTES, COMMIT_BYTES, ROW_BYTES, SQLITE_AUTOCHECKPOINT, WalCheckpointer } from '../../src/store/sqlite/wal-checkpointer.js';

const root = mkdtempSync(join(tmpdir(), 'palimpsest-thread-'));
let n = 0;
const fresh = (): string => join(root, `t${n++}.db`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A store file with one empty session `s`, and a second connection with the store's statements. */
async function fixture(): Promise<{ path: string; db: Database.Database }> {
  const path = fresh();
  const store = new SqliteSessionStore({ path });
  await store.createSession(newSession('s'), []);
  await store.close();
  const db = new Database(path);
  // As the store configures its connections (synchronous NORMAL under a background sync; the search index's functions).
  configureConnection(db, 'full', true);
  return { path, db };
}

function call(seq: number, settle: { outcome?: AppendOutcome; error?: unknown }): QueuedAppend {
  const r = req(seq, [ev(seq)]);
  return {
    sessionId: 's', expectedNextSeq: r.expectedNextSeq, expectedWriter: seq === 0 ? WRITER0 : `w${seq - 1}`, writer: `w${seq}`,
    rows: encodeEvents('s', r.events).rows, dataBytes: 10, surfaceLength: 0, idempotency: undefined, maxBytes: 0, at: 0,
    resolve: (o) => { settle.outcome = o; }, reject: (e) => { settle.error = e; },
  };
}

const count = (path: string): number => {
  const other = new Database(path, { readonly: true });
  try {
    return other.prepare("SELECT count(*) FROM events WHERE session_id = 's'").pluck().get() as number;
  } finally {
    other.close();
  }
};

/** A group commit on `db` with a commit gate, synced by `sync` (or not at all). */
function gated<S extends HeldSync | undefined>(db: Database.Database, sync: S): { sync: S; gate: SharedCommitGate; groups: GroupCommit } {
  const gate = new SharedCommitGate();
  const counters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
  const groups = new GroupCommit(db, prepareStatements(db, false), sync as unknown as WalSync | undefined, counters, 'microtask', undefined, gate);
  return { sync, gate, groups };
}

/** Calls of `sizes` events each on session `s`, one after the other from seq 0 (each on top of the one before). */
function calls(sizes: readonly number[]): { calls: QueuedAppend[]; settled: { outcome?: AppendOutcome; error?: unknown }[] } {
  const settled: { outcome?: AppendOutcome; error?: unknown }[] = [];
  let next = 0;
  const out = sizes.map((size, i) => {
    const r = req(next, Array.from({ length: size }, (_, k) => ev(next + k)));
    const s: { outcome?: AppendOutcome; error?: unknown } = {};
    settled.push(s);
    const c: QueuedAppend = {
      sessionId: 's', expectedNextSeq: next, expectedWriter: i === 0 ? WRITER0 : `w${i - 1}`, writer: `w${i}`,
      rows: encodeEvents('s', r.events).rows, dataBytes: 10 * size, surfaceLength: 0, idempotency: undefined, maxBytes: 0, at: 0,
      resolve: (o) => { s.outcome = o; }, reject: (e) => { s.error = e; },
    };
    next += size;
    return c;
  });
  return { calls: out, settled };
}

describe('the commit gate of a background-synced group commit', () => {
  it('numbers a group before its COMMIT is visible and passes it only once its sync completed; the call settles after', async () => {
    const { path, db } = await fixture();
    const { sync, gate, groups } = gated(db, new HeldSync());
    const settled: { outcome?: AppendOutcome } = {};
    groups.enqueue(call(0, settled));
    groups.flush();
    // Committed, so another connection (the store's reads) sees it, but not yet durable: owed.
    expect(count(path)).toBe(1);
    expect(gate.owed()).toBe(1);
    expect(gate.durableUpTo()).toBe(0);
    await Promise.resolve();
    expect(settled.outcome).toBeUndefined();
    sync.finish();
    await new Promise((r) => setImmediate(r));
    expect(gate.owed()).toBe(0);
    expect(gate.durableUpTo()).toBe(1);
    expect(settled.outcome).toEqual({ kind: 'appended' });
    db.close();
  });

  it('a group that failed to commit is passed only after the earlier group it follows is durable, and writes nothing', async () => {
    const { path, db } = await fixture();
    db.pragma('busy_timeout = 0');
    const { sync, gate, groups } = gated(db, new HeldSync());
    const first: { outcome?: AppendOutcome } = {};
    groups.enqueue(call(0, first));
    groups.flush();
    // Another process holds the write lock: the second group cannot BEGIN.
    const locker = new Database(path);
    locker.exec('BEGIN IMMEDIATE');
    const second: { error?: unknown } = {};
    groups.enqueue(call(1, second));
    groups.flush();
    expect((second.error as { code?: string }).code).toBe('SQLITE_BUSY');
    locker.exec('ROLLBACK');
    locker.close();
    expect(gate.owed()).toBe(2);
    expect(gate.durableUpTo()).toBe(0);
    sync.finish();
    await new Promise((r) => setImmediate(r));
    expect(gate.durableUpTo()).toBe(2);
    expect(gate.owed()).toBe(0);
    expect(count(path)).toBe(1);
    db.close();
  });

  it('a group on a connection synced inline (or not at all) is passed as it commits', async () => {
    const { db } = await fixture();
    const { gate, groups } = gated(db, undefined);
    const settled: { outcome?: AppendOutcome } = {};
    groups.enqueue(call(0, settled));
    groups.flush();
    expect(gate.durableUpTo()).toBe(1);
    expect(gate.owed()).toBe(0);
    expect(settled.outcome).toEqual({ kind: 'appended' });
    db.close();
  });
});

describe('WalSync.afterSync', () => {
  it('runs once the sync in flight ended, its waiters resolved, and a commit it owes is covered by the next sync; at once when idle', async () => {
    const path = fresh();
    writeFileSync(`${path}-wal`, 'x');
    const sync = new WalSync(`${path}-wal`);
    const order: string[] = [];
    let ran = false;
    sync.afterSync(() => (ran = true));
    expect(ran).toBe(true);
    sync.owe();
    const first = sync.request().then(() => order.push('first durable'));
    expect(sync.syncing).toBe(true);
    let second: Promise<unknown> | undefined;
    sync.afterSync(() => {
      order.push(`after first (completed ${sync.completed}, syncing ${sync.syncing})`);
      sync.owe();
      second = sync.request().then(() => order.push(`second durable (completed ${sync.completed})`));
    });
    await first;
    await second;
    expect(order).toEqual(['after first (completed 1, syncing false)', 'first durable', 'second durable (completed 2)']);
    sync.close();
  });
});

describe('group transactions of GROUP_ROWS rows when the sync runs in the background', () => {
  const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

  /** A sync that behaves as WalSync does: a request made while a sync runs after a new commit waits for the next sync. */
  class SerialSync {
    running = false;
    dirty = false;
    readonly broken = false;
    readonly error = undefined;
    completed = 0;
    #current: (() => void)[] = [];
    #next: (() => void)[] = [];
    #ending: (() => void)[] = [];
    get owed(): boolean {
      return this.dirty || this.running;
    }
    get syncing(): boolean {
      return this.running;
    }
    afterSync(fn: () => void): void {
      if (this.running) this.#ending.push(fn);
      else fn();
    }
    owe(): void {
      this.dirty = true;
    }
    request(): Promise<void> {
      return new Promise((resolve) => {
        if (this.running && !this.dirty) this.#current.push(resolve);
        else this.#next.push(resolve);
        if (!this.running) this.#start();
      });
    }
    #start(): void {
      this.#current = this.#next;
      this.#next = [];
      this.running = true;
      this.dirty = false;
    }
    /** Completes the sync in flight (the one the first request started); the next starts if owed. */
    finish(): void {
      const done = this.#current;
      this.#current = [];
      this.running = false;
      this.completed++;
      for (const r of done) r();
      const ending = this.#ending;
      this.#ending = [];
      for (const fn of ending) fn();
      if (!this.running && this.#next.length > 0) this.#start();
    }
  }

  function grouped(db: Database.Database, sync: SerialSync | undefined, mode: 'immediate' | 'microtask'): { groups: GroupCommit; gate: SharedCommitGate; counters: WriteCounters } {
    const gate = new SharedCommitGate();
    const counters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
    const groups = new GroupCommit(db, prepareStatements(db, false), sync as unknown as WalSync | undefined, counters, mode, undefined, gate);
    return { groups, gate, counters };
  }

  it(`eight 100-event calls: ${GROUP_ROWS} rows per transaction; the first part is answered by the sync it started, before the sync covering the rest`, async () => {
    const { path, db } = await fixture();
    const sync = new SerialSync();
    const { groups, gate, counters } = grouped(db, sync, 'microtask');
    const { calls: queued, settled } = calls(Array(8).fill(100));
    for (const c of queued) groups.enqueue(c);
    await Promise.resolve(); // the scheduled flush writes the first part only
    expect(counters.commits).toBe(1);
    expect(count(path)).toBe(300);
    expect(sync.running).toBe(true);
    await turn();
    // A second full part is written during the sync; the last 200 rows wait for its end.
    expect(counters.commits).toBe(2);
    expect(counters.maxGroupSize).toBe(3);
    expect(count(path)).toBe(600);
    expect(gate.owed()).toBe(2);
    expect(settled.every((x) => x.outcome === undefined && x.error === undefined)).toBe(true);
    sync.finish(); // the sync the first part started; the held part is written before the next starts
    expect([counters.commits, count(path), gate.owed()]).toEqual([3, 800, 3]);
    await turn();
    expect(settled.map((x) => x.outcome?.kind)).toEqual(['appended', 'appended', 'appended', undefined, undefined, undefined, undefined, undefined]);
    expect(gate.durableUpTo()).toBe(1);
    sync.finish(); // the next, covering the other two parts
    await turn();
    expect(settled.map((x) => x.outcome?.kind)).toEqual(Array(8).fill('appended'));
    expect(counters.appends).toBe(8);
    expect(gate.durableUpTo()).toBe(3);
    db.close();
  });

  it("'immediate' mode (the default): one part per setImmediate turn", async () => {
    const { path, db } = await fixture();
    const sync = new SerialSync();
    const { groups, counters } = grouped(db, sync, 'immediate');
    const { calls: queued, settled } = calls(Array(8).fill(100));
    for (const c of queued) groups.enqueue(c);
    expect(counters.commits).toBe(0);
    await turn();
    expect([counters.commits, count(path)]).toEqual([1, 300]);
    await turn();
    expect([counters.commits, count(path)]).toEqual([2, 600]);
    await turn();
    // 200 rows, less than a part, while the first part's sync runs: held until it ends.
    expect([counters.commits, count(path)]).toEqual([2, 600]);
    sync.finish();
    expect([counters.commits, count(path)]).toEqual([3, 800]);
    sync.finish();
    await turn();
    expect(settled.map((x) => x.outcome?.kind)).toEqual(Array(8).fill('appended'));
    db.close();
  });

  it('calls that arrive one by one while a sync runs are held and written as one group when it ends, covered by the next sync', async () => {
    const { path, db } = await fixture();
    const sync = new SerialSync();
    const { groups, gate, counters } = grouped(db, sync, 'immediate');
    const { calls: queued, settled } = calls(Array(6).fill(1));
    groups.enqueue(queued[0]!);
    await turn();
    expect([counters.commits, count(path), sync.running]).toEqual([1, 1, true]);
    // Five more, each in a turn of its own (as grpc-js hands over unary requests).
    for (const c of queued.slice(1)) {
      groups.enqueue(c);
      await turn();
    }
    expect([counters.commits, count(path)]).toEqual([1, 1]);
    sync.finish();
    // Written as one group before the next sync starts; that sync covers it.
    expect([counters.commits, counters.maxGroupSize, count(path), gate.owed(), sync.running]).toEqual([2, 5, 6, 2, true]);
    await turn();
    expect(settled.map((x) => x.outcome?.kind)).toEqual(['appended', undefined, undefined, undefined, undefined, undefined]);
    sync.finish();
    await turn();
    expect(settled.map((x) => x.outcome?.kind)).toEqual(Array(6).fill('appended'));
    expect(gate.durableUpTo()).toBe(2);
    db.close();
  });

  it('a call larger than GROUP_ROWS is one transaction; small calls share one up to the cap; flush() writes every part at once', async () => {
    const { path, db } = await fixture();
    const sync = new SerialSync();
    const { groups, counters } = grouped(db, sync, 'microtask');
    // 1,000 | 64 x 1 + 200 (264 rows) | 50 + 250 (300) | 1
    const sizes = [1000, ...Array(64).fill(1), 200, 50, 250, 1];
    const { calls: queued, settled } = calls(sizes);
    for (const c of queued) groups.enqueue(c);
    groups.flush();
    expect(counters.commits).toBe(4);
    expect(counters.maxGroupSize).toBe(65);
    expect(count(path)).toBe(sizes.reduce((a, b) => a + b, 0));
    sync.finish();
    sync.finish();
    await turn();
    expect(settled.every((x) => x.outcome?.kind === 'appended')).toBe(true);
    db.close();
  });

  it('without a background sync the queue stays one transaction', async () => {
    const { path, db } = await fixture();
    const { groups, counters } = grouped(db, undefined, 'microtask');
    const { calls: queued, settled } = calls(Array(8).fill(100));
    for (const c of queued) groups.enqueue(c);
    await Promise.resolve();
    expect(counters.commits).toBe(1);
    expect(count(path)).toBe(800);
    expect(settled.map((x) => x.outcome)).toEqual(Array(8).fill({ kind: 'appended' }));
    db.close();
  });

  it('a call refused in a later part is refused exactly as in one transaction; the calls before it are stored', async () => {
    const { path, db } = await fixture();
    const sync = new SerialSync();
    const { groups } = grouped(db, sync, 'microtask');
    const { calls: queued, settled } = calls(Array(6).fill(100));
    // The fifth call (in the second part) claims the wrong head: a conflict, found before writing; the sixth builds on it.
    queued[4] = { ...queued[4]!, expectedNextSeq: 7 };
    for (const c of queued) groups.enqueue(c);
    groups.flush();
    sync.finish();
    sync.finish();
    await turn();
    expect(settled.map((x) => x.outcome?.kind)).toEqual(['appended', 'appended', 'appended', 'appended', 'conflict', 'conflict']);
    expect(count(path)).toBe(400);
    db.close();
  });

  it('a part that cannot BEGIN (another process holds the lock) fails alone; the next part is checked against what is stored', async () => {
    const { path, db } = await fixture();
    db.pragma('busy_timeout = 0');
    const sync = new SerialSync();
    const { groups, gate } = grouped(db, sync, 'immediate');
    const { calls: queued, settled } = calls(Array(8).fill(100));
    for (const c of queued) groups.enqueue(c);
    await turn();
    expect(count(path)).toBe(300);
    const locker = new Database(path);
    locker.exec('BEGIN IMMEDIATE');
    await turn();
    expect(settled.slice(3, 6).map((x) => (x.error as { code?: string } | undefined)?.code)).toEqual(['SQLITE_BUSY', 'SQLITE_BUSY', 'SQLITE_BUSY']);
    locker.exec('ROLLBACK');
    locker.close();
    await turn();
    sync.finish();
    sync.finish();
    await turn();
    // Calls 6 and 7 were planned on top of the failed ones: the stored head says otherwise.
    expect(settled.map((x) => x.outcome?.kind ?? 'error')).toEqual(['appended', 'appended', 'appended', 'error', 'error', 'error', 'conflict', 'conflict']);
    expect(count(path)).toBe(300);
    expect(gate.durableUpTo()).toBe(3);
    expect(gate.owed()).toBe(0);
    db.close();
  });

  it('the writer thread, closed with more than GROUP_ROWS rows queued, answers every call before it closes', async () => {
    const path = fresh();
    const store = new SqliteSessionStore({ path, appendWriter: 'thread' });
    await store.createSession(newSession('s'), []);
    await store.writerReady();
    let next = 0;
    let writer = WRITER0;
    const answers: Promise<AppendOutcome>[] = [];
    for (let c = 0; c < 8; c++) {
      const own = `close${c}`;
      answers.push(store.append('s', req(next, Array.from({ length: 100 }, (_, k) => ev(next + k)), { expectedWriter: writer, writer: own })));
      next += 100;
      writer = own;
    }
    await store.close();
    expect((await Promise.all(answers)).map((o) => o.kind)).toEqual(Array(8).fill('appended'));
    expect(count(path)).toBe(800);
  });
});

describe('SqliteSessionStore with the writer thread', () => {
  it('answers appends and reads them back in order, durable and visible through a second store', async () => {
    const path = fresh();
    const store = new SqliteSessionStore({ path, appendWriter: 'thread' });
    await store.createSession(newSession('s'), []);
    let writer = WRITER0;
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => {
      const r = req(i * 5, Array.from({ length: 5 }, (_, j) => ev(i * 5 + j, 'x/y', { i, j })), { expectedWriter: writer, writer: `w${i}` });
      writer = `w${i}`;
      return store.append('s', r);
    }));
    expect(outcomes.every((o) => o.kind === 'appended')).toBe(true);
    const events = await store.readEvents('s', { fromSeq: 0, direction: 'forward', limit: 1000 });
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(store.stats()).toMatchObject({ appends: 20 });
    expect(store.stats().syncs).toBeGreaterThan(0);
    await store.close();
    const again = new SqliteSessionStore({ path, nativeChecksums: 'off' });
    expect((await again.getSession('s'))?.eventCount).toBe(100);
    await again.close();
  });

  it('a thread that cannot open the file fails every append with StorageError unavailable and the store refuses use; nothing is written', async () => {
    const path = fresh();
    const store = new SqliteSessionStore({ path, appendWriter: 'thread' });
    await store.createSession(newSession('s'), []);
    // The store's connection keeps its open file; the thread, started by the first append, finds none.
    const moved = `${path}.moved`;
    renameSync(path, moved);
    renameSync(`${path}-wal`, `${moved}-wal`);
    renameSync(`${path}-shm`, `${moved}-shm`);
    const first = await store.append('s', req(0, [ev(0)])).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(StorageError);
    expect(first).toMatchObject({ kind: 'unavailable', code: 'WRITER_THREAD_FAILED' });
    expect((first as Error).message).toMatch(/cannot open .*appends are refused until the process restarts/);
    await expect(store.append('s', req(0, [ev(0)]))).rejects.toMatchObject({ code: 'WRITER_THREAD_FAILED' });
    await expect(store.getSession('s')).rejects.toMatchObject({ code: 'WRITER_THREAD_FAILED' });
    await store.close();
    const after = new SqliteSessionStore({ path: moved });
    expect((await after.getSession('s'))?.eventCount).toBe(0);
    await after.close();
  });

  it('writerReady() opens the thread before the first append: it resolves on a good file and fails on one the thread cannot open', async () => {
    const good = new SqliteSessionStore({ path: fresh(), appendWriter: 'thread' });
    await good.writerReady();
    await good.writerReady();
    await good.createSession(newSession('s'), []);
    expect(await good.append('s', req(0, [ev(0)]))).toEqual({ kind: 'appended' });
    await good.close();

    const path = fresh();
    const bad = new SqliteSessionStore({ path, appendWriter: 'thread' });
    await bad.createSession(newSession('s'), []);
    renameSync(path, `${path}.moved`);
    await expect(bad.writerReady()).rejects.toMatchObject({ name: 'StorageError', kind: 'unavailable', code: 'WRITER_THREAD_FAILED', message: expect.stringMatching(/cannot open/) });
    await expect(bad.append('s', req(0, [ev(0)]))).rejects.toMatchObject({ code: 'WRITER_THREAD_FAILED' });
    await bad.close();
    // Inline: nothing to start. A closed store starts nothing.
    const inline = new SqliteSessionStore({ path: fresh() });
    await inline.writerReady();
    await inline.close();
    const closed = new SqliteSessionStore({ path: fresh(), appendWriter: 'thread' });
    await closed.close();
    await expect(closed.writerReady()).rejects.toMatchObject({ name: 'StoreClosedError' });
  });

  it('a :memory: database writes inline (a second connection cannot share it)', async () => {
    const store = new SqliteSessionStore({ path: ':memory:', appendWriter: 'thread' });
    await store.createSession(newSession('s'), []);
    expect(await store.append('s', req(0, [ev(0)]))).toEqual({ kind: 'appended' });
    expect(store.stats().appends).toBe(1);
    await store.close();
  });
});

/**
 * A scripted writer thread speaking the store's protocol (workerData.mode):
 * - 'hold': answers every call at once as appended (by its id alone, writing nothing) and numbers a group in the
 *   shared gate, but passes the groups as durable only when told ({kind: 'durable'}): a
 *   background sync that has not completed;
 * - 'fatal': answers an append with a failed WAL sync;
 * - 'crash': exits on an append, or on close;
 * - 'manual': holds the calls until told how to answer them ({kind: 'answer', outcome, heads});
 * - 'slow-close': as 'hold', and answers close after 200 ms.
 */
const SCRIPTED = `
// A call crosses as a tuple, its id first (append-thread-wire.ts PackedCall).
const { parentPort, workerData } = require('node:worker_threads');
const cells = workerData.gate === undefined ? undefined : new BigInt64Array(workerData.gate);
const counters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
let held = [];
parentPort.on('message', (m) => {
  if (m.kind === 'append') {
    if (workerData.mode === 'crash') process.exit(1);
    if (workerData.mode === 'fatal') {
      parentPort.postMessage({ kind: 'fatal', error: { name: 'Error', message: 'EIO: i/o error, fdatasync', code: 'EIO' } });
      return;
    }
    if (workerData.mode === 'manual') {
      held.push(...m.calls);
      return;
    }
    Atomics.add(cells, 0, 1n);
    // An appended call is answered by its id alone (append-thread-wire.ts WireResult).
    parentPort.postMessage({ kind: 'done', results: m.calls.map((c) => c[0]), heads: [], counters, syncs: 0 });
  } else if (m.kind === 'durable') {
    Atomics.store(cells, 1, Atomics.load(cells, 0));
    parentPort.postMessage({ kind: 'done', results: [], heads: [], counters, syncs: 1 });
  } else if (m.kind === 'close') {
    if (workerData.mode === 'crash') process.exit(1);
    // 'slow-close': the close handshake takes a while (the last sync).
    setTimeout(() => parentPort.postMessage({ kind: 'closed' }), workerData.mode === 'slow-close' ? 200 : 0);
  } else if (m.kind === 'answer') {
    parentPort.postMessage({ kind: 'done', results: held.map((c) => [c[0], m.outcome, null]), heads: m.heads, counters, syncs: 0 });
    held = [];
  }
});`;

function scripted(mode: 'hold' | 'fatal' | 'crash' | 'manual' | 'slow-close'): { start: (config: WriterConfig) => Worker; worker: () => Worker } {
  let worker: Worker | undefined;
  return {
    start: (config) => (worker = new Worker(SCRIPTED, { eval: true, workerData: { ...config, mode } })),
    worker: () => worker!,
  };
}

/** Lets the event loop turn a few times (a promise that should stay pending stays pending). */
async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

describe('AppendThread: how calls are handed to the thread', () => {
  /** The number of calls in each append message the thread received, for a store of `durability`. */
  async function messages(durability: 'full' | 'normal'): Promise<number[]> {
    const sizes: number[] = [];
    const thread = scripted('manual');
    const t = new AppendThread(
      { path: fresh(), durability, fullSync: 'background', busyTimeoutMs: 0, groupCommit: undefined },
      { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 },
      () => undefined,
      (config) => {
        const w = thread.start(config);
        const post = w.postMessage.bind(w);
        w.postMessage = (m: { kind: string; calls?: unknown[] }) => {
          if (m.kind === 'append') sizes.push(m.calls!.length);
          post(m);
        };
        return w;
      },
    );
    // Two calls in two macrotasks of one event-loop turn, as grpc-js hands over unary requests.
    await new Promise<void>((resolve) => {
      setImmediate(() => t.enqueue({ ...call(0, {}), reject: () => undefined }));
      setImmediate(() => {
        t.enqueue({ ...call(1, {}), reject: () => undefined });
        resolve();
      });
    });
    await turns();
    await t.close();
    return sizes;
  }

  it('with a background sync, the calls of one event-loop turn go in one message; without, a message per macrotask', async () => {
    expect(await messages('full')).toEqual([2]);
    expect(await messages('normal')).toEqual([1, 1]);
  });
});

describe('AppendThread: reads wait for what they may have seen', () => {
  it('visible() is pending while a group the thread made visible is not durable, and resolves when it is', async () => {
    const thread = scripted('hold');
    const t = new AppendThread(
      { path: fresh(), durability: 'full', fullSync: 'background', busyTimeoutMs: 0, groupCommit: undefined },
      { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 },
      () => undefined,
      thread.start,
    );
    expect(t.visible()).toBeUndefined();
    await new Promise<void>((resolve) => t.enqueue({ ...call(0, {}), resolve: () => resolve() }));
    const read = t.visible();
    expect(read).toBeInstanceOf(Promise);
    let seen = false;
    void read!.then(() => { seen = true; });
    await turns();
    expect(seen).toBe(false);
    thread.worker().postMessage({ kind: 'durable' });
    await read;
    expect(t.visible()).toBeUndefined();
    expect(t.syncs).toBe(1);
    await t.close();
  });

  it('every read of the store answers only once the groups it may have seen are durable', async () => {
    const thread = scripted('hold');
    const store = new SqliteSessionStore({ path: fresh(), appendWriter: 'thread', startWriter: thread.start });
    await store.createSession(newSession('s'), [ev(0)]);
    expect(await store.append('s', req(1, [ev(1)]))).toEqual({ kind: 'appended' });
    // The scripted thread numbered a group and has not synced it: every read waits for it.
    const reads: [string, Promise<unknown>][] = [
      ['getSession', store.getSession('s')],
      ['listSessions', store.listSessions({ pageSize: 10 })],
      ['getIdempotent', store.getIdempotent('s', 'k')],
      ['readEvents', store.readEvents('s', { fromSeq: 0, direction: 'forward', limit: 10 })],
      ['readEventTexts', store.readEventTexts('s', { fromSeq: 0, direction: 'forward', limit: 10 })],
      ['getEvents', store.getEvents('s', [0])],
      ['readStructure', store.readStructure('s', 0)],
      ['readSurfaceStructure', store.readSurfaceStructure('s', 0)],
      ['scanEvents', (async () => { for await (const batch of store.scanEvents('s', 0, 10)) return batch; return undefined; })()],
      ['getTenantUsage', store.getTenantUsage('')],
    ];
    const settled = new Set<string>();
    for (const [name, p] of reads) void p.then(() => settled.add(name), () => settled.add(name));
    await turns();
    expect([...settled]).toEqual([]);
    thread.worker().postMessage({ kind: 'durable' });
    await Promise.all(reads.map(([, p]) => p));
    expect(((await reads[3]![1]) as { seq: number }[]).map((e) => e.seq)).toEqual([0]);
    await store.close();
  });

  it('a failed WAL sync in the thread fails the call and then every call and read (fail-stop)', async () => {
    const thread = scripted('fatal');
    const store = new SqliteSessionStore({ path: fresh(), appendWriter: 'thread', startWriter: thread.start });
    await store.createSession(newSession('s'), []);
    await expect(store.append('s', req(0, [ev(0)]))).rejects.toMatchObject({ name: 'StorageError', kind: 'unavailable', code: 'WRITER_THREAD_FAILED', message: expect.stringMatching(/a WAL sync of the SQLite writer thread failed: EIO/) });
    await expect(store.append('s', req(0, [ev(0)]))).rejects.toMatchObject({ code: 'WRITER_THREAD_FAILED' });
    await expect(store.readEvents('s', { fromSeq: 0, direction: 'forward', limit: 10 })).rejects.toMatchObject({ code: 'WRITER_THREAD_FAILED' });
    await store.close();
  });

  it('a thread that dies fails the calls it owed, also while the store closes (they may have been stored)', async () => {
    const crashing = scripted('crash');
    const store = new SqliteSessionStore({ path: fresh(), appendWriter: 'thread', startWriter: crashing.start });
    await store.createSession(newSession('s'), []);
    await expect(store.append('s', req(0, [ev(0)]))).rejects.toMatchObject({ code: 'WRITER_THREAD_FAILED', message: expect.stringMatching(/exited \(code 1\)/) });
    await store.close();

    // The call is still queued when close() starts: close hands it over, and the thread dies.
    const t = new AppendThread(
      { path: fresh(), durability: 'full', fullSync: 'background', busyTimeoutMs: 0, groupCommit: undefined },
      { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 },
      () => undefined,
      scripted('crash').start,
    );
    const outcome: { error?: unknown } = {};
    t.enqueue(call(0, outcome));
    await t.close();
    expect(outcome.error).toMatchObject({ name: 'StorageError', code: 'WRITER_THREAD_FAILED', message: expect.stringMatching(/exited while the store closed; an append in flight may have been stored/) });
  });
});

describe('the head watch and the writer thread', () => {
  it("reports no head for this store's own appends, and still reports another store's", async () => {
    const path = fresh();
    const store = new SqliteSessionStore({ path, appendWriter: 'thread', headWatchPollMs: 2 });
    await store.createSession(newSession('s'), []);
    const watch = store.openHeadWatch();
    const reports: (number | 'deleted')[] = [];
    watch.watch('s', (h) => reports.push(h));
    let writer = WRITER0;
    for (let i = 0; i < 60; i++) {
      const r = req(i, [ev(i)], { expectedWriter: writer, writer: `w${i}` });
      writer = `w${i}`;
      expect(await store.append('s', r)).toEqual({ kind: 'appended' });
      if (i % 10 === 0) await new Promise((res) => setTimeout(res, 3));
    }
    await new Promise((res) => setTimeout(res, 20));
    expect(reports).toEqual([]);
    const other = new SqliteSessionStore({ path });
    expect(await other.append('s', req(60, [ev(60)], { expectedWriter: writer }))).toEqual({ kind: 'appended' });
    await waitFor(() => reports.length > 0, 5_000, 'the head of the other store', 2);
    expect(reports).toEqual([61]);
    await other.close();
    await store.close();
  });
});

describe('the head watch and the writer thread, step by step', () => {
  it("holds back a head its store's appends in flight may have written, records it as seen once acknowledged, re-checks after a refusal, and reports other writers", async () => {
    const path = fresh();
    const thread = scripted('manual');
    const store = new SqliteSessionStore({ path, appendWriter: 'thread', headWatchPollMs: 2, startWriter: thread.start });
    await store.createSession(newSession('s', { createdAt: 7 }), []);
    const reports: (number | 'deleted')[] = [];
    store.openHeadWatch().watch('s', (h) => reports.push(h));
    const other = new Database(path);
    const polls = (): Promise<void> => new Promise((r) => setTimeout(r, 25));
    // An append in flight; "its commit" (by another connection, as the thread's is) moves the head.
    const first = store.append('s', req(0, [ev(0)]));
    await turns();
    other.prepare("UPDATE sessions SET next_seq = 1 WHERE id = 's'").run();
    await polls();
    expect(reports).toEqual([]);
    // Acknowledged with its head: seen, never reported.
    thread.worker().postMessage({ kind: 'answer', outcome: { kind: 'appended' }, heads: [['s', 7, 1]] });
    expect(await first).toEqual({ kind: 'appended' });
    await polls();
    expect(reports).toEqual([]);
    // Another append in flight, and another writer's commit in its range: held back while in
    // flight; the append is refused (a conflict), and the next poll reports the head although
    // nothing committed since.
    const second = store.append('s', req(1, [ev(1)]));
    await turns();
    other.prepare("UPDATE sessions SET next_seq = 2 WHERE id = 's'").run();
    await polls();
    expect(reports).toEqual([]);
    thread.worker().postMessage({ kind: 'answer', outcome: { kind: 'conflict', actualNextSeq: 2 }, heads: [] });
    expect(await second).toEqual({ kind: 'conflict', actualNextSeq: 2 });
    await waitFor(() => reports.length > 0, 5_000, 'the held-back head', 2);
    expect(reports).toEqual([2]);
    // Beyond anything in flight: reported at once.
    other.prepare("UPDATE sessions SET next_seq = 5 WHERE id = 's'").run();
    await waitFor(() => reports.length > 1, 5_000, "another writer's head", 2);
    expect(reports).toEqual([2, 5]);
    other.close();
    await store.close();
  });
});

describe('heads recorded around a delete', () => {
  it('a group that committed just before a delete does not bring the session back in FILE-heads; a re-created session with the same created_at is recorded again', async () => {
    const path = fresh();
    const store = new SqliteSessionStore({ path });
    await store.createSession(newSession('s', { createdAt: 9 }), []);
    const appended = store.append('s', req(0, [ev(0), ev(1)]));
    // The group commits on this turn; its head is recorded once its sync ends, after the delete.
    await new Promise((r) => setImmediate(r));
    expect(await store.deleteSession('s')).toBe(true);
    expect(await appended).toEqual({ kind: 'appended' });
    await store.close();
    const reopened = new SqliteSessionStore({ path });
    expect(reopened.damagedSessions).toEqual([]);
    // Re-created (a re-import keeps created_at) and appended: its heads count again.
    await reopened.createSession(newSession('s', { createdAt: 9 }), []);
    expect(await reopened.append('s', req(0, [ev(0), ev(1), ev(2)]))).toEqual({ kind: 'appended' });
    await reopened.close();
    expect(readHeads(`${path}-heads`).get('s')).toEqual({ createdAt: 9, nextSeq: 3 });
  });
});

describe('process lifetime with the writer thread', () => {
  const script = (body: string): { code: number | null; stdout: string; stderr: string } => {
    const file = join(root, `life${n++}.mts`);
    writeFileSync(file, `import { SqliteSessionStore } from ${JSON.stringify(join(process.cwd(), 'src/store/sqlite/sqlite-store.ts'))};
import { renameSync } from 'node:fs';
const path = ${JSON.stringify(join(root, `life${n}.db`))};
${body}`);
    const r = spawnSync(process.execPath, ['--import', 'tsx', file], { cwd: process.cwd(), encoding: 'utf8', timeout: 20_000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const session = "{ header: { version: 1, id: 's', createdAt: 1 }, labels: {}, tenant: '', writer: 'w0', strict: false, pairingGuard: false }";

  it('close() of an idle thread finishes (the process neither exits early nor hangs)', () => {
    const r = script(`const store = new SqliteSessionStore({ path, appendWriter: 'thread' });
await store.createSession(${session}, []);
await store.append('s', { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'w1', events: [{ type: 'x/y', seq: 0, time: 1, data: {} }], surfaceLength: 0 });
await new Promise((r) => setTimeout(r, 50));
await store.close();
console.log('closed');`);
    expect(r, r.stderr).toMatchObject({ code: 0, stdout: 'closed\n' });
  });

  it('close() with an answer still owed holds the process until the thread closed', () => {
    const r = script(`import { AppendThread } from ${JSON.stringify(join(process.cwd(), 'src/store/sqlite/append-thread.ts'))};
import { Worker } from 'node:worker_threads';
const t = new AppendThread({ path, durability: 'full', fullSync: 'background', busyTimeoutMs: 0, groupCommit: undefined },
  { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 }, () => undefined,
  (config) => new Worker(${JSON.stringify(SCRIPTED)}, { eval: true, workerData: { ...config, mode: 'slow-close' } }));
const answered = new Promise((resolve) => t.enqueue({ sessionId: 's', expectedNextSeq: 0, expectedWriter: 'w0', writer: 'w1', rows: [], dataBytes: 0, surfaceLength: 0, idempotency: undefined, maxBytes: 0, at: 0, resolve, reject: resolve }));
await t.close();
console.log('closed', JSON.stringify(await answered));`);
    expect(r, r.stderr).toMatchObject({ code: 0, stdout: 'closed {"kind":"appended"}\n' });
  });

  it('a thread started by writerReady() and then idle keeps no process alive', () => {
    const r = script(`const store = new SqliteSessionStore({ path, appendWriter: 'thread' });
await store.writerReady();
console.log('ready');`);
    expect(r, r.stderr).toMatchObject({ code: 0, stdout: 'ready\n' });
  });

  it('a thread that failed keeps no process alive', () => {
    const r = script(`const store = new SqliteSessionStore({ path, appendWriter: 'thread' });
await store.createSession(${session}, []);
renameSync(path, path + '.moved');
const e = await store.append('s', { expectedNextSeq: 0, expectedWriter: 'w0', writer: 'w1', events: [{ type: 'x/y', seq: 0, time: 1, data: {} }], surfaceLength: 0 }).catch((e) => e);
console.log(e.code);`);
    expect(r, r.stderr).toMatchObject({ code: 0, stdout: 'WRITER_THREAD_FAILED\n' });
  });
});

describe('WAL checkpoints off the writer thread (wal-checkpointer.ts)', () => {
  /** `n` events appended to session `s` of `db` in one transaction (WAL frames to checkpoint). */
  function write(db: Database.Database, from: number, n: number): void {
    const st = prepareStatements(db, false);
    db.transaction(() => st.insertEvents(encodeEvents('s', Array.from({ length: n }, (_, i) => ev(from + i, 'x/y', { text: 'x'.repeat(200) }))).rows))();
  }
  const autocheckpoint = (db: Database.Database): number => db.pragma('wal_autocheckpoint', { simple: true }) as number;

  it('the writer checkpoints only past the bound; the thread checkpoints once CHECKPOINT_BYTES were written, and copies every frame', async () => {
    const { db } = await fixture();
    const counters = { checkpoints: 0, checkpointFrames: 0 };
    let starts = 0;
    const cp = new WalCheckpointer(db, { path: db.name, busyTimeoutMs: 5000 }, counters, (c) => {
      starts++;
      return startThread('wal-checkpoint-worker', c);
    });
    try {
      expect(autocheckpoint(db)).toBe(BOUND_FRAMES);
      write(db, 0, 500);
      // Rows, data and group commits count toward CHECKPOINT_BYTES: one byte short, no thread yet.
      cp.wrote(500, CHECKPOINT_BYTES - 500 * ROW_BYTES - 2 * COMMIT_BYTES - 1);
      cp.committed(2);
      expect(starts).toBe(0);
      cp.committed(1);
      expect(starts).toBe(1);
      await waitFor(() => counters.checkpoints === 1, 15_000, 'the first checkpoint');
      expect(counters.checkpointFrames).toBeGreaterThan(0);
      // Every frame was copied: a checkpoint now finds the same WAL with nothing left to copy.
      const [again] = db.pragma('wal_checkpoint(PASSIVE)') as { log: number; checkpointed: number }[];
      expect(again).toMatchObject({ log: counters.checkpointFrames, checkpointed: counters.checkpointFrames });
      expect(count(db.name)).toBe(500);
      expect(cp.fellBack).toBe(false);
    } finally {
      await cp.close();
      db.close();
    }
  });

  it('a thread that fails gives the writer SQLite\'s own autocheckpoint back and is not started again', async () => {
    const { db } = await fixture();
    let starts = 0;
    const cp = new WalCheckpointer(db, { path: db.name, busyTimeoutMs: 5000 }, { checkpoints: 0, checkpointFrames: 0 }, () => {
      starts++;
      return new Worker('process.exit(3)', { eval: true });
    });
    try {
      cp.wrote(1, CHECKPOINT_BYTES);
      await waitFor(() => cp.fellBack, 15_000, 'the fall-back');
      expect(autocheckpoint(db)).toBe(SQLITE_AUTOCHECKPOINT);
      cp.wrote(1, 2 * CHECKPOINT_BYTES);
      expect(starts).toBe(1);
    } finally {
      await cp.close();
      db.close();
    }
  });

  it("the store's own connection checkpoints past the same bound with the writer thread, at SQLite's default without", () => {
    for (const [appendWriter, frames] of [['thread', BOUND_FRAMES], ['inline', SQLITE_AUTOCHECKPOINT]] as const) {
      const db = openDatabase({ path: fresh(), appendWriter }, true, Date.now);
      try {
        expect(autocheckpoint(db)).toBe(frames);
      } finally {
        db.close();
      }
    }
  });

  it('a store with the writer thread counts the checkpoints its thread ran', async () => {
    const path = fresh();
    const store = new SqliteSessionStore({ path, appendWriter: 'thread' });
    await store.createSession(newSession('s'), []);
    const perCall = 50;
    const data = { text: 'y'.repeat(20_000) };
    // ~20 KB per event: past CHECKPOINT_BYTES in a few calls.
    const calls = Math.ceil(CHECKPOINT_BYTES / (perCall * 20_000)) + 1;
    let writer = WRITER0;
    for (let i = 0; i < calls; i++) {
      const r = req(i * perCall, Array.from({ length: perCall }, (_, j) => ev(i * perCall + j, 'x/y', data)), { expectedWriter: writer, writer: `w${i}` });
      writer = `w${i}`;
      expect(await store.append('s', r)).toMatchObject({ kind: 'appended' });
    }
    // The checkpoint's answer reaches the store with the next report of the thread.
    await waitFor(async () => {
      await store.append('s', req(calls * perCall, [ev(calls * perCall)], { expectedWriter: writer, writer: 'last' })).catch(() => undefined);
      writer = 'last';
      return store.stats().checkpoints > 0;
    }, 15_000, 'a checkpoint counted');
    await store.close();
    const again = new SqliteSessionStore({ path, nativeChecksums: 'off' });
    expect((await again.getSession('s'))?.eventCount).toBe(calls * perCall + 1);
    await again.close();
  });
});
