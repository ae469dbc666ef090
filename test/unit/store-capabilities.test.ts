/**
 * The optional store capabilities the app probes at run time (src/app/ports/capabilities.ts): a
 * store has one only when it has the method, whatever else it has; the storage monitor's Proxy
 * keeps the answer.
 */
import { describe, expect, it } from 'vitest';
import { hasEncodedEventPages, hasSurfaceStructureReads } from '../../src/app/ports/capabilities.js';
import { monitorStorage } from '../../src/app/storage-monitor.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';

describe('store capabilities', () => {
  it('the memory store replays surfaces but encodes no pages; a monitored store answers the same', async () => {
    const store = new MemorySessionStore();
    try {
      expect(hasSurfaceStructureReads(store)).toBe(true);
      expect(hasEncodedEventPages(store)).toBe(false);
      const monitored = monitorStorage(store, { error: () => undefined, warn: () => undefined });
      expect(hasSurfaceStructureReads(monitored)).toBe(true);
      expect(hasEncodedEventPages(monitored)).toBe(false);
    } finally {
      await store.close();
    }
  });

  it('the SQLite store has both; an object without the methods has neither', async () => {
    const store = new SqliteSessionStore({ path: ':memory:' });
    try {
      expect(hasSurfaceStructureReads(store)).toBe(true);
      expect(hasEncodedEventPages(store)).toBe(true);
    } finally {
      await store.close();
    }
    expect(hasSurfaceStructureReads({ readSurfaceStructure: undefined })).toBe(false);
    expect(hasEncodedEventPages({})).toBe(false);
  });
});
