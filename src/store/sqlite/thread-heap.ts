/**
 * The V8 heaps of the SQLite store's worker threads (the writer thread, the search follower's
 * thread), for /metrics (palimpsest_thread_heap_*; issue #33 item 9). Each isolate has a heap of
 * its own that the main thread's `nodejs_heap_*` metrics do not cover, and Node 20's Worker has no
 * getHeapStatistics(): each thread answers a request on a BroadcastChannel with its own
 * v8.getHeapStatistics() and getHeapSpaceStatistics() (`answerHeapRequests`, called once by the
 * thread's entry; the channel is unref'd, so it never keeps a thread alive).
 *
 * `threadHeaps()` (main thread) asks every running thread started by startThread and resolves with
 * the answers that arrive within `timeoutMs` (a thread inside a long synchronous batch answers
 * after it; it is left out of that scrape rather than holding it up).
 */
import v8 from 'node:v8';
import { threadId, type Worker } from 'node:worker_threads';

const CHANNEL = 'palimpsest-thread-heap';

/** One V8 heap space of a thread (new_space, old_space, code_space, large_object_space...). */
export interface HeapSpace {
  readonly name: string;
  /** Bytes reserved for the space (what it grew to). */
  readonly size: number;
  readonly used: number;
  /** Bytes of the space resident in memory. */
  readonly physical: number;
}

/** A thread's heap statistics. */
export interface ThreadHeap {
  /** What the thread is (`writer`, `search-follower`). */
  readonly thread: string;
  readonly threadId: number;
  readonly used: number;
  readonly total: number;
  /** Bytes of the heap resident in memory (V8's total_physical_size). */
  readonly physical: number;
  /** Bytes V8 itself holds with malloc (outside its pages). */
  readonly malloced: number;
  /** Bytes of ArrayBuffers and other memory outside the heap that its objects hold. */
  readonly external: number;
  readonly spaces: readonly HeapSpace[];
}

type Request = { readonly op: 'heap?'; readonly id: number };
type Answer = { readonly op: 'heap'; readonly id: number; readonly heap: ThreadHeap };

/** This thread's statistics under the name `thread`. */
export function ownHeap(thread: string): ThreadHeap {
  const h = v8.getHeapStatistics();
  return {
    thread, threadId, used: h.used_heap_size, total: h.total_heap_size, physical: h.total_physical_size, malloced: h.malloced_memory, external: h.external_memory,
    spaces: v8.getHeapSpaceStatistics().map((s) => ({ name: s.space_name, size: s.space_size, used: s.space_used_size, physical: s.physical_space_size })),
  };
}

/** In a worker thread's entry: answers the main thread's requests for this thread's heap as `thread`. */
export function answerHeapRequests(thread: string): void {
  const bc = new BroadcastChannel(CHANNEL);
  bc.onmessage = (e: MessageEvent) => {
    const m = e.data as Request | Answer | undefined;
    if (m?.op === 'heap?') bc.postMessage({ op: 'heap', id: m.id, heap: ownHeap(thread) } satisfies Answer);
  };
  (bc as unknown as { unref(): void }).unref();
}

/** The threads started by startThread and not yet exited (main thread). */
const running = new Set<number>();

/** The scrapes in progress: each re-checks whether it has every answer when a thread exits. */
const scrapes = new Set<() => void>();

/** Counts `worker` among the threads `threadHeaps` waits for until it exits. */
export function trackThread(worker: Worker): void {
  const id = worker.threadId;
  running.add(id);
  worker.once('exit', () => {
    running.delete(id);
    // A scrape waiting for this thread's answer has no reason to wait for its timeout now.
    for (const check of [...scrapes]) check();
  });
}

let nextId = 1;

/** The heaps of the running worker threads that answer within `timeoutMs`, in thread id order. */
export function threadHeaps(timeoutMs = 1000): Promise<ThreadHeap[]> {
  if (running.size === 0) return Promise.resolve([]);
  const id = nextId++;
  const bc = new BroadcastChannel(CHANNEL);
  const got = new Map<number, ThreadHeap>();
  return new Promise<ThreadHeap[]>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      scrapes.delete(check);
      bc.close();
      // Only threads still running (one that answered and then exited is not reported).
      resolve([...got.values()].filter((h) => running.has(h.threadId)).sort((a, b) => a.threadId - b.threadId));
    };
    const check = (): void => {
      if ([...running].every((t) => got.has(t))) done();
    };
    const timer = setTimeout(done, timeoutMs);
    scrapes.add(check);
    bc.onmessage = (e: MessageEvent) => {
      const m = e.data as Request | Answer | undefined;
      if (m?.op !== 'heap' || m.id !== id || !running.has(m.heap.threadId)) return;
      got.set(m.heap.threadId, m.heap);
      check();
    };
    bc.postMessage({ op: 'heap?', id } satisfies Request);
  });
}
