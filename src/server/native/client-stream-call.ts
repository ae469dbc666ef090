/**
 * A client-streaming call (ImportSession): the handler starts at once and reads the requests with
 * `for await` / its async iterator (what handlers.ts's importSession uses), then answers through
 * its callback. Requests wait for the handler as received frames and are decompressed and decoded
 * only when it takes them (as grpc-js reads a message only when asked), so what a client can make
 * the server hold is bounded by the frames' own bytes. Backpressure: while HIGH_WATER frames or
 * HIGH_WATER_BYTES of them wait, the HTTP/2 stream is paused (its flow-control window stops the
 * client), and resumed once the handler has taken them down to LOW_WATER frames and half the bytes. A call that ends without the handler's answer (the client's
 * reset, the deadline, a refused or truncated message) fails the read in progress with CANCELLED,
 * so the import stops and stores nothing.
 */
import { DomainError } from '../../domain/errors.js';
import { NativeCall } from './native-call.js';

/** Request frames received ahead of the handler before the stream is paused. */
export const HIGH_WATER = 16;
const LOW_WATER = 4;
/** Bytes of request frames received ahead of the handler before the stream is paused. */
export const HIGH_WATER_BYTES = 1 << 20;

const DONE: IteratorResult<unknown> = Object.freeze({ done: true, value: undefined });
/** No message decoded (a refused frame ended the call instead). */
const NOTHING = Symbol('nothing');

function aborted(): DomainError {
  return new DomainError('CANCELLED', 'the request stream ended before the import completed; nothing was stored', {});
}

export class ClientStreamCall extends NativeCall implements AsyncIterator<unknown> {
  /** Frames received and not yet taken: [compressed, body] pairs. */
  #frames: (boolean | Buffer)[] = [];
  #frameBytes = 0;
  /** The message the last decode produced (onMessage while nobody waits). */
  #taken: unknown = NOTHING;
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
    while (this.#frames.length > 0) {
      const compressed = this.#frames.shift() as boolean;
      const body = this.#frames.shift() as Buffer;
      this.#frameBytes -= body.length;
      if (this.#paused && this.#frames.length <= 2 * LOW_WATER && this.#frameBytes <= HIGH_WATER_BYTES / 2) {
        this.#paused = false;
        this.stream.resume();
      }
      // Decoded now: onMessage leaves it in #taken, or a refusal ends the call.
      super.onFrame(compressed, body);
      const value = this.#taken;
      this.#taken = NOTHING;
      if (value !== NOTHING) return Promise.resolve({ done: false, value });
      if (this.done) return Promise.reject(aborted());
    }
    if (this.#aborted) return Promise.reject(aborted());
    if (this.#halfClosed) return Promise.resolve(DONE);
    return new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  return(): Promise<IteratorResult<unknown>> {
    this.#frames.length = 0;
    this.#frameBytes = 0;
    return Promise.resolve(DONE);
  }

  /** A frame from the decoder: decoded at once when the handler waits for it, else kept as received. */
  override onFrame(compressed: boolean, body: Buffer): void {
    if (this.done) return;
    if (this.#resolve !== undefined) {
      super.onFrame(compressed, body);
      return;
    }
    this.#frames.push(compressed, body);
    this.#frameBytes += body.length;
    if (!this.#paused && (this.#frames.length >= 2 * HIGH_WATER || this.#frameBytes >= HIGH_WATER_BYTES)) {
      this.#paused = true;
      this.stream.pause();
    }
  }

  protected onMessage(message: unknown): void {
    const resolve = this.#resolve;
    if (resolve) {
      this.#resolve = undefined;
      this.#reject = undefined;
      resolve({ done: false, value: message });
      return;
    }
    this.#taken = message;
  }

  protected onHalfClose(): void {
    this.#halfClosed = true;
    if (this.#frames.length > 0) return; // next() takes them, then says done
    const resolve = this.#resolve;
    this.#resolve = undefined;
    this.#reject = undefined;
    resolve?.(DONE);
  }

  protected override onAbort(): void {
    this.#aborted = true;
    this.#frames.length = 0;
    this.#frameBytes = 0;
    const reject = this.#reject;
    this.#resolve = undefined;
    this.#reject = undefined;
    reject?.(aborted());
  }
}
