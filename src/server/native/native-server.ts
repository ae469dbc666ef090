/**
 * The native gRPC transport (`--grpc-transport native`): a gRPC-over-HTTP/2 server on
 * node:http2 serving the same handler table as the grpc-js transport (handlers.ts,
 * subscribe-handlers.ts, health, reflection), each call presented to its handler in grpc-js call
 * shape (native-call.ts and the call shapes next to it). It exists for cost per call and per
 * stream: grpc-js runs every call through its interceptor chain, a Metadata object, an object-mode
 * Node stream and several closures; an idle subscriber held ~11 KiB RSS on a bare grpc-js server
 * against ~6 KiB on bare node:http2 (issue #19).
 *
 * What the server itself does: TLS and mutual TLS from the same PEM files as the grpc-js port
 * (tls.ts), the HTTP/2 settings (max concurrent streams = the per-connection call cap + 16, as
 * server.ts gives grpc-js, so that clients get RESOURCE_EXHAUSTED with the limit before HTTP/2
 * refuses a stream), HTTP 415 for a content type other than application/grpc*, UNIMPLEMENTED
 * (trailers-only) for a path no service registered, and graceful shutdown with grpc-js's
 * semantics: `tryShutdown` stops accepting, sends GOAWAY and calls back once the calls in flight
 * are done; `forceShutdown` destroys every connection (their calls are cancelled).
 */
import { createSecureServer, createServer, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { Server as NetServer } from 'node:net';
import type { ServiceDefinition, UntypedHandleCall } from '@grpc/grpc-js';
import { status as Code } from '@grpc/grpc-js';
import { isPublicPath, type StreamLimiter, type TokenRegistry } from '../auth.js';
import { rpcInfo, type RpcTelemetry } from '../rpc-telemetry.js';
import { respondTrailersOnly, statusTrailers, type CallStream, type MethodKind, type NativeCall, type NativeContext, type NativeMethod } from './native-call.js';
import { createH2Server } from '../http2/server.js';
import type { H2Connection } from '../http2/connection.js';
import { UnaryCall } from './unary-call.js';
import { ServerStreamCall } from './server-stream-call.js';
import { ClientStreamCall } from './client-stream-call.js';
import { BidiCall } from './bidi-call.js';

/** What the native server needs. */
export interface NativeServerOptions {
  readonly maxMessageBytes: number;
  /** The per-connection call cap (StreamLimiter's); HTTP/2's own stream limit is 16 above it. */
  readonly maxConcurrentStreams: number;
  readonly limiter: StreamLimiter;
  readonly registry: TokenRegistry | undefined;
  readonly telemetry: RpcTelemetry;
  /** Tracing is on (handlers then run in their call's span). */
  readonly traced: boolean;
  /** The PEM material of the TLS flags (tls.ts tlsMaterial); undefined = plaintext. */
  readonly tls: { readonly cert: Buffer; readonly key: Buffer; readonly ca: Buffer | null } | undefined;
  /** The HTTP/2 server: node:http2 (`node`) or src/server/http2 (`js`). */
  readonly http2: 'node' | 'js';
}

/** What shutdown needs of a connection (node's ServerHttp2Session, or an H2Connection). */
interface Connection {
  close(): void;
  destroy(): void;
}

/** The stream windows of src/server/http2: 256 KiB per stream, 4 MiB per connection; header lists up to 64 KiB. */
const JS_STREAM_WINDOW = 256 * 1024;
const JS_CONNECTION_WINDOW = 4 * 1024 * 1024;
const JS_MAX_HEADER_LIST = 64 * 1024;

/** The connection key of the per-connection call cap (the grpc-js interceptor's format), once per session. */
const CONNECTION = Symbol('palimpsest.connection');
type KeyedSession = NonNullable<CallStream['session']> & { [CONNECTION]?: string };

const UNSUPPORTED_MEDIA_TYPE = Object.freeze({ ':status': 415 });
const END_STREAM = Object.freeze({ endStream: true });

function noop(): void {}

function kindOf(requestStream: boolean, responseStream: boolean): MethodKind {
  if (requestStream) return responseStream ? 'bidi' : 'clientStream';
  return responseStream ? 'serverStream' : 'unary';
}

function connectionKey(session: KeyedSession | undefined): string {
  if (!session) return '?:?';
  let key = session[CONNECTION];
  if (key === undefined) {
    const s = session.socket;
    key = `${s?.remoteAddress ?? '?'}:${s?.remotePort ?? '?'}`;
    session[CONNECTION] = key;
  }
  return key;
}

/** A gRPC server on node:http2 with grpc-js's addService / tryShutdown / forceShutdown. */
export class NativeGrpcServer {
  readonly #methods = new Map<string, NativeMethod>();
  readonly #sessions = new Set<Connection>();
  readonly #ctx: NativeContext;
  /** node:http2's server, or createH2Server's: both are net.Servers. */
  readonly #server: NetServer;
  #shuttingDown = false;

  constructor(readonly options: NativeServerOptions) {
    this.#ctx = { maxMessageBytes: options.maxMessageBytes, limiter: options.limiter, registry: options.registry, telemetry: options.telemetry, traced: options.traced };
    const tls = options.tls;
    if (options.http2 === 'js') {
      this.#server = createH2Server({
        maxConcurrentStreams: options.maxConcurrentStreams + 16, streamWindow: JS_STREAM_WINDOW, connectionWindow: JS_CONNECTION_WINDOW, maxHeaderListSize: JS_MAX_HEADER_LIST,
        onStream: (stream, headers) => this.#onStream(stream, headers as IncomingHttpHeaders),
      }, tls, (c: H2Connection) => this.#addSession(c));
      return;
    }
    const http2Options = {
      settings: { maxConcurrentStreams: options.maxConcurrentStreams + 16 },
      // No session-wide cap on outstanding data, as grpc-js sets it: node refuses every new stream
      // of a connection past the cap, so a few large responses to a slow reader would fail all of
      // its other calls. Each call's own memory is bounded by flow control and the message limit.
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      // Trailers carry the status details (clipped by status-map.ts); never refuse to send them.
      maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
    };
    const server = tls
      ? createSecureServer({ ...http2Options, cert: tls.cert, key: tls.key, ca: tls.ca ?? undefined, requestCert: tls.ca !== null, rejectUnauthorized: tls.ca !== null })
      : createServer(http2Options);
    server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => this.#onStream(stream, headers));
    server.on('session', (session: ServerHttp2Session) => {
      session.on('error', noop);
      this.#addSession(session);
    });
    server.on('sessionError', noop);
    // A TLS client that fails the handshake (mutual TLS without a valid certificate) is dropped.
    server.on('tlsClientError', noop);
    this.#server = server;
  }

  #addSession(session: Connection & { once(event: 'close', listener: () => void): unknown }): void {
    this.#sessions.add(session);
    session.once('close', () => this.#sessions.delete(session));
    if (this.#shuttingDown) session.close();
  }

  /** Registers a service: its definition (with the safe deserializers) and grpc-js handlers; a method without a handler is UNIMPLEMENTED. */
  addService(definition: ServiceDefinition, handlers: Readonly<Record<string, UntypedHandleCall>>): void {
    for (const [key, m] of Object.entries(definition)) {
      const kind = kindOf(m.requestStream, m.responseStream);
      const path = m.path;
      const handler = handlers[key] ?? unimplementedHandler(kind, path);
      this.#methods.set(path, {
        path, kind, name: path.slice(path.lastIndexOf('/') + 1), isPublic: isPublicPath(path),
        info: rpcInfo(path, m.requestStream, m.responseStream),
        deserialize: m.requestDeserialize as (b: Buffer) => unknown,
        serialize: m.responseSerialize as (v: unknown) => Buffer,
        handler: handler as unknown as NativeMethod['handler'],
      });
    }
  }

  /** Listens on host:port (0 = any free port); resolves with the bound port. */
  listen(host: string, port: number): Promise<number> {
    const server = this.#server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        const a = server.address();
        resolve(typeof a === 'object' && a !== null ? a.port : port);
      });
    });
  }

  /** Stops accepting, sends GOAWAY on every connection and calls back once their calls are done. */
  tryShutdown(callback: () => void): void {
    this.#shuttingDown = true;
    let pending = 2;
    const step = (): void => {
      if (--pending === 0) callback();
    };
    this.#server.close(() => step());
    for (const s of this.#sessions) s.close();
    step();
  }

  /** Destroys every connection now (their calls are cancelled). */
  forceShutdown(): void {
    this.#shuttingDown = true;
    this.#server.close();
    for (const s of this.#sessions) s.destroy();
  }

  #onStream(stream: CallStream, headers: IncomingHttpHeaders): void {
    stream.on('error', noop);
    const contentType = headers['content-type'];
    if (typeof contentType !== 'string' || !contentType.startsWith('application/grpc')) {
      stream.respond(UNSUPPORTED_MEDIA_TYPE, END_STREAM);
      return;
    }
    const path = headers[':path'] ?? '';
    const method = this.#methods.get(path);
    if (method === undefined) {
      respondTrailersOnly(stream, statusTrailers(Code.UNIMPLEMENTED, `The server does not implement the method ${path}`, null));
      stream.resume();
      return;
    }
    let call: NativeCall;
    switch (method.kind) {
      case 'unary': call = new UnaryCall(stream, method, this.#ctx, headers); break;
      case 'serverStream': call = new ServerStreamCall(stream, method, this.#ctx, headers); break;
      case 'clientStream': call = new ClientStreamCall(stream, method, this.#ctx, headers); break;
      case 'bidi': call = new BidiCall(stream, method, this.#ctx, headers); break;
    }
    call.start(connectionKey(stream.session as KeyedSession | undefined));
  }
}

/** grpc-js's answer for a method registered without a handler. */
function unimplementedHandler(kind: MethodKind, path: string): UntypedHandleCall {
  const err = { code: Code.UNIMPLEMENTED, details: `The server does not implement the method ${path}` };
  if (kind === 'unary' || kind === 'clientStream') return ((_call: unknown, cb: (e: unknown) => void) => cb(err)) as unknown as UntypedHandleCall;
  return ((call: { emit(e: string, v: unknown): void }) => call.emit('error', err)) as unknown as UntypedHandleCall;
}
