/**
 * What an append costs in write(2) bytes, on both of the store's writers: a multi-statement call
 * runs in a SAVEPOINT whose statement journal grows by ~3 KB per event, and with SQLite's default
 * temp store that journal spills to a temporary file past 64 KiB (open-database.ts,
 * configureConnection). Counted by the kernel for this process (/proc/self/io `wchar`: every
 * write(2) and pwrite(2) of every thread, the writer thread's included, whatever file).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { WRITER0, newSession } from './store-contract.js';

const root = mkdtempSync(join(tmpdir(), 'palimpsest-temp-store-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Bytes this process handed to write(2)-family calls so far. */
function written(): number {
  const line = readFileSync('/proc/self/io', 'utf8').split('\n').find((l) => l.startsWith('wchar:'));
  if (line === undefined) throw new Error('/proc/self/io has no wchar line');
  return Number(line.slice('wchar:'.length));
}

const DATA = { n: 1, text: 'The quick brown fox jumps over the lazy dog; '.repeat(4) };
const CALLS_PER_GROUP = 8;
const EVENTS_PER_CALL = 100;
const GROUPS = 25;

/** Appends GROUPS groups of CALLS_PER_GROUP concurrent 100-event calls; returns the bytes written per event. */
async function bytesPerEvent(appendWriter: 'inline' | 'thread'): Promise<{ perEvent: number; stored: number }> {
  const store = new SqliteSessionStore({ path: join(root, `${appendWriter}.db`), appendWriter });
  try {
    await store.createSession(newSession('s'), []);
    let next = 0;
    let writer = WRITER0;
    let token = 0;
    const group = (): Promise<unknown[]> => {
      const calls: Promise<unknown>[] = [];
      for (let c = 0; c < CALLS_PER_GROUP; c++) {
        const events: SessionEvent[] = Array.from({ length: EVENTS_PER_CALL }, (_, i) => ({ type: 'bench/tick', seq: next + i, time: 1_700_000_000_000, data: DATA }));
        const own = `g${token++}`;
        calls.push(store.append('s', { expectedNextSeq: next, expectedWriter: writer, writer: own, events, surfaceLength: 0 }));
        next += EVENTS_PER_CALL;
        writer = own;
      }
      return Promise.all(calls);
    };
    await group(); // the writer thread starts, the first pages exist
    const before = written();
    const from = next;
    for (let g = 0; g < GROUPS; g++) {
      for (const outcome of await group()) expect(outcome).toEqual({ kind: 'appended' });
    }
    const perEvent = (written() - before) / (next - from);
    const stored = (await store.getSession('s'))?.eventCount ?? 0;
    return { perEvent, stored };
  } finally {
    await store.close();
  }
}

describe.runIf(process.platform === 'linux')('write(2) bytes per appended event (SQLite store, durability full)', () => {
  // Measured: 744 B per event with the statement journal in memory (the WAL's frames and the
  // checkpoints), 3,711 B with SQLite's default temp store (bench/history/round-10.md).
  for (const appendWriter of ['inline', 'thread'] as const) {
    it(`${appendWriter} writer: 100-event calls write under 2,000 B per ~300 B event (no statement journal on disk)`, async () => {
      const { perEvent, stored } = await bytesPerEvent(appendWriter);
      expect(stored).toBe((GROUPS + 1) * CALLS_PER_GROUP * EVENTS_PER_CALL);
      expect(perEvent).toBeGreaterThan(300);
      expect(perEvent).toBeLessThan(2000);
    });
  }
});
