/** A unary method of the handler table on a grpc-js call. */
import type { sendUnaryData, ServerUnaryCall, ServiceError } from '@grpc/grpc-js';
import type { MethodImpl } from '../rpc/handler-table.js';
import type { ContextResolver } from '../permissions.js';
import { grpcContext } from './context.js';

export function handleUnary(m: Extract<MethodImpl, { shape: 'unary' }>, resolve: ContextResolver, fail: (e: unknown) => ServiceError) {
  return (call: ServerUnaryCall<unknown, unknown>, cb: sendUnaryData<unknown>): void => {
    let ctx;
    try {
      ctx = grpcContext(call, resolve, m.access);
    } catch (e) {
      cb(fail(e));
      return;
    }
    m.handle(ctx, call.request).then((res) => cb(null, res), (e: unknown) => cb(fail(e)));
  };
}
