/**
 * The shared heartbeat schedule (src/server/subscribe-handlers.ts `Heartbeats`): one timer for
 * every stream, a min-heap by due time. Fake timers (setTimeout and performance.now) make the
 * visit times exact.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Heartbeats } from '../../src/server/subscribe-heartbeats.js';

/** A stream stand-in: a heartbeat every `interval` ms without a write (as SubscriberStream.beat). */
class FakeStream {
  dueAt = 0;
  heapIndex = -1;
  lastWrite: number;
  readonly beats: number[] = [];
  visits = 0;
  ended = false;

  constructor(readonly name: string, readonly interval: number, readonly log: string[]) {
    this.lastWrite = performance.now();
  }

  beat(now: number): number {
    this.visits++;
    if (this.ended) return -1;
    if (now - this.lastWrite < this.interval) return this.lastWrite + this.interval;
    this.beats.push(now);
    this.log.push(this.name);
    this.lastWrite = now;
    return now + this.interval;
  }
}

describe('Heartbeats (shared schedule)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('visits each stream at its own interval, in due order, with one timer for all', () => {
    const hb = new Heartbeats();
    const log: string[] = [];
    const t0 = performance.now();
    const a = new FakeStream('a', 100, log);
    const b = new FakeStream('b', 250, log);
    hb.add(a, t0 + 100);
    hb.add(b, t0 + 250);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(99);
    expect(log).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(log).toEqual(['a']);
    vi.advanceTimersByTime(400);
    expect(a.beats.map((t) => t - t0)).toEqual([100, 200, 300, 400, 500]);
    expect(b.beats.map((t) => t - t0)).toEqual([250, 500]);
    expect(vi.getTimerCount()).toBe(1);
  });

  it('an interval beyond setTimeout\'s limit (2^31 - 1 ms) does not spin the timer: the stream is visited only when due', () => {
    const hb = new Heartbeats();
    const log: string[] = [];
    const t0 = performance.now();
    const huge = 2 ** 32;
    const s = new FakeStream('huge', huge, log);
    const armed = vi.spyOn(globalThis, 'setTimeout');
    hb.add(s, t0 + huge);
    vi.advanceTimersByTime(10_000);
    // (Node, and the fake clock, fire a longer delay after 1 ms: re-armed ~10,000 times here.)
    expect(armed.mock.calls.length).toBe(1);
    armed.mockRestore();
    expect(s.visits).toBe(0);
    // It waits in steps of at most 2^31 - 1 ms and beats exactly when due.
    vi.advanceTimersByTime(huge - 10_000 - 1);
    expect(s.beats).toEqual([]);
    expect(s.visits).toBeLessThanOrEqual(2);
    vi.advanceTimersByTime(1);
    expect(s.beats.map((t) => t - t0)).toEqual([huge]);
    hb.remove(s);
  });

  it('a write postpones the heartbeat to a full interval after it (no timer work per write)', () => {
    const hb = new Heartbeats();
    const log: string[] = [];
    const t0 = performance.now();
    const a = new FakeStream('a', 100, log);
    hb.add(a, t0 + 100);
    vi.advanceTimersByTime(60);
    a.lastWrite = performance.now(); // a write at 60
    vi.advanceTimersByTime(40); // visited at 100: not due, put back at 160
    expect(a.beats).toEqual([]);
    vi.advanceTimersByTime(59);
    expect(a.beats).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(a.beats.map((t) => t - t0)).toEqual([160]);
  });

  it('an ended stream leaves the schedule: no visit after remove(), and the timer goes with the last one', () => {
    const hb = new Heartbeats();
    const log: string[] = [];
    const t0 = performance.now();
    const a = new FakeStream('a', 100, log);
    const b = new FakeStream('b', 100, log);
    hb.add(a, t0 + 100);
    hb.add(b, t0 + 150);
    vi.advanceTimersByTime(100);
    expect(a.visits).toBe(1);
    hb.remove(a);
    expect(hb.size).toBe(1);
    vi.advanceTimersByTime(500);
    expect(a.visits).toBe(1);
    expect(b.beats.length).toBeGreaterThan(2);
    hb.remove(b);
    hb.remove(b); // idempotent
    expect(hb.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    const visits = b.visits;
    vi.advanceTimersByTime(1000);
    expect(b.visits).toBe(visits);
  });

  it('a stream that answers -1 (it ended) is dropped at its visit', () => {
    const hb = new Heartbeats();
    const log: string[] = [];
    const t0 = performance.now();
    const a = new FakeStream('a', 100, log);
    hb.add(a, t0 + 100);
    a.ended = true;
    vi.advanceTimersByTime(100);
    expect(a.visits).toBe(1);
    expect(hb.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps due order over many streams with removals in the middle (heap invariant)', () => {
    const hb = new Heartbeats();
    const log: string[] = [];
    const t0 = performance.now();
    const streams: FakeStream[] = [];
    let x = 12345;
    for (let i = 0; i < 1000; i++) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      const s = new FakeStream(String(i), 10_000, log);
      streams.push(s);
      hb.add(s, t0 + 1 + (x % 5000));
    }
    for (let i = 0; i < 1000; i += 3) hb.remove(streams[i]!);
    expect(hb.size).toBe(1000 - 334);
    const seen: number[] = [];
    for (const s of streams) {
      s.beat = function (this: FakeStream): number {
        seen.push(this.dueAt);
        this.visits++;
        return -1;
      };
    }
    vi.advanceTimersByTime(6000);
    expect(seen.length).toBe(1000 - 334);
    expect([...seen].sort((p, q) => p - q)).toEqual(seen);
    expect(streams.filter((s, i) => i % 3 === 0 && s.visits > 0)).toEqual([]);
    expect(hb.size).toBe(0);
  });
});
