/**
 * OwedCalls (src/store/sqlite/owed-calls.ts): the writer thread's unanswered calls by consecutive
 * id, answered in any order.
 */
import { describe, expect, it } from 'vitest';
import { OwedCalls } from '../../src/store/sqlite/owed-calls.js';
import { rng as seeded } from '../support/rng.js';

describe('OwedCalls', () => {
  it('answers each id once, in order or not; unknown and answered ids are undefined', () => {
    const owed = new OwedCalls<string>();
    for (let id = 1; id <= 5; id++) owed.add(id, `c${id}`);
    expect(owed.size).toBe(5);
    expect(owed.take(3)).toBe('c3');
    expect(owed.take(3)).toBeUndefined();
    expect(owed.take(9)).toBeUndefined();
    expect(owed.take(0)).toBeUndefined();
    expect(owed.take(1)).toBe('c1');
    expect(owed.size).toBe(3);
    owed.add(6, 'c6');
    expect(owed.takeAll()).toEqual(['c2', 'c4', 'c5', 'c6']);
    expect(owed.size).toBe(0);
    expect(owed.take(2)).toBeUndefined();
  });

  it('refuses an id that does not follow the last one; any first id once none is owed', () => {
    const owed = new OwedCalls<string>();
    owed.add(4, 'a');
    expect(() => owed.add(4, 'b')).toThrow(/does not follow 4/);
    expect(() => owed.add(2, 'b')).toThrow(/does not follow 4/);
    expect(() => owed.add(6, 'b')).toThrow(/does not follow 4/);
    expect(owed.take(4)).toBe('a');
    owed.add(9, 'c');
    expect(owed.take(9)).toBe('c');
  });

  it('matches a Map under random adds and out-of-order answers, across its compactions', () => {
    const rng = seeded(19);
    const owed = new OwedCalls<number>();
    const model = new Map<number, number>();
    let next = 1;
    for (let step = 0; step < 50_000; step++) {
      if (model.size === 0 || rng() < 0.52) {
        owed.add(next, next * 10);
        model.set(next, next * 10);
        next++;
      } else {
        // Mostly the oldest, sometimes any owed id, sometimes one never owed or already answered.
        const keys = [...model.keys()];
        const r = rng();
        const id = r < 0.6 ? keys[0]! : r < 0.95 ? keys[Math.floor(rng() * keys.length)]! : Math.floor(rng() * next) + 1;
        expect(owed.take(id)).toBe(model.get(id));
        model.delete(id);
      }
      expect(owed.size).toBe(model.size);
    }
    expect(owed.takeAll()).toEqual([...model.values()].sort((a, b) => a - b));
  });
});
