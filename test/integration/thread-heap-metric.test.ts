/**
 * The SQLite store's worker threads' V8 heaps in /metrics (issue #33 item 9: the soak could not
 * see them): palimpsest_thread_heap_* by thread while the writer thread runs, the new space among
 * the spaces, and nothing for a thread once it has exited.
 */
import { describe, expect, it } from 'vitest';
import { loadMetrics } from '../../src/server/metrics.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { threadHeaps } from '../../src/store/sqlite/thread-heap.js';
import { tempDbDir } from '../support/temp-db.js';

const dirs = tempDbDir('palimpsest-thread-heap-');

describe('palimpsest_thread_heap_* (worker threads\' V8 heaps)', () => {
  it('reports the writer thread\'s heap while it runs, and no writer once it has exited', async () => {
    const metrics = await loadMetrics(false);
    metrics.trackThreadHeaps(() => threadHeaps());
    const sample = async (name: string, labels: string): Promise<number | undefined> => {
      const m = new RegExp(`^${name}\\{${labels}\\} (\\d+)$`, 'm').exec(await metrics.registry.metrics());
      return m === null ? undefined : Number(m[1]);
    };
    const store = new SqliteSessionStore({ path: dirs.freshPath(), appendWriter: 'thread' });
    await store.writerReady();
    const used = await sample('palimpsest_thread_heap_used_bytes', 'thread="writer"');
    const total = await sample('palimpsest_thread_heap_total_bytes', 'thread="writer"');
    expect(used).toBeGreaterThan(100_000);
    expect(total).toBeGreaterThanOrEqual(used!);
    expect(await sample('palimpsest_thread_heap_physical_bytes', 'thread="writer"')).toBeGreaterThan(0);
    expect(await sample('palimpsest_thread_heap_space_size_bytes', 'thread="writer",space="new_space"')).toBeGreaterThan(0);
    expect(await sample('palimpsest_thread_heap_space_used_bytes', 'thread="writer",space="old_space"')).toBeGreaterThan(0);
    await store.close();
    // Exited threads are not waited for (the scrape answers at once) and not reported.
    const t = performance.now();
    expect(await threadHeaps()).toEqual([]);
    expect(performance.now() - t).toBeLessThan(500);
    expect(await sample('palimpsest_thread_heap_used_bytes', 'thread="writer"')).toBeUndefined();
  });
});
