/**
 * RecentDeletes (src/store/sqlite/recent-deletes.ts): the SQLite store's memory of the sessions
 * it deleted lately, against late head lines. It must keep a deleted incarnation long enough (a
 * sync) and must not grow with the number of deletes ever made: the soak (bench/soak.md) found
 * the Set it replaces to be the one structure of the server's heap growing under steady deletes.
 */
import { describe, expect, it } from 'vitest';
import { RecentDeletes } from '../../src/store/sqlite/recent-deletes.js';

function clocked(maxAgeMs: number, maxEntries: number) {
  let t = 1_000;
  const r = new RecentDeletes(maxAgeMs, maxEntries, () => t);
  return { r, advance: (ms: number) => { t += ms; } };
}

describe('RecentDeletes', () => {
  it('remembers a deleted incarnation of an id, not the other incarnations of that id', () => {
    const { r } = clocked(60_000, 100);
    r.add('a', 5);
    expect(r.has('a', 5)).toBe(true);
    expect(r.has('a', 6)).toBe(false);
    expect(r.has('b', 5)).toBe(false);
    r.add('a', 6);
    expect(r.has('a', 5) && r.has('a', 6)).toBe(true);
    expect(r.size).toBe(2);
    r.forget('a', 5);
    expect(r.has('a', 5)).toBe(false);
    expect(r.has('a', 6)).toBe(true);
    expect(r.size).toBe(1);
  });

  it('keeps an entry for its age, then empties: steady deletes do not grow it', () => {
    const { r, advance } = clocked(60_000, 10_000);
    r.add('old', 1);
    advance(59_000);
    r.add('x', 1);
    expect(r.has('old', 1)).toBe(true);
    advance(2_000);
    r.add('y', 1);
    expect(r.has('old', 1)).toBe(false);
    expect(r.has('x', 1)).toBe(true);
    // 100,000 deletes, one every 100 ms: only the last minute's stay.
    for (let i = 0; i < 100_000; i++) {
      advance(100);
      r.add(`s-${i}`, i);
    }
    expect(r.size).toBeLessThanOrEqual(601);
    expect(r.has('s-99999', 99999)).toBe(true);
    expect(r.has('s-1000', 1000)).toBe(false);
  });

  it('keeps at most maxEntries, the latest ones, whatever their age', () => {
    const { r } = clocked(3_600_000, 100);
    for (let i = 0; i < 1_000; i++) r.add(`s-${i}`, 1);
    expect(r.size).toBe(100);
    expect(r.has('s-999', 1)).toBe(true);
    expect(r.has('s-899', 1)).toBe(false);
  });
});
