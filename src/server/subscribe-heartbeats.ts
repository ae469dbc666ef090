/**
 * The heartbeat schedule of the subscription streams (see subscribe-handlers.ts): one timer for
 * every stream of a server, a min-heap by due time.
 */
import { MAX_TIMER_MS } from './server-stream.js';

/**
 * The schedule's clock: whole milliseconds of performance.now() (small integers stay unboxed in
 * the stream objects; a double field would be one more heap object per stream).
 */
export function nowMs(): number {
  return Math.floor(performance.now());
}

/** A stream in the heartbeat schedule. */
export interface Beating {
  /** When the stream is to be looked at next (`nowMs()` clock). */
  dueAt: number;
  /** Position in the schedule's heap (-1 = not scheduled). */
  heapIndex: number;
  /** Looked at (dueAt passed): the next time to look, or -1 to leave the schedule. */
  beat(now: number): number;
}

/**
 * The heartbeat schedule of every stream of a server: one timer for all, armed at the earliest
 * due time of a binary min-heap of streams (O(log n) per add, remove and visit; nothing per
 * write: writes only record their time, and a stream visited before its interval has passed since
 * its last write is put back at that time). A stream's visits are exactly those its own timer had.
 */
export class Heartbeats {
  readonly #heap: Beating[] = [];
  #timer: NodeJS.Timeout | undefined;
  #armedAt = Infinity;

  /** Streams scheduled. */
  get size(): number {
    return this.#heap.length;
  }

  /** Schedules `s` to be visited at `dueAt` (it must not be scheduled already). */
  add(s: Beating, dueAt: number): void {
    s.dueAt = dueAt;
    s.heapIndex = this.#heap.length;
    this.#heap.push(s);
    this.#up(s.heapIndex);
    this.#arm();
  }

  /** Takes `s` out of the schedule (no-op when not in it). */
  remove(s: Beating): void {
    const i = s.heapIndex;
    if (i < 0 || this.#heap[i] !== s) return;
    s.heapIndex = -1;
    const last = this.#heap.pop() as Beating;
    if (last !== s) {
      this.#heap[i] = last;
      last.heapIndex = i;
      this.#down(i);
      this.#up(last.heapIndex);
    }
    if (this.#heap.length === 0 && this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#armedAt = Infinity;
    }
  }

  readonly #fire = (): void => {
    this.#timer = undefined;
    this.#armedAt = Infinity;
    const now = nowMs();
    for (let top = this.#heap[0]; top !== undefined && top.dueAt <= now; top = this.#heap[0]) {
      const next = top.beat(now);
      if (top.heapIndex !== 0) continue; // it left the schedule while beating
      if (next < 0) {
        this.remove(top);
        continue;
      }
      top.dueAt = next;
      this.#down(0);
    }
    this.#arm();
  };

  #arm(): void {
    const top = this.#heap[0];
    if (top === undefined || top.dueAt >= this.#armedAt) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#armedAt = top.dueAt;
    // setTimeout fires a longer delay at once (with a warning): wait in steps of at most its limit.
    this.#timer = setTimeout(this.#fire, Math.min(MAX_TIMER_MS, Math.max(0, top.dueAt - performance.now())));
    this.#timer.unref();
  }

  #up(i: number): void {
    const h = this.#heap;
    const s = h[i] as Beating;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const ps = h[p] as Beating;
      if (ps.dueAt <= s.dueAt) break;
      h[i] = ps;
      ps.heapIndex = i;
      i = p;
    }
    h[i] = s;
    s.heapIndex = i;
  }

  #down(i: number): void {
    const h = this.#heap;
    const n = h.length;
    const s = h[i] as Beating;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && (h[r] as Beating).dueAt < (h[l] as Beating).dueAt ? r : l;
      const cs = h[c] as Beating;
      if (cs.dueAt >= s.dueAt) break;
      h[i] = cs;
      cs.heapIndex = i;
      i = c;
    }
    h[i] = s;
    s.heapIndex = i;
  }
}
