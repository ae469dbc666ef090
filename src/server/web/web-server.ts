/**
 * The web port (`--web-listen HOST:PORT`): the whole palimpsest.v1.SessionService (and
 * grpc.health.v1 and server reflection) over the Connect protocol, gRPC-Web and gRPC at the standard paths, plus the
 * viewer's static assets at `/` and a tenant's blobs at `/blobs/<digest>` (blob-route.ts), on one HTTP port.
 *
 * - The RPCs are the gRPC port's handler table, run through connect-adapter.ts: no second copy of
 *   any rule, the same error details, the same per-RPC telemetry (rpc-telemetry.ts: the
 *   grpc_server_* series, the log line, the span).
 * - Security as on the gRPC port: TLS from the same certificate flags (HTTP/2 and HTTP/1.1 by
 *   ALPN; mutual TLS with --tls-client-ca), plaintext only on loopback unless --insecure; bearer
 *   tokens and tenants through the same check (auth.ts `authenticate`); the same per-connection
 *   cap on calls in flight (StreamLimiter) and message size (Connect's read/write limits at
 *   --max-message-bytes); CORS off unless --web-cors-origins.
 * - Plaintext serves HTTP/1.1 (browsers) and HTTP/2 with prior knowledge (`buf curl
 *   --http2-prior-knowledge`, Connect's Node HTTP/2 transport, client streaming) on the same port:
 *   the first bytes of a connection say which (the HTTP/2 preface starts with "PRI").
 */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createSecureServer, createServer as createH2Server, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { ServiceError } from '@grpc/grpc-js';
import { createConnectRouter, createContextKey, createContextValues, type HandlerContext } from '@connectrpc/connect';
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from '@connectrpc/connect-node';
import { SessionServiceService } from '../../../gen/palimpsest/v1/service.js';
import { HealthService } from '../../../gen/grpc/health/v1/health.js';
import { SessionService as SessionServiceDesc } from '../../../gen/es/palimpsest/v1/service_pb.js';
import { Health as HealthDesc } from '../../../gen/es/grpc/health/v1/health_pb.js';
import { ServerReflection as ReflectionV1Desc } from '../../../gen/es/grpc/reflection/v1/reflection_pb.js';
import { ServerReflection as ReflectionV1AlphaDesc } from '../../../gen/es/grpc/reflection/v1alpha/reflection_pb.js';
import { ReflectionV1AlphaService, ReflectionV1Service } from '../reflection.js';
import { admitCall, CREDENTIAL_KEY, StreamLimiter, TENANT_KEY, type TokenRegistry } from '../auth.js';
import { passThroughResponses } from '../grpc/pass-through.js';
import { splitHostPort } from '../listen-address.js';
import { withSafeDeserializers } from '../safe-decode.js';
import { tlsMaterial } from '../tls.js';
import type { RpcTelemetry } from '../rpc-telemetry.js';
import { connectService, type Admission } from './connect-adapter.js';
import type { HandlerTable } from '../rpc/handler-table.js';
import type { ContextResolver } from '../permissions.js';
import { applyCors } from './cors.js';
import { defaultAssetDir, staticAssets } from './static-assets.js';
import { guardMalformed } from './malformed-guard.js';
import { BLOBS_PREFIX, blobRoute, type BlobReader } from './blob-route.js';

/** What the web port needs from the composition root. */
export interface WebServerOptions {
  /** HOST:PORT (port 0 = any free port). */
  readonly listen: string;
  readonly tlsCert: string;
  readonly tlsKey: string;
  readonly tlsClientCa: string;
  readonly insecure: boolean;
  /** Origins allowed by CORS ('*' = any); empty = CORS off. */
  readonly corsOrigins: readonly string[];
  readonly maxMessageBytes: number;
  /** The SessionService handler table the gRPC port serves. */
  readonly handlers: HandlerTable;
  /** grpc.health.v1 handlers (public, as on the gRPC port). */
  readonly healthHandlers?: HandlerTable;
  /** Server reflection handlers (public; v1 and v1alpha; bidi streams, so HTTP/2 only). */
  readonly reflectionHandlers?: HandlerTable;
  /** The caller resolver of the gRPC port. */
  readonly resolver: ContextResolver;
  readonly registry: TokenRegistry | undefined;
  readonly limiter: StreamLimiter;
  readonly fail: (err: unknown) => ServiceError;
  /** The gRPC port's per-RPC telemetry: every call here counts in the same series, log line and span. */
  readonly telemetry: RpcTelemetry;
  /** The app's blob read (SessionService.readBlob) behind `GET /blobs/<digest>` (blob-route.ts); without it the path is not served. */
  readonly readBlob?: BlobReader;
  /** Built viewer assets (default: dist/web of this checkout). */
  readonly assetDir?: string;
}

/** A listening web port. */
export interface RunningWebServer {
  readonly port: number;
  readonly tls: boolean;
  /** Stops accepting; in-flight calls get `graceMs`, then connections are closed. */
  close(graceMs: number): Promise<void>;
}

/** The caller's connection (address:port), for the per-connection call cap. */
const CONNECTION = createContextKey('?');

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/**
 * A POST to a path no service serves: gRPC and gRPC-Web clients get UNIMPLEMENTED as a
 * trailers-only response, Connect clients a 404 with the Connect error body (code unimplemented).
 */
function unknownMethod(req: Req, res: Res): void {
  const path = (req.url ?? '').split('?', 1)[0] ?? '';
  const message = `unknown method ${path}: check the service and method name (server reflection lists them)`;
  const type = String(req.headers['content-type'] ?? '');
  // Drain the request body so the connection stays usable.
  req.resume();
  if (type.startsWith('application/grpc')) {
    const headers = { 'content-type': type.startsWith('application/grpc-web') ? 'application/grpc-web+proto' : 'application/grpc', 'grpc-status': '12', 'grpc-message': encodeURIComponent(message) };
    // Trailers-only: one HEADERS frame that ends the stream (HTTP/2), or headers and no body.
    if ('stream' in res && !res.stream.headersSent) res.stream.respond({ ':status': 200, ...headers }, { endStream: true });
    else {
      res.writeHead(200, headers);
      res.end();
    }
    return;
  }
  res.writeHead(404, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ code: 'unimplemented', message }));
}

/** Starts the web port; resolves once it is listening. */
export async function startWebServer(o: WebServerOptions): Promise<RunningWebServer> {
  const { host, port } = splitHostPort(o.listen, 'web listen address');
  const pem = tlsMaterial({ listenHost: host, tlsCert: o.tlsCert, tlsKey: o.tlsKey, tlsClientCa: o.tlsClientCa, insecure: o.insecure });

  const admit = (isPublic: boolean) => (ctx: HandlerContext, method: string): Admission => {
    const { release, caller } = admitCall(o.limiter, o.registry, ctx.values.get(CONNECTION), method, isPublic, ctx.requestHeader.get('authorization') ?? undefined);
    // Only the verified tenant reaches the handlers (never client-sent x-palimpsest-* headers).
    const verified = new Map<string, string>();
    if (caller) {
      verified.set(TENANT_KEY, caller.tenant);
      verified.set(CREDENTIAL_KEY, caller.sha256);
    }
    return { verified, release };
  };
  const sessionDef = withSafeDeserializers(passThroughResponses(SessionServiceService));
  const healthDef = withSafeDeserializers(HealthService);
  // The gRPC port's safe request deserializers by path, for the guard (malformed-guard.ts).
  const decoders = new Map<string, (b: Buffer) => unknown>();
  const served = (def: Readonly<Record<string, { path: string; requestDeserialize: (b: Buffer) => unknown }>>): never => {
    for (const m of Object.values(def)) decoders.set(m.path, m.requestDeserialize);
    return def as never;
  };
  // connectNodeAdapter's routing, with each handler behind the malformed-request guard.
  const router = createConnectRouter({ readMaxBytes: o.maxMessageBytes, writeMaxBytes: o.maxMessageBytes, acceptCompression: [compressionGzip, compressionBrotli] });
  router.service(SessionServiceDesc, connectService({ service: SessionServiceDesc, definition: served(sessionDef), handlers: o.handlers, resolve: o.resolver, admit: admit(false), fail: o.fail, telemetry: o.telemetry }));
  if (o.healthHandlers) {
    router.service(HealthDesc, connectService({ service: HealthDesc, definition: served(healthDef), handlers: o.healthHandlers, resolve: o.resolver, admit: admit(true), fail: o.fail, telemetry: o.telemetry }));
  }
  if (o.reflectionHandlers) {
    for (const [desc, def] of [[ReflectionV1Desc, ReflectionV1Service], [ReflectionV1AlphaDesc, ReflectionV1AlphaService]] as const) {
      router.service(desc, connectService({ service: desc, definition: served(withSafeDeserializers(def)), handlers: o.reflectionHandlers, resolve: o.resolver, admit: admit(true), fail: o.fail, telemetry: o.telemetry }));
    }
  }
  const routes = new Map(router.handlers.map((h) => [h.requestPath, guardMalformed(h, o.maxMessageBytes, decoders.get(h.requestPath))] as const));
  const assets = staticAssets(o.assetDir ?? defaultAssetDir());
  const blobs = o.readBlob ? blobRoute({ readBlob: o.readBlob, resolver: o.resolver, registry: o.registry, limiter: o.limiter, fail: o.fail }) : undefined;
  const rpc = (req: Req, res: Res): void => {
    const path = (req.url ?? '').split('?', 1)[0] ?? '';
    const route = routes.get(path);
    const s = req.socket;
    if (!route) {
      if (blobs && path.startsWith(BLOBS_PREFIX)) blobs(req, res, `web:${s.remoteAddress ?? '?'}:${s.remotePort ?? '?'}`);
      else if (req.method === 'POST') unknownMethod(req, res);
      else assets(req, res);
      return;
    }
    const uReq = universalRequestFromNodeRequest(req as never, res as never, undefined, createContextValues().set(CONNECTION, `web:${s.remoteAddress ?? '?'}:${s.remotePort ?? '?'}`));
    route(uReq).then((uRes) => universalResponseToNodeResponse(uRes, res as never)).catch(() => {
      // The response is already failed or the client went away (Connect logs nothing either).
    });
  };
  // HTTP/1.1 sockets with a request in flight (the others are idle keep-alives, closed at once on
  // shutdown; HTTP/2 sessions are closed with GOAWAY).
  const busy = new Map<Socket, number>();
  const http1Sockets = new Set<Socket>();
  const handle = (req: Req, res: Res): void => {
    if (req.httpVersionMajor === 1) {
      const sock = req.socket as Socket;
      if (!http1Sockets.has(sock)) {
        http1Sockets.add(sock);
        sock.once('close', () => http1Sockets.delete(sock));
      }
      busy.set(sock, (busy.get(sock) ?? 0) + 1);
      res.once('close', () => {
        const n = (busy.get(sock) ?? 1) - 1;
        if (n > 0) busy.set(sock, n);
        else {
          busy.delete(sock);
          if (closing) sock.end();
        }
      });
    }
    if (applyCors(o.corsOrigins, req, res)) return;
    rpc(req as never, res as never);
  };
  let closing = false;

  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  // Advertise what is admitted (StreamLimiter): a client that honours SETTINGS_MAX_CONCURRENT_STREAMS
  // never meets TOO_MANY_STREAMS.
  const settings = { maxConcurrentStreams: o.limiter.maxPerConnection };
  let listener: NetServer;
  const h2Sessions = new Set<import('node:http2').Http2Session>();
  if (pem) {
    const server = createSecureServer({ cert: pem.cert, key: pem.key, ca: pem.ca ?? undefined, requestCert: pem.ca !== null, rejectUnauthorized: pem.ca !== null, allowHTTP1: true, settings }, handle);
    server.on('session', (s) => {
      h2Sessions.add(s);
      s.once('close', () => h2Sessions.delete(s));
    });
    server.on('connection', track);
    listener = server;
  } else {
    const h1 = createHttpServer(handle);
    const h2 = createH2Server({ settings }, handle);
    h2.on('session', (s) => {
      h2Sessions.add(s);
      s.once('close', () => h2Sessions.delete(s));
    });
    listener = createNetServer((socket) => {
      track(socket);
      let head = Buffer.alloc(0);
      const onReadable = (): void => {
        for (;;) {
          const chunk = socket.read() as Buffer | null;
          if (chunk === null) break;
          head = Buffer.concat([head, chunk]);
        }
        if (head.length < 3 && !socket.readableEnded) {
          socket.once('readable', onReadable);
          return;
        }
        socket.unshift(head);
        (head.subarray(0, 3).toString('latin1') === 'PRI' ? h2 : h1).emit('connection', socket);
      };
      socket.once('readable', onReadable);
      socket.on('error', () => socket.destroy());
    });
  }
  const boundPort = await new Promise<number>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(port, host, () => {
      listener.off('error', reject);
      const a = listener.address();
      resolve(typeof a === 'object' && a !== null ? a.port : port);
    });
  });

  return {
    port: boundPort,
    tls: pem !== undefined,
    close: (graceMs) => new Promise<void>((resolve) => {
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        for (const s of sockets) s.destroy();
        finish();
      }, graceMs);
      timer.unref();
      closing = true;
      for (const s of h2Sessions) s.close();
      listener.close(() => finish());
      // Idle HTTP/1.1 keep-alive connections hold no call: close them now (busy ones after their call).
      for (const s of http1Sockets) if (!busy.has(s)) s.end();
    }),
  };
}
