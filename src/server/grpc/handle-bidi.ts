/**
 * A bidirectional-streaming method of the handler table on a grpc-js call. The requests reach
 * the handler as an async iterable built on the call's 'data' / 'end' events (grpc-js's duplex
 * call does not end its async iterator when the client half-closes); the call is paused while a
 * request waits to be taken, so a client that keeps sending is held back by flow control.
 */
import type { ServerDuplexStream, ServiceError } from '@grpc/grpc-js';
import type { MethodImpl } from '../rpc/handler-table.js';
import type { ContextResolver } from '../permissions.js';
import { grpcContext } from './context.js';
import { GrpcSink } from './handle-server-stream.js';

async function* requestsOf(call: ServerDuplexStream<unknown, unknown>): AsyncGenerator<unknown> {
  const waiting: unknown[] = [];
  let done = false;
  let wake: (() => void) | undefined;
  const notify = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  call.on('data', (msg: unknown) => {
    waiting.push(msg);
    call.pause();
    notify();
  });
  const finish = (): void => {
    done = true;
    notify();
  };
  call.on('end', finish);
  call.on('close', finish);
  call.on('error', finish);
  for (;;) {
    if (waiting.length > 0) {
      const next = waiting.shift();
      if (waiting.length === 0 && !done) call.resume();
      yield next;
      continue;
    }
    if (done) return;
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
  }
}

export function handleBidi(m: Extract<MethodImpl, { shape: 'bidi' }>, resolve: ContextResolver, fail: (e: unknown) => ServiceError) {
  return (call: ServerDuplexStream<unknown, unknown>): void => {
    const sink = new GrpcSink(call, fail);
    let ctx;
    try {
      ctx = grpcContext(call, resolve, m.access);
    } catch (e) {
      call.on('error', () => undefined);
      sink.end(e);
      return;
    }
    m.handle(ctx, requestsOf(call), sink);
  };
}
