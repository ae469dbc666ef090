/**
 * Composition of the gRPC server: store, app, handlers, health, metrics, graceful shutdown.
 */
import { Server, type ServerCredentials, type UntypedHandleCall } from '@grpc/grpc-js';
import { SessionService } from '../app/session-service.js';
import type { SessionStore } from '../app/store-port.js';
import { MemorySessionStore } from '../store/memory/memory-store.js';
import { SqliteSessionStore } from '../store/sqlite/sqlite-store.js';
import { SessionServiceService } from '../../gen/palimpsest/v1/service.js';
import { HealthService } from '../../gen/grpc/health/v1/health.js';
import { DEFAULT_CONFIG, type ServerConfig } from './config.js';
import { makeHandlers, preEncodedResponses, type ContextResolver } from './handlers.js';
import { HealthState } from './health.js';
import { loadDescriptorIndex, reflectionHandlers, ReflectionV1AlphaService, ReflectionV1Service } from './reflection.js';
import { createLogger, type Logger } from './logger.js';
import { NO_METRICS, loadMetrics, type Metrics, type PromMetrics } from './metrics.js';
import { makeInterceptor, metadataResolver, StreamLimiter, TokenRegistry } from './auth.js';
import { serverCredentials } from './tls.js';
import { withSafeDeserializers } from './safe-decode.js';
import { preEncodedStreams, subscriptionStreams } from './subscribe-handlers.js';
import { toServiceError } from './status-map.js';
import { startWebServer, type RunningWebServer } from './web/web-server.js';

/** A running server. */
export interface RunningServer {
  /** The bound gRPC port. */
  readonly port: number;
  /** host:port clients dial. */
  readonly address: string;
  /** The Prometheus port, when enabled. */
  readonly metricsPort: number | undefined;
  /** The web port (Connect, gRPC-Web, viewer), when enabled. */
  readonly webPort: number | undefined;
  readonly app: SessionService;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** Whether TLS / mutual TLS / authentication are on. */
  readonly security: { readonly tls: boolean; readonly mtls: boolean; readonly auth: boolean };
  /** Re-reads the token file (SIGHUP); throws (keeping the old tokens) when it is invalid. */
  reloadTokens(): void;
  /** Graceful shutdown: stop accepting, finish in-flight appends, end streams, close the db. */
  shutdown(): Promise<void>;
}

/** Hooks other modules plug in (subscriptions, auth, reflection). */
export interface ServerExtensions {
  /** Extra SessionService stream handlers (subscriptions). */
  streams?: (app: SessionService, config: ServerConfig, metrics: Metrics, logger: Logger) => { handlers: Record<string, UntypedHandleCall>; shutdown(): void };
  /** Caller resolution (auth). */
  resolver?: ContextResolver;
  /** Extra services to register. */
  services?: (server: Server) => void;
  /** Server credentials (TLS). */
  credentials?: ServerCredentials;
}

function splitHostPort(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  if (i < 0) throw new Error(`listen address ${JSON.stringify(addr)} must be host:port`);
  const port = Number(addr.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port in ${JSON.stringify(addr)}`);
  return { host: addr.slice(0, i).replace(/^\[|\]$/g, ''), port };
}

/** Opens the configured store. */
export function openStore(config: ServerConfig): SessionStore {
  if (config.db === ':memory:') return new MemorySessionStore();
  return new SqliteSessionStore({ path: config.db, durability: config.durability });
}

/** Starts a server; resolves once it is listening. */
export async function startServer(partial: Partial<ServerConfig> = {}, ext: ServerExtensions = {}): Promise<RunningServer> {
  const config: ServerConfig = { ...DEFAULT_CONFIG, ...partial, limits: { ...DEFAULT_CONFIG.limits, ...partial.limits } };
  const logger = createLogger(config.logLevel);
  const { host, port } = splitHostPort(config.listen);
  const transport = ext.credentials
    ? { credentials: ext.credentials, tls: true, mtls: false }
    : serverCredentials({ listenHost: host, tlsCert: config.tlsCert, tlsKey: config.tlsKey, tlsClientCa: config.tlsClientCa, insecure: config.insecure });
  const registry = config.authTokens ? new TokenRegistry(config.authTokens) : undefined;
  if (registry) logger.info({ tokens: registry.size, file: config.authTokens }, 'authentication on');
  else logger.warn({}, 'authentication is OFF: every client can read and write every session (pass --auth-tokens FILE to turn it on)');
  const limiter = new StreamLimiter(config.maxConcurrentStreams);
  // prom-client is loaded only when metrics are served (it is a large part of start-up).
  const prom: PromMetrics | undefined = config.metricsListen ? await loadMetrics() : undefined;
  const metrics: Metrics = prom ?? NO_METRICS;
  const store = openStore(config);
  const app = new SessionService(store, config.limits, Date.now, logger);
  const health = new HealthState();
  const server = new Server({
    'grpc.max_receive_message_length': config.maxMessageBytes,
    'grpc.max_send_message_length': config.maxMessageBytes,
    // HTTP/2's own cap sits above ours so that clients get RESOURCE_EXHAUSTED with the limit.
    'grpc.max_concurrent_streams': config.maxConcurrentStreams + 16,
    interceptors: [makeInterceptor(registry, limiter)],
  });
  const resolver: ContextResolver = ext.resolver ?? metadataResolver(registry !== undefined);
  // Subscriptions are on by default; their handlers write pre-encoded Buffers (encoded once per
  // delta), which the preEncodedStreams definition passes through.
  const streams = ext.streams?.(app, config, metrics, logger) ?? subscriptionStreams(app, config, metrics, logger, resolver);
  // GetMessages may answer with a pre-encoded Buffer too (cached per model-history message).
  const handlers = makeHandlers(app, resolver, logger, metrics, streams.handlers, { maxMessageBytes: config.maxMessageBytes });
  server.addService(withSafeDeserializers(preEncodedResponses(preEncodedStreams(SessionServiceService))), handlers);
  const healthHandlers = health.handlers();
  server.addService(withSafeDeserializers(HealthService), healthHandlers);
  const reflection = loadDescriptorIndex();
  const reflectionTable = reflection ? reflectionHandlers(reflection) : undefined;
  if (reflectionTable) {
    server.addService(withSafeDeserializers(ReflectionV1Service), reflectionTable);
    server.addService(withSafeDeserializers(ReflectionV1AlphaService), reflectionTable);
  } else logger.warn({}, 'gen/descriptor.binpb not found: server reflection is off');
  ext.services?.(server);

  const bindHost = host.includes(':') ? `[${host}]` : host;
  const creds = transport.credentials;
  const boundPort = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${bindHost}:${port}`, creds, (err, p) => (err ? reject(err) : resolve(p)));
  });
  let metricsPort: number | undefined;
  let metricsServer: import('node:http').Server | undefined;
  if (config.metricsListen) {
    const m = splitHostPort(config.metricsListen);
    const r = await prom!.serve(m.host, m.port);
    metricsPort = r.port;
    metricsServer = r.server;
  }
  // The web port serves the same handler table (src/server/web).
  let web: RunningWebServer | undefined;
  if (config.webListen) {
    try {
      web = await startWebServer({
        listen: config.webListen, tlsCert: config.tlsCert, tlsKey: config.tlsKey, tlsClientCa: config.tlsClientCa, insecure: config.insecure,
        corsOrigins: config.webCorsOrigins, maxMessageBytes: config.maxMessageBytes, handlers, healthHandlers, reflectionHandlers: reflectionTable, registry, limiter,
        fail: (err) => toServiceError(err, (e) => logger.error({ err: e }, 'unexpected error')),
      });
    } catch (e) {
      server.forceShutdown();
      streams.shutdown();
      await app.close();
      throw e;
    }
  }
  metrics.trackCachedSessions(() => app.cachedSessions);
  logger.info({ address: `${host}:${boundPort}`, db: config.db, durability: config.durability, metricsPort, webPort: web?.port }, 'palimpsest listening');

  let shutdownPromise: Promise<void> | undefined;
  const shutdown = (): Promise<void> => {
    shutdownPromise ??= (async () => {
      logger.info({}, 'shutting down');
      health.setNotServing();
      streams.shutdown();
      health.endWatchers();
      const webClosed = web?.close(config.shutdownGraceMs);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, config.shutdownGraceMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      await webClosed;
      await app.close();
      if (metricsServer) await new Promise<void>((r) => metricsServer.close(() => r()));
      logger.info({}, 'stopped');
    })();
    return shutdownPromise;
  };
  const security = { tls: transport.tls, mtls: transport.mtls, auth: registry !== undefined };
  const reloadTokens = (): void => {
    if (!registry) return;
    registry.reload();
    logger.info({ tokens: registry.size }, 'token file reloaded');
  };
  return { security, reloadTokens, port: boundPort, address: `${host.includes(':') ? `[${host}]` : host}:${boundPort}`, metricsPort, webPort: web?.port, app, metrics, logger, shutdown };
}
