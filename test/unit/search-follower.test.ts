import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SearchFollower } from '../../src/app/search-follower.js';
import type { SearchFollowBatch } from '../../src/app/search-port.js';

/** An index another replica holds: every batch answers busy; counts the attempts. */
function heldIndex(): { calls: () => number; index: ConstructorParameters<typeof SearchFollower>[0] } {
  let n = 0;
  const index = {
    followBatch: async (): Promise<SearchFollowBatch> => {
      n++;
      return { events: 0, caughtUp: false, busy: true };
    },
  } as unknown as ConstructorParameters<typeof SearchFollower>[0];
  return { calls: () => n, index };
}

describe('SearchFollower while another replica holds the index', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('the background loop retries every standbyMs, not every busyMs', async () => {
    const h = heldIndex();
    const f = new SearchFollower(h.index, { busyMs: 1, standbyMs: 200 });
    f.start();
    await vi.advanceTimersByTimeAsync(300);
    await f.stop();
    // One attempt at start and one after 200 ms; a retry every busyMs would be about 150.
    expect(h.calls()).toBeGreaterThanOrEqual(1);
    expect(h.calls()).toBeLessThanOrEqual(3);
  });

  it('catchUp (a search waiting for its writes) still retries every busyMs until its deadline', async () => {
    const h = heldIndex();
    const f = new SearchFollower(h.index, { busyMs: 5, standbyMs: 10_000 });
    const done = f.catchUp(100);
    await vi.advanceTimersByTimeAsync(150);
    expect(await done).toBe(false);
    // An attempt at 0, 5, 10, ... ms until the deadline: about 20.
    expect(h.calls()).toBeGreaterThanOrEqual(15);
  });
});
