/**
 * The RpcContext of a grpc-js call: the caller the admission interceptor verified (auth.ts puts
 * it on the call's metadata, where only the server can have written it), the deadline, and
 * cancellation from the call's own events.
 */
import type { Deadline, Metadata } from '@grpc/grpc-js';

/** What this adapter uses of every grpc-js server call (grpc-js does not export ServerSurfaceCall). */
interface ServerSurfaceCall {
  readonly metadata: Metadata;
  readonly cancelled: boolean;
  getDeadline(): Deadline;
  getPath(): string;
  on(event: 'cancelled' | 'close', fn: () => void): unknown;
}
import { CREDENTIAL_KEY } from '../auth.js';
import type { Access } from '../rpc/handler-table.js';
import type { RpcContext } from '../rpc/handler-table.js';
import type { CallInfo, ContextResolver } from '../permissions.js';

function first(md: Metadata, key: string): string | undefined {
  const v = md.get(key)[0];
  return typeof v === 'string' ? v : undefined;
}

/** A grpc-js call as the resolver sees it (its path and request headers). */
export function callInfo(call: ServerSurfaceCall): CallInfo {
  return { path: call.getPath(), header: (name) => first(call.metadata, name) };
}

class GrpcCallContext implements RpcContext {
  constructor(
    private readonly call: ServerSurfaceCall,
    readonly caller: RpcContext['caller'],
    readonly credential: string,
  ) {}

  get deadline(): number {
    const d = this.call.getDeadline();
    const at = d instanceof Date ? d.getTime() : d;
    return Number.isFinite(at) ? at : Infinity;
  }

  get cancelled(): boolean {
    return this.call.cancelled;
  }

  onCancel(fn: () => void): void {
    if (this.call.cancelled) {
      fn();
      return;
    }
    // 'close' too: a stream whose connection dropped may close without a 'cancelled' first.
    // `on` with a guard of our own rather than two `once` wrappers (each a bound function and a
    // state object, kept for the call's life: a long-lived stream holds them; issue #37 sub-mem).
    let once = false;
    const run = (): void => {
      if (once) return;
      once = true;
      fn();
    };
    this.call.on('cancelled', run);
    this.call.on('close', run);
  }
}

/** The context of a call: resolves its caller (throws the DomainError that refuses it). */
export function grpcContext(call: ServerSurfaceCall, resolve: ContextResolver, access: Access): RpcContext {
  const caller = resolve(callInfo(call), access);
  return new GrpcCallContext(call, caller, first(call.metadata, CREDENTIAL_KEY) ?? '');
}
