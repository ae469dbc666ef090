/**
 * A server-streaming (or bidi) method of the handler table on a grpc-js call: the call is the
 * sink (grpc-js's `write` returns false past its high-water mark and emits `drain`).
 */
import type { ServerDuplexStream, ServerWritableStream, ServiceError } from '@grpc/grpc-js';
import type { MethodImpl, ServerSink } from '../rpc/handler-table.js';
import type { ContextResolver } from '../permissions.js';
import { grpcContext } from './context.js';

type Writable = ServerWritableStream<unknown, unknown> | ServerDuplexStream<unknown, unknown>;

/** The push sink of a grpc-js writable call. */
export class GrpcSink implements ServerSink<unknown> {
  #ended = false;
  #corked = false;
  constructor(
    private readonly call: Writable,
    private readonly fail: (e: unknown) => ServiceError,
    /**
     * The call sends buffered messages together (handle-bidi.ts writeTogether): the messages
     * written in one turn of the event loop are then corked until its end (a nextTick, after the
     * turn's promise jobs), so they leave in one HTTP/2 write instead of the first alone.
     */
    private readonly coalesce = false,
  ) {}

  write(message: unknown): boolean {
    if (this.coalesce && !this.#corked) {
      this.#corked = true;
      this.call.cork();
      process.nextTick(() => {
        this.#corked = false;
        this.call.uncork();
      });
    }
    return this.call.write(message);
  }

  onDrain(fn: () => void): void {
    this.call.once('drain', fn);
  }

  end(err?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.call.cancelled) return;
    // grpc-js ends a writable call with a status when it is given an 'error' event.
    if (err !== undefined) this.call.emit('error', this.fail(err));
    else this.call.end();
  }
}

export function handleServerStream(m: Extract<MethodImpl, { shape: 'server-stream' }>, resolve: ContextResolver, fail: (e: unknown) => ServiceError) {
  return (call: ServerWritableStream<unknown, unknown>): void => {
    const sink = new GrpcSink(call, fail);
    let ctx;
    try {
      ctx = grpcContext(call, resolve, m.access);
    } catch (e) {
      sink.end(e);
      return;
    }
    m.handle(ctx, call.request, sink);
  };
}
