/**
 * A unary call (grpc-js ServerUnaryCall): exactly one request message, then the handler with its
 * callback `(err, value, trailer?)`; the response is one message and the trailers.
 */
import { NativeCall } from './native-call.js';

export class UnaryCall extends NativeCall {
  #received = false;

  protected onMessage(message: unknown): void {
    if (this.#received) {
      this.messageCountError('a second');
      return;
    }
    this.#received = true;
    this.request = message;
  }

  protected onHalfClose(): void {
    if (!this.#received) {
      this.messageCountError('no');
      return;
    }
    this.invoke((err, value, trailer) => this.reply(err, value, trailer));
  }
}
