/**
 * A bidi call (server reflection): the handler starts at once; requests reach it as 'data'
 * events, the client's half-close as 'end' (grpc-js ServerDuplexStream), and it writes responses
 * as on a server stream (writable-call.ts).
 */
import { WritableCall } from './writable-call.js';

export class BidiCall extends WritableCall {
  protected override begin(): void {
    super.begin();
    this.invoke();
  }

  protected onMessage(message: unknown): void {
    this.emit('data', message);
  }

  protected onHalfClose(): void {
    this.emit('end');
  }
}
