/**
 * OwedCalls (src/store/sqlite/owed-calls.ts): the writer thread's unanswered calls by ascending
 * id, answered in any order; and SessionHandle's planned batches (src/app/session-handle.ts).
 */
import { describe, expect, it } from 'vitest';
import { OwedCalls } from '../../src/store/sqlite/owed-calls.js';
import { SessionHandle } from '../../src/app/session-handle.js';
import type { SessionEvent } from '../../src/domain/event.js';
import type { SessionEngine } from '../../src/domain/session-engine.js';
import type { SessionRecord } from '../../src/app/store-port.js';
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

  it('refuses an id that does not ascend (the map would be wrong, not just slow)', () => {
    const owed = new OwedCalls<string>();
    owed.add(4, 'a');
    expect(() => owed.add(4, 'b')).toThrow(/does not ascend/);
    expect(() => owed.add(2, 'b')).toThrow(/does not ascend/);
    expect(owed.take(4)).toBe('a');
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

describe('SessionHandle planned batches', () => {
  const ev = (seq: number): SessionEvent => ({ type: 'user/message', seq, time: 0, data: { seq } }) as unknown as SessionEvent;
  const handle = (): SessionHandle => new SessionHandle('k', 's', { writer: 'w' } as unknown as SessionRecord, {} as unknown as SessionEngine);

  it('finds the events of batches handed to the store until they settle', () => {
    const h = handle();
    const a = [ev(1), ev(2), ev(3)];
    const b = [ev(4), ev(5)];
    h.addPlanned(a);
    h.addPlanned(b);
    h.addPlanned([]);
    expect(h.plannedEvent(2)).toBe(a[1]);
    expect(h.plannedEvent(5)).toBe(b[1]);
    expect(h.plannedEvent(6)).toBeUndefined();
    expect(h.plannedEvent(0)).toBeUndefined();
    h.removePlanned(a);
    expect(h.plannedEvent(2)).toBeUndefined();
    expect(h.plannedEvent(4)).toBe(b[0]);
    h.removePlanned(a);
    h.removePlanned(b);
    expect(h.plannedEvent(4)).toBeUndefined();
  });

  it('finds an event of a batch whose seqs are not consecutive', () => {
    const h = handle();
    const gappy = [ev(10), ev(12), ev(13)];
    h.addPlanned(gappy);
    expect(h.plannedEvent(12)).toBe(gappy[1]);
    expect(h.plannedEvent(13)).toBe(gappy[2]);
    expect(h.plannedEvent(11)).toBeUndefined();
  });
});
