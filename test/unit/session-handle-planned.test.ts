/**
 * SessionHandle's planned batches (src/app/session-handle.ts): the events handed to the store and
 * not settled yet, found by seq until their batch settles.
 */
import { describe, expect, it } from 'vitest';
import { SessionHandle } from '../../src/app/session-handle.js';
import type { SessionEvent } from '../../src/domain/event.js';
import type { SessionEngine } from '../../src/domain/session-engine.js';
import type { SessionRecord } from '../../src/app/store-port.js';

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
