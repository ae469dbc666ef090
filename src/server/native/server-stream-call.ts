/**
 * A server-streaming call: exactly one request message, then the handler with the call to write
 * to (writable-call.ts). An idle stream holds this object, its listeners and the metadata the
 * handler read; the request headers are let go once the metadata is built.
 */
import { WritableCall } from './writable-call.js';

export class ServerStreamCall extends WritableCall {
  protected onMessage(message: unknown): void {
    this.takeSingleRequest(message);
  }

  protected onHalfClose(): void {
    if (this.singleRequestComplete()) this.invoke();
  }
}
