import { describe, expect, it } from 'vitest';
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('SearchFollower while another replica holds the index', () => {
  it('the background loop retries every standbyMs, not every busyMs', async () => {
    const h = heldIndex();
    const f = new SearchFollower(h.index, { busyMs: 1, standbyMs: 200 });
    f.start();
    await sleep(300);
    await f.stop();
    // One attempt at start and one after 200 ms; a retry every busyMs would be about 150.
    expect(h.calls()).toBeGreaterThanOrEqual(1);
    expect(h.calls()).toBeLessThanOrEqual(3);
  });

  it('catchUp (a search waiting for its writes) still retries every busyMs until its deadline', async () => {
    const h = heldIndex();
    const f = new SearchFollower(h.index, { busyMs: 5, standbyMs: 10_000 });
    expect(await f.catchUp(100)).toBe(false);
    expect(h.calls()).toBeGreaterThanOrEqual(5);
  });
});
