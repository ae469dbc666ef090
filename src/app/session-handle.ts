/**
 * The in-memory state of one hot session: its engine (surface, counters), an optional message
 * projection, and its write pipeline.
 *
 * Writes: a job plans against the engine (which runs ahead of the store: it already holds every
 * planned batch) and hands its events to the store at once, without waiting for earlier batches
 * of the session to commit. The store's group commit then puts every batch that is pending at its
 * next flush into one transaction, so under load one fsync carries many requests. Each batch is a
 * compare-and-set on the head and the writer token its plan saw (see `writer`), so correctness
 * does not depend on the order the store applies them in.
 *
 * Reads must never observe a planned but uncommitted event. A read waits until the session has no
 * store write in flight; while a read waits, new write jobs are held back (so a steady stream of
 * writes cannot starve readers), then released right after the waiting reads ran. A read that has
 * to go to the store and back (hydrating the message projection) can hold the new writes for as
 * long as it takes ({@link readHeld}), so a steady stream of writes cannot keep moving the
 * surface under it either.
 */
import type { SessionEvent } from '../domain/event.js';
import type { SessionRecord } from './store-port.js';
import type { SessionEngine } from '../domain/session-engine.js';
import type { MessageProjection } from '../domain/derive.js';
import type { PairingIndex } from '../domain/tool-pairing.js';

/** A write job: plans synchronously, then returns the store promise (undefined if rejected before the store). */
export type WriteJob = () => Promise<void> | undefined;

/** Hot state of one session. */
export class SessionHandle {
  /** False once dropped from the cache or found inconsistent with the store: reload. */
  valid = true;
  /** Model-history projection, hydrated on first read. */
  projection: MessageProjection | undefined;
  /** The tool-pairing guard's facts of the surface (pairing-guard.ts), hydrated on first use. */
  pairing: PairingIndex | undefined;
  /** Last access (LRU). */
  lastUsed = 0;
  /**
   * The writer token of the newest planned batch (runs ahead of the store like the engine): the
   * `expectedWriter` of the next batch. A batch that fails never stores its token, so every batch
   * planned on top of it fails the store's compare-and-set too, whatever the head.
   */
  writer: string;
  /**
   * The batches planned and handed to the store but not settled yet, oldest first. Not a Map by
   * seq: V8 links a Map's replaced tables, so one set and cleared per event promotes the events
   * (bench/README.md, sixth round).
   */
  readonly #planned: (readonly SessionEvent[])[] = [];
  #inflight = 0;
  #heldWrites: WriteJob[] = [];
  #reads: Array<() => void> = [];
  /** Asynchronous reads running under {@link readHeld}: new writes wait while any does. */
  #holds = 0;

  constructor(
    /** The storage key (see SessionService.storageKey): cache, store and feed key. */
    readonly id: string,
    /** The session id the client uses (and the domain sees, e.g. in legacy message ids). */
    readonly sessionId: string,
    public record: SessionRecord,
    readonly engine: SessionEngine,
  ) {
    this.writer = record.writer;
  }

  /** A planned event not settled yet, by seq. */
  plannedEvent(seq: number): SessionEvent | undefined {
    for (const batch of this.#planned) {
      const first = batch[0]!.seq;
      if (seq < first || seq > batch[batch.length - 1]!.seq) continue;
      const at = batch[seq - first];
      if (at?.seq === seq) return at;
      return batch.find((e) => e.seq === seq);
    }
    return undefined;
  }

  /**
   * The head the store holds once every batch planned so far settles as a failure: the engine's
   * head less the batches planned and not settled yet (after a failure the handle is dropped, so
   * on a valid handle the oldest unsettled batch starts right after what is committed).
   */
  get settledHead(): number {
    const oldest = this.#planned[0];
    return (oldest !== undefined ? oldest[0]!.seq : this.engine.nextSeq) - 1;
  }

  /** A batch was handed to the store (its events are found by plannedEvent until it settles). */
  addPlanned(events: readonly SessionEvent[]): void {
    if (events.length > 0) this.#planned.push(events);
  }

  /** The batch handed to addPlanned settled. */
  removePlanned(events: readonly SessionEvent[]): void {
    const i = this.#planned.indexOf(events);
    if (i >= 0) this.#planned.splice(i, 1);
  }

  /** True while store writes are in flight or held back. */
  get busy(): boolean {
    return this.#inflight > 0 || this.#heldWrites.length > 0;
  }

  /** Runs a write job now, or after the waiting reads when there are any. */
  enqueue(job: WriteJob): void {
    if (this.#reads.length > 0 || this.#holds > 0) this.#heldWrites.push(job);
    else this.#run(job);
  }

  /** Runs `fn` against committed state: now if no write is in flight, else once they settle. */
  read<T>(fn: () => T): Promise<T> {
    if (this.#inflight === 0) {
      try {
        return Promise.resolve(fn());
      } catch (e) {
        return Promise.reject(e);
      }
    }
    return new Promise<T>((resolve, reject) => {
      this.#reads.push(() => {
        try {
          resolve(fn());
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  /**
   * Runs the asynchronous `fn` against committed state: once no write is in flight, and with the
   * session's new writes held back until it settles, so the engine does not move while it runs.
   * For a read that goes to the store between looking at the engine and using what it read; the
   * writes wait for one store read, so use it after an optimistic attempt lost the race.
   */
  readHeld<T>(fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const start = (): void => {
        this.#holds++;
        let p: Promise<T>;
        try {
          p = fn();
        } catch (e) {
          p = Promise.reject(e);
        }
        p.then(resolve, reject).finally(() => {
          this.#holds--;
          if (this.#holds === 0 && this.#inflight === 0) this.#drain();
        });
      };
      if (this.#inflight === 0) start();
      else this.#reads.push(start);
    });
  }

  #run(job: WriteJob): void {
    const p = job();
    if (!p) return;
    this.#inflight++;
    const settle = (): void => {
      this.#inflight--;
      if (this.#inflight === 0) this.#drain();
    };
    p.then(settle, settle);
  }

  #drain(): void {
    const reads = this.#reads;
    this.#reads = [];
    for (const r of reads) r();
    const writes = this.#heldWrites;
    this.#heldWrites = [];
    for (const w of writes) {
      if (this.#reads.length > 0 || this.#holds > 0) this.#heldWrites.push(w);
      else this.#run(w);
    }
  }
}
