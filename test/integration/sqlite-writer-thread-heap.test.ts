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
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
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
});
