/**
 * A client-streaming method of the handler table on a grpc-js call: the requests as an async
 * iterable. A client that cancels an upload sends END_STREAM and then RST_STREAM (Node's
 * Http2Stream.close), so the request stream first ends exactly like a complete upload and
 * 'cancelled' follows a moment later: the iterable gives the reset CANCEL_GRACE_MS (and one more
 * turn of the loop) before it reports the end, and throws CANCELLED if it came. Without it a
 * truncated upload became a complete session.
 */
import type { sendUnaryData, ServerReadableStream, ServiceError } from '@grpc/grpc-js';
import { DomainError } from '../../domain/errors.js';
import type { MethodImpl } from '../rpc/handler-table.js';
import type { ContextResolver } from '../permissions.js';
import { grpcContext } from './context.js';

/** How long an ended request stream waits for a trailing RST_STREAM. */
const CANCEL_GRACE_MS = 10;

function cancelGrace(call: ServerReadableStream<unknown, unknown>): Promise<void> {
  if (call.cancelled) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      call.off('cancelled', done);
      resolve();
    };
    // After the timer, one more turn of the loop: Node finishes closing a reset stream (which
    // is what emits 'cancelled') in an immediate that may be queued behind a late timer.
    const timer = setTimeout(() => setImmediate(done), CANCEL_GRACE_MS);
    call.once('cancelled', done);
  });
}

async function* requestsOf(call: ServerReadableStream<unknown, unknown>): AsyncGenerator<unknown> {
  const iter = call[Symbol.asyncIterator]() as AsyncIterator<unknown>;
  for (;;) {
    let n: IteratorResult<unknown>;
    try {
      n = await iter.next();
    } catch (e) {
      // A reset without a half-close destroys the stream: the client cancelled.
      if (call.cancelled) throw new DomainError('CANCELLED', 'the client cancelled the upload; nothing was stored', {});
      throw e;
    }
    if (n.done) {
      await cancelGrace(call);
      if (call.cancelled) throw new DomainError('CANCELLED', 'the client cancelled the upload; nothing was stored', {});
      return;
    }
    yield n.value;
  }
}

export function handleClientStream(m: Extract<MethodImpl, { shape: 'client-stream' }>, resolve: ContextResolver, fail: (e: unknown) => ServiceError) {
  return (call: ServerReadableStream<unknown, unknown>, cb: sendUnaryData<unknown>): void => {
    let ctx;
    try {
      ctx = grpcContext(call, resolve, m.access);
    } catch (e) {
      cb(fail(e));
      return;
    }
    m.handle(ctx, requestsOf(call)).then((res) => cb(null, res), (e: unknown) => cb(fail(e)));
  };
}
