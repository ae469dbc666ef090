/**
 * The SQLite store's writer thread: appends are written by a worker thread on a connection of its
 * own (append-thread-worker.ts), so the inserts, the COMMIT and its fsync never block the event
 * loop, which meanwhile decodes, validates and plans the next requests. The thread runs the same
 * GroupCommit as the store's own connection would (the same compare-and-set per call, the same
 * quota and idempotency checks inside the one write transaction); the store encodes the rows
 * before handing them over.
 *
 * Durability 'full' keeps its promise across the two connections: a call settles once a sync
 * covering its group completed, and a read of the store that may have seen a group not yet
 * durable (the thread's COMMIT makes it visible before the background fdatasync ends) answers
 * only once that group is durable (`visible()`, over a CommitGate in shared memory). The calls of
 * one event-loop turn go to the thread in one message; the thread groups whatever arrived while
 * it was committing into its next transaction.
 *
 * If the thread fails (it cannot open the file, a WAL sync failed, or it died), every queued and
 * later append fails with a StorageError `unavailable`, and so do reads (fail-stop, like a failed
 * WAL sync of the store's own connection): restart the process.
 */
import v8 from 'node:v8';
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { StorageError } from '../../app/storage-error.js';
import { StoreClosedError } from '../store-errors.js';
import { APPENDED, type AppendQueue, type QueuedAppend, type WriteCounters } from './group-commit.js';
import { SharedCommitGate, fromWireError, packCall, type FromWriter, type PackedCall, type WriterConfig } from './append-thread-wire.js';
import { OwedCalls } from './owed-calls.js';
import { trackThread } from './thread-heap.js';

type Callbacks = Pick<QueuedAppend, 'resolve' | 'reject'>;

/** A read waiting for the groups it may have seen to be durable. */
interface WaitingRead {
  readonly group: number;
  readonly resolve: () => void;
  readonly reject: (e: unknown) => void;
}

/** What the store gives the thread (the gate's memory is made here). */
export type AppendThreadConfig = Omit<WriterConfig, 'gate'>;

/**
 * Clears V8's old-generation floor for the isolates created from now on, i.e. the writer thread's.
 * A production server runs with `node --initial-old-space-size=128` (docs/operations.md): a flag
 * of the process, so every isolate gets it, and V8 reads it when an isolate is created. The main
 * thread, created already, keeps it (it is what keeps its full collections rare under load). The
 * writer thread allocates little and keeps little, so under that floor it collected nothing in
 * full until 128 MB of garbage had piled up: the soak (bench/soak.md) saw the server's RSS climb
 * by some 120 MB over 15 minutes from that alone. Without it the thread's heap stays a few MB.
 */
export function clearOldSpaceFloorForNewThreads(): void {
  v8.setFlagsFromString('--initial-old-space-size=0');
}

/**
 * The young generation of the store's worker threads (writer, search follower), in MB: V8's
 * `resourceLimits.maxYoungGenerationSizeMb`, a third of it per semispace. V8's default (48: two
 * 16 MB semispaces) lets a thread's new space grow with its allocation rate to 32 MB committed and
 * stay there: the soak (bench/soak.md, 2026-12-05) saw the writer's new space go 1 -> 16 -> 32 MB
 * as throughput rose, with its live objects flat at ~5 MB (heap snapshots), i.e. RSS following
 * the load, not a leak. 12 (4 MB semispaces, new space at most 8 MB) keeps the threads' heaps
 * small for the CPU time of more, cheaper scavenges (measured: docs/operations.md). The old
 * generation keeps V8's limit: a hard bound there would turn a burst of large appends into a
 * writer thread out of memory, i.e. a fail-stopped store.
 */
export const THREAD_YOUNG_GENERATION_MB = 12;

/** The writer thread's entry (append-thread-worker.ts) with `config`. */
export function startWorker(config: WriterConfig): Worker {
  return startThread('append-thread-worker', config);
}

/**
 * Starts the worker thread whose entry is the module `name` of this directory, with `workerData`:
 * the compiled .js next to this file, or the .ts source through tsx (tests, development). The
 * search index's follower thread (search-follow-thread.ts) starts the same way.
 */
export function startThread(name: string, workerData: unknown): Worker {
  clearOldSpaceFloorForNewThreads();
  const here = import.meta.url;
  const resourceLimits = { maxYoungGenerationSizeMb: THREAD_YOUNG_GENERATION_MB };
  let worker: Worker;
  if (!here.endsWith('.ts')) worker = new Worker(new URL(`./${name}.js`, here), { workerData, resourceLimits });
  else {
    // tsx's ESM API (require.resolve answers its CommonJS twin, which registers the wrong path).
    const tsx = pathToFileURL(createRequire(here).resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
    const entry = new URL(`./${name}.ts`, here).href;
    const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); })`;
    worker = new Worker(boot, { eval: true, workerData, resourceLimits });
  }
  // Its heap in /metrics (thread-heap.ts; the entry answers under its own name).
  trackThread(worker);
  return worker;
}

/** The writer thread as the store's {@link AppendQueue} (see the module comment). */
export class AppendThread implements AppendQueue {
  #worker: Worker | undefined;
  readonly #pending = new OwedCalls<Callbacks>();
  #outbox: PackedCall[] = [];
  #postScheduled = false;
  #nextId = 1;
  #failure: StorageError | undefined;
  #closing: Promise<void> | undefined;
  /** The thread's counters as last reported. */
  #reported: WriteCounters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
  /** Background durability only: what the thread has made visible and durable. */
  readonly #gate: SharedCommitGate | undefined;
  #waitingReads: WaitingRead[] = [];
  #syncs = 0;
  #handOvers = 0;
  #checkpoints = 0;
  #opened = false;
  #readyWaiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  readonly #config: WriterConfig;
  readonly #flushTurn = (): void => this.flush();

  constructor(
    config: AppendThreadConfig,
    /** The store's counters: the thread's commits are added as it reports them. */
    private readonly counters: WriteCounters,
    /** Called with the heads each answered group moved (it is durable by then), before its calls settle. */
    private readonly onHeads: (heads: readonly (readonly [string, number, number])[]) => void,
    /** Starts the thread (tests start a scripted one). */
    private readonly start: (config: WriterConfig) => Worker = startWorker,
  ) {
    this.#gate = config.durability === 'full' && config.fullSync === 'background' ? new SharedCommitGate() : undefined;
    this.#config = { ...config, gate: this.#gate?.buffer };
  }

  /** Messages that handed appends to the thread. */
  get handOvers(): number {
    return this.#handOvers;
  }

  /** The thread's background WAL syncs, as last reported. */
  get syncs(): number {
    return this.#syncs;
  }

  /** WAL checkpoints run off the thread (wal-checkpointer.ts), as last reported. */
  get checkpoints(): number {
    return this.#checkpoints;
  }

  /** Set once the thread failed: the store is fail-stop from then on. */
  get failure(): StorageError | undefined {
    return this.#failure;
  }

  /**
   * Starts the thread now (it starts with the first append otherwise) and resolves once its
   * connection is open; rejects with the failure if it cannot open the file. The server awaits
   * this at start-up, so a database the thread cannot open fails the start, not the first append.
   */
  ready(): Promise<void> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#closing !== undefined) return Promise.reject(new StoreClosedError());
    if (this.#opened) return Promise.resolve();
    const worker = this.#thread();
    if (worker === undefined) return Promise.reject(this.#failure);
    worker.ref();
    return new Promise<void>((resolve, reject) => this.#readyWaiters.push({ resolve, reject }));
  }

  /** The thread's connection is open: every ready() resolves. */
  #settleReady(): void {
    const waiters = this.#readyWaiters;
    this.#readyWaiters = [];
    for (const w of waiters) w.resolve();
    this.#unrefIfIdle();
  }

  /** Referenced only while answers are owed (or closing): an idle writer never keeps the process alive. */
  #unrefIfIdle(): void {
    if (this.#closing === undefined && this.#pending.size === 0 && this.#outbox.length === 0 && this.#waitingReads.length === 0) {
      this.#worker?.unref();
    }
  }

  /**
   * After a read of the store: undefined when everything the thread made visible is durable, else
   * a promise that resolves once what was visible at this call is (rejects if the thread failed).
   */
  visible(): Promise<void> | undefined {
    const group = this.#gate?.owed() ?? 0;
    if (group === 0) return undefined;
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    this.#worker?.ref();
    return new Promise<void>((resolve, reject) => this.#waitingReads.push({ group, resolve, reject }));
  }

  /**
   * After a read of feed records: undefined when everything the thread made visible is durable,
   * else the highest feed position known durable (records above it wait for `visible()`).
   */
  durableFeedPosition(): number | undefined {
    const gate = this.#gate;
    if (gate === undefined || gate.owed() === 0) return undefined;
    return gate.durableFeedPosition();
  }

  enqueue(call: QueuedAppend): void {
    if (this.#failure !== undefined) {
      call.reject(this.#failure);
      return;
    }
    const id = this.#nextId++;
    this.#pending.add(id, { resolve: call.resolve, reject: call.reject });
    this.#outbox.push(packCall(id, call));
    // Without a background sync: handed over at the end of this macrotask (the calls it made go
    // in one message), not at the end of the I/O phase: the thread then writes one request while
    // the event loop decodes and plans the next, instead of the two taking turns. With one, at
    // the end of the I/O phase: the thread holds what arrives while a sync runs anyway (see
    // GroupCommit.flushTurn), and grpc-js hands over each unary request in a macrotask of its
    // own, so a message per macrotask would be a postMessage per call (the largest single cost
    // of a one-event append in the event loop's profile, bench/history/issue-37-grpc-js.md).
    if (!this.#postScheduled) {
      this.#postScheduled = true;
      if (this.#gate !== undefined) setImmediate(this.#flushTurn);
      else queueMicrotask(this.#flushTurn);
    }
  }

  flush(): void {
    this.#postScheduled = false;
    if (this.#outbox.length === 0 || this.#failure !== undefined) return;
    const calls = this.#outbox;
    this.#outbox = [];
    const worker = this.#thread();
    if (worker === undefined) return;
    // Referenced only while answers are owed: an idle writer never keeps the process alive.
    worker.ref();
    this.#handOvers++;
    worker.postMessage({ kind: 'append', calls });
  }

  /** Writes what is queued, lets the thread answer it and close its connection. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.flush();
    const worker = this.#worker;
    if (worker === undefined) return;
    if (this.#failure === undefined) {
      // Referenced for the handshake: the answers to what is queued and the thread's own close.
      worker.ref();
      await new Promise<void>((resolve) => {
        worker.on('message', (m: FromWriter) => {
          if (m.kind === 'closed') resolve();
        });
        worker.once('exit', () => resolve());
        worker.postMessage({ kind: 'close' });
      });
    }
    await worker.terminate();
    // A thread that died during the handshake answered nothing more; what it had may be stored.
    if (this.#pending.size > 0 || this.#waitingReads.length > 0 || this.#readyWaiters.length > 0) {
      this.#settleAll(new StorageError('unavailable', 'WRITER_THREAD_FAILED',
        'the SQLite writer thread exited while the store closed; an append in flight may have been stored'));
    }
  }

  #thread(): Worker | undefined {
    if (this.#worker !== undefined) return this.#worker;
    let worker: Worker;
    try {
      worker = this.start(this.#config);
    } catch (e) {
      this.#fail(`the SQLite writer thread cannot start: ${(e as Error).message}`, e);
      return undefined;
    }
    worker.on('message', (m: FromWriter) => this.#onMessage(m));
    worker.on('error', (e) => this.#fail(`the SQLite writer thread failed: ${e.message}`, e));
    worker.on('exit', (code) => {
      if (this.#closing === undefined) this.#fail(`the SQLite writer thread exited (code ${code})`);
    });
    this.#worker = worker;
    return worker;
  }

  #onMessage(m: FromWriter): void {
    if (m.kind === 'opened') {
      this.#opened = true;
      this.#settleReady();
      return;
    }
    if (m.kind === 'open-failed') {
      this.#fail(`the SQLite writer thread cannot open ${this.#config.path}: ${m.error.message}`, fromWireError(m.error));
      return;
    }
    if (m.kind === 'fatal') {
      this.#fail(`a WAL sync of the SQLite writer thread failed: ${m.error.message}`, fromWireError(m.error));
      return;
    }
    if (m.kind !== 'done') return;
    const c = m.counters;
    const last = this.#reported;
    this.counters.commits += c.commits - last.commits;
    this.counters.groupCommits += c.groupCommits - last.groupCommits;
    this.counters.appends += c.appends - last.appends;
    this.counters.maxGroupSize = Math.max(this.counters.maxGroupSize, c.maxGroupSize);
    this.#reported = c;
    this.#syncs = m.syncs;
    this.#checkpoints = m.checkpoints;
    if (m.heads.length > 0) this.onHeads(m.heads);
    for (const r of m.results) {
      if (typeof r === 'number') {
        this.#pending.take(r)?.resolve(APPENDED);
        continue;
      }
      const [id, outcome, error] = r;
      const call = this.#pending.take(id);
      if (call === undefined) continue;
      if (error !== null) call.reject(fromWireError(error));
      else call.resolve(outcome!);
    }
    if (this.#waitingReads.length > 0) {
      const durable = this.#gate!.durableUpTo();
      const still: WaitingRead[] = [];
      for (const r of this.#waitingReads) {
        if (r.group <= durable) r.resolve();
        else still.push(r);
      }
      this.#waitingReads = still;
    }
    // Closing: the handshake holds the process until the thread's `closed` (see #close).
    this.#unrefIfIdle();
  }

  #fail(message: string, cause?: unknown): void {
    if (this.#failure !== undefined) return;
    this.#failure = new StorageError('unavailable', 'WRITER_THREAD_FAILED', `${message}; appends are refused until the process restarts`, { cause });
    this.#outbox = [];
    this.#settleAll(this.#failure);
    // Fail-stop: the thread writes nothing more (and keeps no process alive once it exited).
    const worker = this.#worker;
    if (worker !== undefined) {
      worker.unref();
      void worker.terminate();
    }
  }

  /** Rejects every call, read and ready() still waiting for the thread. */
  #settleAll(error: unknown): void {
    const pending = this.#pending.takeAll();
    for (const call of pending) call.reject(error);
    const waiting = [...this.#waitingReads, ...this.#readyWaiters];
    this.#waitingReads = [];
    this.#readyWaiters = [];
    for (const w of waiting) w.reject(error);
  }
}
