/**
 * The SQLite writer thread does not inherit the server's old-generation floor (issue #33 item 9,
 * the soak). A production server runs with `node --initial-old-space-size=128`; V8 flags belong
 * to the process, so without care the writer thread's isolate got that floor too and, allocating
 * little, collected nothing in full until 128 MB of garbage had piled up (bench/soak.md: the
 * server's RSS climbed by some 120 MB over 15 minutes). The store clears the flag right before it
 * starts the thread (V8 reads it when an isolate is created; the main thread keeps its floor).
 *
 * Checked here by the flag call made when the thread is started (startWorker clears it right
 * before `new Worker`; the thread's heap is not observable from outside it); bench/soak.md has the
 * writer thread's heap measured with and without it.
 */
import v8 from 'node:v8';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { SessionEvent } from '../../src/domain/event.js';
import { loadMetrics } from '../../src/server/metrics.js';
import { THREAD_YOUNG_GENERATION_MB, startWorker } from '../../src/store/sqlite/append-thread.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { threadHeaps, trackThread } from '../../src/store/sqlite/thread-heap.js';
import { tempDbDir } from '../support/temp-db.js';

const dbs = tempDbDir('palimpsest-writer-heap-');
afterEach(() => {
  vi.restoreAllMocks();
});

describe('the SQLite writer thread', () => {
  it('is started with the old-generation floor cleared for new threads', async () => {
    // Recorded, not applied: the test process's own flags stay as they are.
    const flags = vi.spyOn(v8, 'setFlagsFromString').mockImplementation(() => undefined);
    const store = new SqliteSessionStore({ path: dbs.freshPath(), appendWriter: 'thread' });
    try {
      await store.writerReady();
      expect(flags).toHaveBeenCalledWith('--initial-old-space-size=0');
    } finally {
      await store.close();
    }
  });

  it('an inline writer (no thread) leaves the flags alone', async () => {
    const flags = vi.spyOn(v8, 'setFlagsFromString');
    const store = new SqliteSessionStore({ path: dbs.freshPath(), appendWriter: 'inline' });
    await store.close();
    expect(flags).not.toHaveBeenCalled();
  });

  it('palimpsest_thread_heap_* report the writer thread while it runs, with its young generation bounded, and no writer once it has exited', async () => {
    const metrics = await loadMetrics(false);
    metrics.trackThreadHeaps(() => threadHeaps());
    const sample = async (name: string, labels: string): Promise<number | undefined> => {
      const m = new RegExp(`^${name}\\{${labels}\\} (\\d+)$`, 'm').exec(await metrics.registry.metrics());
      return m === null ? undefined : Number(m[1]);
    };
    let worker: Worker | undefined;
    const store = new SqliteSessionStore({ path: dbs.freshPath(), appendWriter: 'thread', startWriter: (c) => (worker = startWorker(c)) });
    await store.writerReady();
    // The bound (V8's default is 48: two 16 MB semispaces).
    expect(THREAD_YOUNG_GENERATION_MB).toBeLessThan(48);
    expect(worker!.resourceLimits?.maxYoungGenerationSizeMb).toBe(THREAD_YOUNG_GENERATION_MB);
    await store.createSession({ header: { version: 0, id: 's', createdAt: 1_700_000_000_000 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w' }, []);
    const note = (seq: number): SessionEvent => ({ type: 'x/note', seq, time: 1_700_000_000_000 + seq, data: { pad: 'p'.repeat(2000) } }) as unknown as SessionEvent;
    for (let from = 0; from < 1000; from += 100) {
      const r = await store.append('s', { expectedNextSeq: from, expectedWriter: 'w', writer: 'w', events: Array.from({ length: 100 }, (_, i) => note(from + i)), surfaceLength: from + 100 });
      expect(r.kind).toBe('appended');
    }
    const used = await sample('palimpsest_thread_heap_used_bytes', 'thread="writer"');
    const total = await sample('palimpsest_thread_heap_total_bytes', 'thread="writer"');
    expect(used).toBeGreaterThan(100_000);
    expect(total).toBeGreaterThanOrEqual(used!);
    expect(await sample('palimpsest_thread_heap_physical_bytes', 'thread="writer"')).toBeGreaterThan(0);
    expect(await sample('palimpsest_thread_heap_space_used_bytes', 'thread="writer",space="old_space"')).toBeGreaterThan(0);
    // Two semispaces of a third of the young generation each.
    const newSpace = await sample('palimpsest_thread_heap_space_size_bytes', 'thread="writer",space="new_space"');
    expect(newSpace).toBeGreaterThan(0);
    expect(newSpace).toBeLessThanOrEqual((2 * THREAD_YOUNG_GENERATION_MB * 2 ** 20) / 3);
    await store.close();
    // Exited threads are not waited for (the scrape answers at once) and not reported.
    const t = performance.now();
    expect(await threadHeaps()).toEqual([]);
    expect(performance.now() - t).toBeLessThan(500);
    expect(await sample('palimpsest_thread_heap_used_bytes', 'thread="writer"')).toBeUndefined();
  });

  it('a scrape waiting for a thread that exits without answering ends at the exit, not at its timeout', async () => {
    // A tracked thread that never answers heap requests (as one inside a long batch, then gone).
    const silent = new Worker('setInterval(() => {}, 1000);', { eval: true });
    await new Promise((resolve) => silent.once('online', resolve));
    trackThread(silent);
    const t = performance.now();
    const scrape = threadHeaps(10_000);
    await silent.terminate();
    expect(await scrape).toEqual([]);
    expect(performance.now() - t).toBeLessThan(2_000);
  });
});
