/**
 * The transport-neutral handler table: every RPC of every service is one entry here, a function
 * of the call's context and its request (nice-grpc's ServiceImplementation is the model). The
 * transports are adapters over the table: the gRPC port (src/server/grpc, @grpc/grpc-js) and the
 * web port (src/server/web, connect-node). No handler sees a transport's call object, and no
 * adapter emulates another library's.
 *
 * - unary: `(ctx, req) => Promise<res>`; a handler may resolve with the response already encoded
 *   (a Buffer: the cached model-history entries, the ListEvents page), which both adapters send
 *   as is.
 * - server stream: `(ctx, req, sink)`: the handler writes to a push sink (`write` -> false means
 *   wait for `onDrain`), ends it once with `end(err?)`. A push sink, not a generator, because the
 *   subscription fast path writes one encoded delta into thousands of idle streams from the
 *   change feed's callback, with no promise or suspended frame per subscriber
 *   (subscribe-handlers.ts); handlers that produce a sequence use `pipeStream` (server-stream.ts).
 * - client stream: `(ctx, requests) => Promise<res>`, the requests as an async iterable that
 *   throws a CANCELLED DomainError when the client abandons the upload.
 * - bidi: `(ctx, requests, sink)`.
 *
 * Errors: a handler throws (or ends its sink with) anything; the adapter maps it through the one
 * reason -> status table (status-map.ts).
 */
import type { CallContext } from '../../app/session-service.js';
import type { Permission } from '../permissions.js';

/** What a handler knows of its call, whatever the transport. */
export interface RpcContext {
  /** The verified caller (tenant); ANONYMOUS without auth. */
  readonly caller: CallContext;
  /** SHA-256 of the verified bearer token ('' without auth), for re-checks after a token reload. */
  readonly credential: string;
  /** The call's deadline, ms since the epoch; Infinity without one. */
  readonly deadline: number;
  /** True once the client cancelled the call or went away. */
  readonly cancelled: boolean;
  /**
   * Runs `fn` once when the client cancels or goes away. Both adapters may also run it when the
   * call closes after ending normally, so `fn` must be safe then (every stream's `end` is
   * idempotent).
   */
  onCancel(fn: () => void): void;
}

/** The response side of a server (or bidi) stream. */
export interface ServerSink<Out> {
  /** Writes a message (or its encoded bytes); false when the transport wants a drain first. */
  write(message: Out | Buffer): boolean;
  /** Runs `fn` once, when the stream is writable again after `write` returned false. */
  onDrain(fn: () => void): void;
  /** Ends the stream: OK without `err`, else with its status. Once; ignored after a cancel. */
  end(err?: unknown): void;
}

/** Who may call a method: a permission (checked at admission, auth.ts) or anyone (health, reflection). */
export type Access = Permission | 'public';

/** One method of a service. */
export type MethodImpl =
  | { readonly shape: 'unary'; readonly access: Access; handle(ctx: RpcContext, req: unknown): Promise<unknown> }
  | { readonly shape: 'server-stream'; readonly access: Access; handle(ctx: RpcContext, req: unknown, sink: ServerSink<unknown>): void }
  | { readonly shape: 'client-stream'; readonly access: Access; handle(ctx: RpcContext, requests: AsyncIterable<unknown>): Promise<unknown> }
  | { readonly shape: 'bidi'; readonly access: Access; handle(ctx: RpcContext, requests: AsyncIterable<unknown>, sink: ServerSink<unknown>): void };

/** A service's methods by their lowerCamel name (ts-proto's and protobuf-es's `localName`). */
export type HandlerTable = Readonly<Record<string, MethodImpl>>;

/** A unary method. */
export function unary<Req, Res>(access: Access, handle: (ctx: RpcContext, req: Req) => Promise<Res | Buffer>): MethodImpl {
  return { shape: 'unary', access, handle: handle as (ctx: RpcContext, req: unknown) => Promise<unknown> };
}

/** A server-streaming method. */
export function serverStream<Req, Res>(access: Access, handle: (ctx: RpcContext, req: Req, sink: ServerSink<Res>) => void): MethodImpl {
  return { shape: 'server-stream', access, handle: handle as (ctx: RpcContext, req: unknown, sink: ServerSink<unknown>) => void };
}

/** A client-streaming method. */
export function clientStream<Req, Res>(access: Access, handle: (ctx: RpcContext, requests: AsyncIterable<Req>) => Promise<Res>): MethodImpl {
  return { shape: 'client-stream', access, handle: handle as (ctx: RpcContext, requests: AsyncIterable<unknown>) => Promise<unknown> };
}

/** A bidirectional-streaming method. */
export function bidi<Req, Res>(access: Access, handle: (ctx: RpcContext, requests: AsyncIterable<Req>, sink: ServerSink<Res>) => void): MethodImpl {
  return { shape: 'bidi', access, handle: handle as (ctx: RpcContext, requests: AsyncIterable<unknown>, sink: ServerSink<unknown>) => void };
}
