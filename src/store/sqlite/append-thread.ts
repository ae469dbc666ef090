/**
 * The SQLite store's writer thread: appends are written by a worker thread on a connection of its
 * own (append-thread-worker.ts), so the inserts, the COMMIT and its fsync never block the event
 * loop, which meanwhile decodes, validates and plans the next requests. The thread runs the same
 * GroupCommit as the store's own connection would (the same compare-and-set per call, the same
 * quota and idempotency checks inside the one write transaction); the store encodes the rows
 * before handing them over.
 *
 * Durability 'full': the thread's connection commits with synchronous=FULL, so a group is on disk
 * before it becomes visible to any other connection, the store's reads included, and its calls
 * settle after that. The calls of one event-loop turn go to the thread in one message; the thread
 * groups whatever arrived while it was committing into its next transaction.
 *
 * If the thread fails (it cannot open the file, or it dies), every queued and later append fails
 * with a StorageError `unavailable` (fail-stop, like a failed WAL sync): restart the process.
 */
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { StorageError } from '../../app/storage-error.js';
import type { AppendQueue, QueuedAppend, WriteCounters } from './group-commit.js';
import { fromWireError, type FromWriter, type WireCall, type WriterConfig } from './append-thread-wire.js';

type Callbacks = Pick<QueuedAppend, 'resolve' | 'reject'>;

/** The worker's entry: the compiled .js next to this file, or the .ts source through tsx (tests, development). */
function startWorker(config: WriterConfig): Worker {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return new Worker(new URL('./append-thread-worker.js', here), { workerData: config });
  // tsx's ESM API (require.resolve answers its CommonJS twin, which registers the wrong path).
  const tsx = pathToFileURL(createRequire(here).resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
  const entry = new URL('./append-thread-worker.ts', here).href;
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); })`;
  return new Worker(boot, { eval: true, workerData: config });
}

/** The writer thread as the store's {@link AppendQueue} (see the module comment). */
export class AppendThread implements AppendQueue {
  #worker: Worker | undefined;
  readonly #pending = new Map<number, Callbacks>();
  #outbox: WireCall[] = [];
  #postScheduled = false;
  #nextId = 1;
  #failure: StorageError | undefined;
  #closing: Promise<void> | undefined;
  /** The thread's counters as last reported. */
  #reported: WriteCounters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };

  constructor(
    private readonly config: WriterConfig,
    /** The store's counters: the thread's commits are added as it reports them. */
    private readonly counters: WriteCounters,
    /** Called with the heads each answered group moved (it is durable by then), before its calls settle. */
    private readonly onHeads: (heads: readonly (readonly [string, number, number])[]) => void,
  ) {}

  /** Set once the thread failed: the store is fail-stop from then on. */
  get failure(): StorageError | undefined {
    return this.#failure;
  }

  enqueue(call: QueuedAppend): void {
    if (this.#failure !== undefined) {
      call.reject(this.#failure);
      return;
    }
    const id = this.#nextId++;
    this.#pending.set(id, { resolve: call.resolve, reject: call.reject });
    this.#outbox.push({
      id,
      sessionId: call.sessionId,
      expectedNextSeq: call.expectedNextSeq,
      expectedWriter: call.expectedWriter,
      writer: call.writer,
      rows: call.rows,
      dataBytes: call.dataBytes,
      surfaceLength: call.surfaceLength,
      idempotency: call.idempotency,
      maxBytes: call.maxBytes,
      at: call.at,
    });
    if (!this.#postScheduled) {
      this.#postScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(): void {
    this.#postScheduled = false;
    if (this.#outbox.length === 0 || this.#failure !== undefined) return;
    const calls = this.#outbox;
    this.#outbox = [];
    const worker = this.#thread();
    // Referenced only while answers are owed: an idle writer never keeps the process alive.
    worker.ref();
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
      await new Promise<void>((resolve) => {
        worker.on('message', (m: FromWriter) => {
          if (m.kind === 'closed') resolve();
        });
        worker.once('exit', () => resolve());
        worker.postMessage({ kind: 'close' });
      });
    }
    await worker.terminate();
  }

  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    const worker = startWorker(this.config);
    worker.on('message', (m: FromWriter) => this.#onMessage(m));
    worker.on('error', (e) => this.#fail(`the SQLite writer thread failed: ${e.message}`, e));
    worker.on('exit', (code) => {
      if (this.#closing === undefined) this.#fail(`the SQLite writer thread exited (code ${code})`);
    });
    this.#worker = worker;
    return worker;
  }

  #onMessage(m: FromWriter): void {
    if (m.kind === 'open-failed') {
      this.#fail(`the SQLite writer thread cannot open ${this.config.path}: ${m.error.message}`, fromWireError(m.error));
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
    if (m.heads.length > 0) this.onHeads(m.heads);
    for (const [id, outcome, error] of m.results) {
      const call = this.#pending.get(id);
      if (call === undefined) continue;
      this.#pending.delete(id);
      if (error !== null) call.reject(fromWireError(error));
      else call.resolve(outcome!);
    }
    if (this.#pending.size === 0 && this.#outbox.length === 0) this.#worker?.unref();
  }

  #fail(message: string, cause?: unknown): void {
    if (this.#failure !== undefined) return;
    this.#failure = new StorageError('unavailable', 'WRITER_THREAD_FAILED', `${message}; appends are refused until the process restarts`, { cause });
    this.#outbox = [];
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const call of pending) call.reject(this.#failure);
  }
}
