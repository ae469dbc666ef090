/**
 * The response side of server-streaming and bidi calls (grpc-js ServerWritableStream): `write()`
 * sends one message and returns false while the HTTP/2 stream's buffer is over its high-water
 * mark (then 'drain' follows), `end(trailer?)` ends with OK, and `emit('error', err)` ends the
 * stream with that error's status, as grpc-js does.
 */
import type { Metadata } from '@grpc/grpc-js';
import { status as Code } from '@grpc/grpc-js';
import { CALL, NativeCall, errorToStatus, frameOf, type CallStream } from './native-call.js';

function onCallError(this: WritableCall, err: unknown): void {
  this.endWith(err);
}

function onStreamDrain(this: CallStream & { [CALL]?: NativeCall }): void {
  this[CALL]?.emit('drain');
}

export abstract class WritableCall extends NativeCall {
  #drainHooked = false;

  protected override begin(): void {
    this.on('error', onCallError);
  }

  /** Writes one message; false when the caller should wait for 'drain' (or the call has ended). */
  write(value: unknown): boolean {
    if (this.done) return false;
    const payload = this.payloadOf(value);
    if (payload === undefined) return false;
    const stream = this.stream;
    // Reset by the client, its 'close' not yet emitted: nothing can be written.
    if (stream.destroyed || stream.closed) return false;
    if (!this.headersSent) this.respondHeaders();
    const ok = stream.write(frameOf(payload));
    if (!ok && !this.#drainHooked) {
      this.#drainHooked = true;
      stream.on('drain', onStreamDrain);
    }
    return ok;
  }

  /** Ends the stream with OK (and trailing metadata). */
  end(trailer?: Metadata): void {
    this.sendStatus({ code: Code.OK, details: 'OK', metadata: trailer ?? null });
  }

  /** Ends the stream with an error's status (the 'error' event). */
  endWith(err: unknown): void {
    this.sendStatus(errorToStatus(err));
  }
}
