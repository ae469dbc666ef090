/**
 * A client-streaming call (ImportSession): the handler starts at once and reads the requests with
 * `for await` / its async iterator (what handlers.ts's importSession uses), then answers through
 * its callback. Backpressure: while HIGH_WATER decoded requests wait for the handler, the HTTP/2
 * stream is paused (its flow-control window stops the client), and resumed once the handler has
 * taken them down to LOW_WATER. A call that ends without the handler's answer (the client's
 * reset, the deadline, a refused or truncated message) fails the read in progress with CANCELLED,
 * so the import stops and stores nothing.
 */
import { DomainError } from '../../domain/errors.js';
import { NativeCall } from './native-call.js';

/** Requests decoded ahead of the handler before the stream is paused. */
export const HIGH_WATER = 16;
const LOW_WATER = 4;

const DONE: IteratorResult<unknown> = Object.freeze({ done: true, value: undefined });

function aborted(): DomainError {
  return new DomainError('CANCELLED', 'the request stream ended before the import completed; nothing was stored', {});
}

export class ClientStreamCall extends NativeCall implements AsyncIterator<unknown> {
  #queue: unknown[] = [];
  #halfClosed = false;
  #aborted = false;
  #paused = false;
  #resolve: ((r: IteratorResult<unknown>) => void) | undefined;
  #reject: ((e: unknown) => void) | undefined;

  protected override begin(): void {
    this.invoke((err, value, trailer) => this.reply(err, value, trailer));
  }

  [Symbol.asyncIterator](): AsyncIterator<unknown> {
    return this;
  }

  next(): Promise<IteratorResult<unknown>> {
    if (this.#queue.length > 0) {
      const value = this.#queue.shift();
      if (this.#paused && this.#queue.length <= LOW_WATER) {
        this.#paused = false;
        this.stream.resume();
      }
      return Promise.resolve({ done: false, value });
    }
    if (this.#aborted) return Promise.reject(aborted());
    if (this.#halfClosed) return Promise.resolve(DONE);
    return new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  return(): Promise<IteratorResult<unknown>> {
    this.#queue.length = 0;
    return Promise.resolve(DONE);
  }

  protected onMessage(message: unknown): void {
    const resolve = this.#resolve;
    if (resolve) {
      this.#resolve = undefined;
      this.#reject = undefined;
      resolve({ done: false, value: message });
      return;
    }
    this.#queue.push(message);
    if (!this.#paused && this.#queue.length >= HIGH_WATER) {
      this.#paused = true;
      this.stream.pause();
    }
  }

  protected onHalfClose(): void {
    this.#halfClosed = true;
    const resolve = this.#resolve;
    this.#resolve = undefined;
    this.#reject = undefined;
    resolve?.(DONE);
  }

  protected override onAbort(): void {
    this.#aborted = true;
    this.#queue.length = 0;
    const reject = this.#reject;
    this.#resolve = undefined;
    this.#reject = undefined;
    reject?.(aborted());
  }
}
