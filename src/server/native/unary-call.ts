/**
 * A unary call (grpc-js ServerUnaryCall): exactly one request message, then the handler with its
 * callback `(err, value, trailer?)`; the response is one message and the trailers.
 */
import { NativeCall } from './native-call.js';

export class UnaryCall extends NativeCall {
  protected onMessage(message: unknown): void {
    this.takeSingleRequest(message);
  }

  protected onHalfClose(): void {
    if (this.singleRequestComplete()) this.invoke((err, value, trailer) => this.reply(err, value, trailer));
  }
}
