/**
 * The SQLite store's writer thread (src/store/sqlite/append-thread.ts): the commit gate that keeps
 * reads on durable state across the two connections, and fail-stop when the thread cannot write.
 * The store contract runs against the thread too (sqlite-store.test.ts).
 */
import Database from 'better-sqlite3';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { GroupCommit, type QueuedAppend } from '../../src/store/sqlite/group-commit.js';
import { SharedCommitGate } from '../../src/store/sqlite/append-thread-wire.js';
import { AppendThread } from '../../src/store/sqlite/append-thread.js';
import { prepareStatements } from '../../src/store/sqlite/statements.js';
import { encodeEvents } from '../../src/store/sqlite/row-codec.js';
import type { WalSync } from '../../src/store/sqlite/wal-sync.js';
import { StorageError } from '../../src/app/storage-error.js';
import type { AppendOutcome } from '../../src/app/store-port.js';
import { WRITER0, ev, newSession, req } from './store-contract.js';

const root = mkdtempSync(join(tmpdir(), 'palimpsest-thread-'));
let n = 0;
const fresh = (): string => join(root, `t${n++}.db`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A WAL sync whose completion the test decides. */
class HeldSync {
  dirty = false;
  running = false;
  readonly broken = false;
  readonly error = undefined;
  completed = 0;
  #waiters: (() => void)[] = [];
  get owed(): boolean {
    return this.dirty || this.running;
  }
  owe(): void {
    this.dirty = true;
  }
  request(): Promise<void> {
    this.running = true;
    this.dirty = false;
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
  /** Completes every sync requested so far. */
  finish(): void {
    const w = this.#waiters;
    this.#waiters = [];
    this.running = false;
    this.completed++;
    for (const r of w) r();
  }
}

/** A store file with one empty session `s`, and a second connection with the store's statements. */
async function fixture(): Promise<{ path: string; db: Database.Database }> {
  const path = fresh();
  const store = new SqliteSessionStore({ path });
  await store.createSession(newSession('s'), []);
  await store.close();
  const db = new Database(path);
  db.pragma('synchronous = NORMAL');
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

describe('the commit gate of a background-synced group commit', () => {
  it('numbers a group before its COMMIT is visible and passes it only once its sync completed; the call settles after', async () => {
    const { path, db } = await fixture();
    const sync = new HeldSync();
    const gate = new SharedCommitGate();
    const groups = new GroupCommit(db, prepareStatements(db, false), sync as unknown as WalSync, { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 }, 'microtask', undefined, gate);
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
    const sync = new HeldSync();
    const gate = new SharedCommitGate();
    const groups = new GroupCommit(db, prepareStatements(db, false), sync as unknown as WalSync, { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 }, 'microtask', undefined, gate);
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
    const gate = new SharedCommitGate();
    const groups = new GroupCommit(db, prepareStatements(db, false), undefined, { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 }, 'microtask', undefined, gate);
    const settled: { outcome?: AppendOutcome } = {};
    groups.enqueue(call(0, settled));
    groups.flush();
    expect(gate.durableUpTo()).toBe(1);
    expect(gate.owed()).toBe(0);
    expect(settled.outcome).toEqual({ kind: 'appended' });
    db.close();
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

  it('a :memory: database writes inline (a second connection cannot share it)', async () => {
    const store = new SqliteSessionStore({ path: ':memory:', appendWriter: 'thread' });
    await store.createSession(newSession('s'), []);
    expect(await store.append('s', req(0, [ev(0)]))).toEqual({ kind: 'appended' });
    expect(store.stats().appends).toBe(1);
    await store.close();
  });
});

/**
 * A scripted writer thread speaking the store's protocol: it answers every call at once as
 * appended and numbers a group in the shared gate, but passes the groups as durable only when the
 * test says so (a background sync that has not completed).
 */
const SCRIPTED = `
const { parentPort, workerData } = require('node:worker_threads');
const cells = new BigInt64Array(workerData.gate);
parentPort.on('message', (m) => {
  const counters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
  if (m.kind === 'append') {
    Atomics.add(cells, 0, 1n);
    parentPort.postMessage({ kind: 'done', results: m.calls.map((c) => [c.id, { kind: 'appended' }, null]), heads: [], counters, syncs: 0 });
  } else if (m.kind === 'durable') {
    Atomics.store(cells, 1, Atomics.load(cells, 0));
    parentPort.postMessage({ kind: 'done', results: [], heads: [], counters, syncs: 1 });
  } else if (m.kind === 'close') {
    parentPort.postMessage({ kind: 'closed' });
  }
});`;

describe('AppendThread: reads wait for what they may have seen', () => {
  it('visible() is pending while a group the thread made visible is not durable, and resolves when it is', async () => {
    let worker: Worker | undefined;
    const thread = new AppendThread(
      { path: fresh(), durability: 'full', fullSync: 'background', busyTimeoutMs: 0, groupCommit: undefined },
      { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 },
      () => undefined,
      (config) => (worker = new Worker(SCRIPTED, { eval: true, workerData: config })),
    );
    expect(thread.visible()).toBeUndefined();
    const settled: { outcome?: AppendOutcome } = {};
    const answered = new Promise<void>((resolve) => {
      const c = call(0, settled);
      thread.enqueue({ ...c, resolve: (o) => { settled.outcome = o; resolve(); } });
    });
    await answered;
    const read = thread.visible();
    expect(read).toBeInstanceOf(Promise);
    let seen = false;
    void read!.then(() => { seen = true; });
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(seen).toBe(false);
    worker!.postMessage({ kind: 'durable' });
    await read;
    expect(seen).toBe(true);
    expect(thread.visible()).toBeUndefined();
    expect(thread.syncs).toBe(1);
    await thread.close();
  });
});
