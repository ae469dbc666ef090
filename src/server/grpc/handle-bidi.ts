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

/** The part of a grpc-js duplex call `writeTogether` relies on (its intercepting call). */
interface DuplexInternals {
  call?: { sendMessage?: (message: unknown, callback: () => void) => void };
  _writev?: null | ((chunks: readonly { chunk: unknown }[], callback: (err?: Error | null) => void) => void);
}

/**
 * Answers buffered behind one being sent go to HTTP/2 together. grpc-js's duplex call is an
 * object-mode Writable with only `_write`, which completes when node:http2 finished writing the
 * frame (a later turn of the event loop): a burst of answers went out one per turn, one TCP
 * segment each, and a client answering each with its next request sent those one per segment too
 * (AppendStream single events: 13 appends per hand-over to the SQLite writer where unary calls had
 * 64, bench/history/issue-37-grpc-js.md, addendum). With `_writev` the Writable hands every
 * buffered answer over at once: each still goes through the call's interceptors and serializer
 * (`sendMessage`, as `_write` does), node:http2 sends them in one write, and the callback (hence
 * 'drain', the sink's flow control) waits until all of them are written. Left as it is when the
 * call does not look as expected (another grpc-js version).
 */
export function writeTogether(call: ServerDuplexStream<unknown, unknown>): boolean {
  const internals = call as unknown as DuplexInternals;
  const inner = internals.call;
  if (typeof inner?.sendMessage !== 'function' || typeof internals._writev === 'function') return false;
  internals._writev = (chunks, callback) => {
    let left = chunks.length;
    const written = (): void => {
      if (--left === 0) callback();
    };
    for (const { chunk } of chunks) inner.sendMessage!(chunk, written);
  };
  return true;
}

export function handleBidi(m: Extract<MethodImpl, { shape: 'bidi' }>, resolve: ContextResolver, fail: (e: unknown) => ServiceError) {
  return (call: ServerDuplexStream<unknown, unknown>): void => {
    const sink = new GrpcSink(call, fail, writeTogether(call));
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
