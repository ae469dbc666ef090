/**
 * Test helpers for subscription streams: a collector that waits for conditions (event-driven, with
 * a deadline; no sleeps) and a client-side surface rebuilt from deltas.
 */
import type { ClientReadableStream, ServiceError } from '@grpc/grpc-js';
import type { SubscribeSurfaceResponse } from '../../gen/palimpsest/v1/service.js';
import { decodeError, type DecodedError } from '../../src/client/error-details.js';

/** Collects a stream's messages and its end. */
export class Tail<T> {
  readonly msgs: T[] = [];
  error: ServiceError | undefined;
  ended = false;
  readonly #waiters = new Set<() => void>();

  constructor(readonly stream: ClientReadableStream<T>) {
    stream.on('data', (m: T) => {
      this.msgs.push(m);
      this.#notify();
    });
    stream.on('error', (e: ServiceError) => {
      this.error = e;
      this.ended = true;
      this.#notify();
    });
    stream.on('end', () => {
      this.ended = true;
      this.#notify();
    });
  }

  /** The decoded error status, when the stream failed. */
  get decoded(): DecodedError | undefined {
    return this.error ? decodeError(this.error) : undefined;
  }

  /** Resolves once `pred` holds (checked on every message/end), rejects after `ms`. */
  until(pred: (t: this) => boolean, ms = 10_000, what = 'condition'): Promise<void> {
    if (pred(this)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (pred(this)) {
          clearTimeout(timer);
          this.#waiters.delete(check);
          resolve();
        }
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`timed out waiting for ${what} (${this.msgs.length} messages, ended=${this.ended}, error=${this.error?.message ?? ''})`));
      }, ms);
      this.#waiters.add(check);
    });
  }

  cancel(): void {
    this.stream.cancel();
  }

  #notify(): void {
    for (const w of [...this.#waiters]) w();
  }
}

/** Polls `cond` until it holds or `ms` passes (for server-side state with no event to wait on). */
export async function eventually(cond: () => boolean, ms = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

/** A surface rebuilt on the client from SubscribeSurface messages, checking continuity. */
export class ClientSurface {
  seqs: number[] = [];
  /** Seqs of append/replace events received, in order. */
  readonly events: number[] = [];
  cursor = -1;
  caughtUp = 0;

  /** Applies one message; throws on a gap-free-ness or ordering violation. */
  apply(m: SubscribeSurfaceResponse): void {
    const k = m.kind;
    if (!k) throw new Error('message without kind');
    const c = m.cursor ?? -1;
    if (k.$case === 'heartbeat' || k.$case === 'caughtUp') {
      if (c !== this.cursor) throw new Error(`${k.$case} cursor ${c} != ${this.cursor}`);
      if (k.$case === 'caughtUp') this.caughtUp++;
      return;
    }
    if (k.$case === 'snapshot') {
      this.seqs = [...k.value.seqs];
      this.cursor = c;
      return;
    }
    if (c <= this.cursor) throw new Error(`cursor went from ${this.cursor} to ${c}`);
    if (k.$case === 'append') {
      if (k.value.seq !== c || m.event?.seq !== c) throw new Error(`append ${k.value.seq} at cursor ${c}`);
      this.seqs.push(k.value.seq);
      this.events.push(c);
    } else if (k.$case === 'replace') {
      const { start, end, seq, shadowedSeqs } = k.value;
      if (seq !== c || m.event?.seq !== c) throw new Error(`replace ${seq} at cursor ${c}`);
      const a = this.seqs.indexOf(start);
      const b = this.seqs.indexOf(end);
      if (a < 0 || b < a) throw new Error(`replace ${start}..${end} not on the client surface`);
      const cut = this.seqs.slice(a, b + 1);
      if (cut.join() !== shadowedSeqs.join()) throw new Error(`shadowed ${shadowedSeqs.join()} != ${cut.join()}`);
      this.seqs.splice(a, b - a + 1, seq);
      this.events.push(c);
    }
    this.cursor = c;
  }
}
