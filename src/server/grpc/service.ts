/**
 * The gRPC port's adapter: a handler table (src/server/rpc) as a grpc-js service implementation,
 * one small function per call shape (nice-grpc's handle*Call files). Admission (tokens, tenants,
 * the call cap, request bounds) and telemetry run before these, in the interceptors the server is
 * built with (auth.ts, rpc-telemetry.ts), which the web port's adapter calls the same way.
 *
 * Why not nice-grpc itself: its server adapter pulls server-stream responses from an async
 * iterable per call. The subscription fast path pushes one encoded delta into thousands of idle
 * streams from the change feed's callback, with no promise or suspended frame per subscriber
 * (subscribe-handlers.ts), and writes pre-encoded Buffers through pass-through serializers; both
 * need the call's own `write`/`drain`, which this adapter hands to the handler as a push sink.
 */
import type { ServiceError, UntypedHandleCall, UntypedServiceImplementation } from '@grpc/grpc-js';
import type { HandlerTable } from '../rpc/handler-table.js';
import type { ContextResolver } from '../permissions.js';
import { handleUnary } from './handle-unary.js';
import { handleServerStream } from './handle-server-stream.js';
import { handleClientStream } from './handle-client-stream.js';
import { handleBidi } from './handle-bidi.js';

/** The grpc-js implementation of a handler table. */
export function grpcImplementation(table: HandlerTable, resolve: ContextResolver, fail: (e: unknown) => ServiceError): UntypedServiceImplementation {
  const out: Record<string, UntypedHandleCall> = {};
  for (const [name, m] of Object.entries(table)) {
    switch (m.shape) {
      case 'unary': out[name] = handleUnary(m, resolve, fail) as UntypedHandleCall; break;
      case 'server-stream': out[name] = handleServerStream(m, resolve, fail) as UntypedHandleCall; break;
      case 'client-stream': out[name] = handleClientStream(m, resolve, fail) as UntypedHandleCall; break;
      case 'bidi': out[name] = handleBidi(m, resolve, fail) as UntypedHandleCall; break;
    }
  }
  return out;
}
