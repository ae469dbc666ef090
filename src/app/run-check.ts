/**
 * Checks of every run of events a read returns (issue #33 item 1), the same for every store: a
 * row missing from the middle of a session (lost, or removed by hand) must never be served as a
 * log with a seq gap. What a run proves, given the session record read before it (`nextSeq`,
 * `eventCount` are read together; every row below `nextSeq` was committed before, and rows are
 * only ever added above the head):
 *
 *  - A session whose count equals its next seq has no gaps (live appends are contiguous; only
 *    imports with seq gaps differ): any untyped run of it ascends (or descends) by exactly one,
 *    starts at the seq asked for when that seq is below the head, and a page that reaches the
 *    end of the log reaches the recorded head (forward) or seq 0 (backward).
 *  - Any session read from seq 0 to the end holds exactly `eventCount` rows below `nextSeq`.
 *
 * Not provable from a run, so not checked here: a typed page (types filter out seqs by design),
 * a page of a session imported with seq gaps that does not start at 0, and a row missing outside
 * the run that was read (the cold open's check, session-cache.ts, and the SQLite digest see those).
 */
import { DataCorruptedError } from './storage-error.js';
import type { SessionRecord } from './store-port.js';

/** What a read saw: its first and last seq (in read order), how many, and whether it reached the end. */
export interface RunSeen {
  readonly first: number | undefined;
  readonly last: number | undefined;
  readonly count: number;
  /** The seq right after the run in read order (the next page's start); undefined when the read reached the end. */
  readonly next: number | undefined;
  /** The events themselves, when the read has them (names the missing seq exactly). */
  readonly events?: readonly { readonly seq: number }[];
}

/** The first seq missing from a run of `events` stepping by `step`, described. */
function missingIn(events: readonly { readonly seq: number }[] | undefined, step: 1 | -1, fallback: string): string {
  if (events !== undefined) {
    for (let i = 1; i < events.length; i++) {
      const want = events[i - 1]!.seq + step;
      if (events[i]!.seq !== want) return `seq ${want} is missing (the event after ${events[i - 1]!.seq} is ${events[i]!.seq})`;
    }
  }
  return fallback;
}

/** True when the session cannot have seq gaps (count == next seq). */
export function gapless(rec: SessionRecord): boolean {
  return rec.eventCount === rec.nextSeq;
}

/**
 * The problem with an untyped page of a gapless session read from `fromSeq` in `direction`, or
 * undefined when the run is what the record promises. `seen.next` is the seq that followed the
 * page (the page is cut there), or undefined when the read reached the end.
 */
export function pageProblem(rec: SessionRecord, fromSeq: number, direction: 'forward' | 'backward', seen: RunSeen): string | undefined {
  if (!gapless(rec)) return undefined;
  const head = rec.nextSeq - 1;
  const { first, last, count, next } = seen;
  if (direction === 'forward') {
    const start = Math.max(fromSeq, 0);
    if (first === undefined || last === undefined) {
      return start <= head ? `seq ${start} is missing (the head is ${head}, no event at or after it was found)` : undefined;
    }
    if (start <= head && first !== start) return `seq ${start} is missing (the read from ${start} began at ${first})`;
    if (last - first + 1 !== count) return missingIn(seen.events, 1, `a seq between ${first} and ${last} is missing (${count} events in that range)`);
    if (next !== undefined && next !== last + 1) return `seq ${last + 1} is missing (the event after ${last} is ${next})`;
    if (next === undefined && last < head) return `seq ${last + 1} is missing (the log ended at ${last}, the head is ${head})`;
    return undefined;
  }
  const start = Math.min(fromSeq, head);
  if (first === undefined || last === undefined) return start >= 0 ? `seq ${start} is missing (the head is ${head}, no event at or before it was found)` : undefined;
  if (first < start) return `seq ${start} is missing (the read back from ${start} began at ${first})`;
  if (first - last + 1 !== count) return missingIn(seen.events, -1, `a seq between ${last} and ${first} is missing (${count} events in that range)`);
  if (next !== undefined && next !== last - 1) return `seq ${last - 1} is missing (the event before ${last} is ${next})`;
  if (next === undefined && last !== 0) return `seq ${last - 1} is missing (the log began at ${last})`;
  return undefined;
}

/**
 * Follows an ascending read of a session from `fromSeq` to the end, batch by batch: `add` each
 * batch's seqs, then `end()`; each returns the first problem found (or undefined).
 */
export class AscendingRun {
  #expect: number;
  #below = 0;
  #last = -1;

  constructor(private readonly rec: SessionRecord, private readonly fromSeq: number) {
    this.#expect = Math.max(fromSeq, 0);
  }

  /** Checks the next batch of the read, in order. */
  add(batch: readonly { readonly seq: number }[]): string | undefined {
    const strict = gapless(this.rec);
    for (let i = 0; i < batch.length; i++) {
      const problem = this.#step(batch[i]!.seq, strict);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }

  /** Checks the next seqs of the read, in order (a read in columns). */
  addSeqs(seqs: ArrayLike<number>): string | undefined {
    const strict = gapless(this.rec);
    for (let i = 0; i < seqs.length; i++) {
      const problem = this.#step(seqs[i]!, strict);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }

  #step(seq: number, strict: boolean): string | undefined {
    if (strict && seq !== this.#expect) return `seq ${this.#expect} is missing (the event after ${this.#expect - 1} is ${seq})`;
    this.#expect = seq + 1;
    this.#last = seq;
    if (seq < this.rec.nextSeq) this.#below++;
    return undefined;
  }

  /** The read reached the end of the log. */
  end(): string | undefined {
    const head = this.rec.nextSeq - 1;
    if (gapless(this.rec) && this.#last < head && Math.max(this.fromSeq, 0) <= head) {
      return `seq ${Math.max(this.#last + 1, this.fromSeq, 0)} is missing (the log ended at ${this.#last}, the head is ${head})`;
    }
    if (this.fromSeq <= 0 && this.#below !== this.rec.eventCount) {
      return `${this.#below} events below seq ${this.rec.nextSeq} were found, the session counts ${this.rec.eventCount}`;
    }
    return undefined;
  }
}

/** The error of a run problem of session `key` (its storage key). */
export function runCorrupted(key: string, problem: string): DataCorruptedError {
  const m = /^seq (\d+) is missing/.exec(problem);
  return new DataCorruptedError(key, m ? Number(m[1]) : undefined,
    `session ${key}: ${problem}: stored events are missing; the session is not served; restore it from a backup or delete it (palimpsest verify reports the details)`);
}
