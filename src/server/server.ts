/**
 * The gRPC server around an app: handlers, health, metrics, reflection, graceful shutdown, and
 * (with --web-listen) the web port serving the same handler table (src/server/web). It
 * does not choose the store or the change feed: the composition root (src/main.ts) builds the
 * app and hands it in.
 */
import { Retention } from '../app/retention.js';
import { FeedRetention } from '../app/feed-retention.js';
import { Server, type ServerCredentials } from '@grpc/grpc-js';
import type { SessionService } from '../app/session-service.js';
import { SessionServiceService } from '../../gen/palimpsest/v1/service.js';
import { HealthService } from '../../gen/grpc/health/v1/health.js';
import { DEFAULT_CONFIG, type ServerConfig } from './config.js';
import { makeHandlers } from './handlers.js';
import { passThroughResponses } from './grpc/pass-through.js';
import { splitHostPort } from './listen-address.js';
import type { ContextResolver } from './permissions.js';
import type { HandlerTable } from './rpc/handler-table.js';
import { grpcImplementation } from './grpc/service.js';
import { HealthState } from './health.js';
import { loadDescriptorIndex, reflectionHandlers, ReflectionV1AlphaService, ReflectionV1Service } from './reflection.js';
import { createLogger, type Logger } from './logger.js';
import { NO_METRICS, loadMetrics, type Metrics, type PromMetrics } from './metrics.js';
import { makeRpcTelemetry } from './rpc-telemetry.js';
import { makeServerInterceptor } from './grpc/admission-call.js';
import type { Tracing } from './tracing.js';
import { metadataResolver, StreamLimiter, TokenRegistry } from './auth.js';
import { serverCredentials } from './tls.js';
import { withSafeDeserializers } from './safe-decode.js';
import { subscriptionStreams, type SubscriptionStreams } from './subscribe-handlers.js';
import { RevocableCalls } from './revocable-calls.js';
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
  streams?: (app: SessionService, config: ServerConfig, metrics: Metrics, logger: Logger) => {
    handlers: HandlerTable;
    shutdown(): void;
    /** Ends streams whose token was revoked or lost a permission (see SubscriptionStreams). */
    recheck?: SubscriptionStreams['recheck'];
  };
  /** Caller resolution (auth). */
  resolver?: ContextResolver;
  /** Extra services to register. */
  services?: (server: Server) => void;
  /** Server credentials (TLS). */
  credentials?: ServerCredentials;
  /** An OpenTelemetry tracer provider to trace with, whatever OTEL_* says (tests: in-memory). */
  tracerProvider?: import('@opentelemetry/api').TracerProvider;
  /** Loaded tracing (the composition root loads it, traces the store with it and hands it in). */
  tracing?: Tracing;
  /** The health state to serve (the composition root's: not serving while a replica waits for its database; the heads record). */
  health?: HealthState;
}

/** A bind failure in one line: "address in use" says so, with what to do. */
export function bindError(err: Error, address: string, flag: string): Error {
  if (/EADDRINUSE/.test(err.message)) return new Error(`${address} is already in use (another palimpsest serve?); stop it or pick another address with ${flag}`);
  if (/EACCES/.test(err.message)) return new Error(`not allowed to listen on ${address} (a port below 1024 needs privileges); pick another address with ${flag}`);
  return err;
}

/** The full config from a partial one (defaults filled in). */
export function resolveConfig(partial: Partial<ServerConfig> = {}): ServerConfig {
  return { ...DEFAULT_CONFIG, ...partial, limits: { ...DEFAULT_CONFIG.limits, ...partial.limits } };
}

/** The server's logger for a config. */
export function serverLogger(config: ServerConfig): Logger {
  return createLogger(config.logLevel);
}

/**
 * Serves `app` over gRPC (and the web port with --web-listen); resolves once listening. The app (and its store) belong to the server
 * from here on: shutdown closes them. On a start-up failure the caller still owns the app.
 */
export async function serveApp(app: SessionService, config: ServerConfig, logger: Logger, ext: ServerExtensions = {}): Promise<RunningServer> {
  const { host, port } = splitHostPort(config.listen);
  const tlsFlags = { listenHost: host, tlsCert: config.tlsCert, tlsKey: config.tlsKey, tlsClientCa: config.tlsClientCa, insecure: config.insecure };
  const transport = ext.credentials ? { credentials: ext.credentials, tls: true, mtls: false } : serverCredentials(tlsFlags);
  const registry = config.authTokens ? new TokenRegistry(config.authTokens) : undefined;
  if (registry) logger.info({ tokens: registry.size, file: config.authTokens }, 'authentication on');
  else logger.warn({}, 'authentication is OFF: every client can read and write every session (pass --auth-tokens FILE to turn it on)');
  const limiter = new StreamLimiter(config.maxConcurrentStreams);
  const revocable = new RevocableCalls();
  // prom-client is loaded only when metrics are served (it is a large part of start-up).
  const prom: PromMetrics | undefined = config.metricsListen ? await loadMetrics() : undefined;
  const metrics: Metrics = prom ?? NO_METRICS;
  const tracing = ext.tracing;
  const health = ext.health ?? new HealthState();
  // One per-RPC telemetry for both ports (the web port's calls count in the same series).
  const telemetry = makeRpcTelemetry({ metrics, logger, tracer: tracing?.rpc });
  // The gRPC port: @grpc/grpc-js (HTTP/2 is nghttp2's, with its resource budgets).
  const server = new Server({
    'grpc.max_receive_message_length': config.maxMessageBytes,
    'grpc.max_send_message_length': config.maxMessageBytes,
    // Advertise what is admitted: a client that trusts SETTINGS_MAX_CONCURRENT_STREAMS never meets
    // the per-connection cap (StreamLimiter) with RESOURCE_EXHAUSTED.
    'grpc.max_concurrent_streams': config.maxConcurrentStreams,
    // One interceptor: telemetry around admission (grpc/admission-call.ts), so admission's refusals are counted and logged too.
    interceptors: [makeServerInterceptor(telemetry, registry, limiter)],
  });
  const resolver: ContextResolver = ext.resolver ?? metadataResolver(registry !== undefined);
  // Subscriptions are on by default; their handlers write pre-encoded Buffers (encoded once per
  // delta), which the pass-through serializers (grpc/pass-through.ts) send as they are.
  const streams = ext.streams?.(app, config, metrics, logger) ?? subscriptionStreams(app, config, metrics);
  // GetMessages may answer with a pre-encoded Buffer too (cached per model-history message).
  // One handler table for both ports: the gRPC port's adapter (src/server/grpc) and the web
  // port's (src/server/web) serve these same handlers.
  const onUnexpected = (e: unknown): void => logger.error({ err: e }, 'unexpected error');
  const handlers = makeHandlers(app, metrics, streams.handlers, { maxMessageBytes: config.maxMessageBytes, revocable, onUnexpected, heartbeatMs: config.heartbeatMs });
  const fail = (err: unknown) => toServiceError(err, onUnexpected);
  const grpc = (table: HandlerTable) => grpcImplementation(table, resolver, fail);
  server.addService(withSafeDeserializers(passThroughResponses(SessionServiceService)), grpc(handlers));
  const healthHandlers = health.handlers();
  server.addService(withSafeDeserializers(HealthService), grpc(healthHandlers));
  const reflection = loadDescriptorIndex();
  const reflectionTable = reflection ? reflectionHandlers(reflection) : undefined;
  if (reflectionTable) {
    server.addService(withSafeDeserializers(ReflectionV1Service), grpc(reflectionTable));
    server.addService(withSafeDeserializers(ReflectionV1AlphaService), grpc(reflectionTable));
  } else logger.warn({}, 'gen/descriptor.binpb not found: server reflection is off');
  ext.services?.(server);

  const bindHost = host.includes(':') ? `[${host}]` : host;
  const creds = transport.credentials;
  const boundPort = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${bindHost}:${port}`, creds, (err, p) => (err ? reject(bindError(err, `${bindHost}:${port}`, '--listen')) : resolve(p)));
  });
  let metricsPort: number | undefined;
  let metricsServer: import('node:http').Server | undefined;
  if (config.metricsListen) {
    const m = splitHostPort(config.metricsListen);
    const r = await prom!.serve(m.host, m.port).catch((e: Error) => {
      server.forceShutdown();
      throw bindError(e, config.metricsListen, '--metrics-listen');
    });
    metricsPort = r.port;
    metricsServer = r.server;
  }
  // The web port serves the same handler table (src/server/web).
  let web: RunningWebServer | undefined;
  if (config.webListen) {
    try {
      web = await startWebServer({
        listen: config.webListen, tlsCert: config.tlsCert, tlsKey: config.tlsKey, tlsClientCa: config.tlsClientCa, insecure: config.insecure,
        corsOrigins: config.webCorsOrigins, maxMessageBytes: config.maxMessageBytes, handlers, healthHandlers, reflectionHandlers: reflectionTable, registry, limiter, telemetry,
        resolver, fail, readBlob: (caller, digest, offset) => app.readBlob(caller, digest, offset),
      });
    } catch (e) {
      // The caller still owns the app (serveApp's contract): stop only what was started here.
      server.forceShutdown();
      streams.shutdown();
      if (metricsServer) await new Promise<void>((r) => metricsServer.close(() => r()));
      throw e instanceof Error ? bindError(e, config.webListen, '--web-listen') : e;
    }
  }
  metrics.trackCachedSessions(() => app.cachedSessions);
  metrics.trackHeadsUnsealed(() => health.headsUnsealed !== undefined);
  const retention = new Retention(app, {
    retentionDays: config.retentionDays, intervalMs: config.retentionIntervalMs, batchSize: config.retentionBatch, log: logger,
    onDeleted: (n) => metrics.retentionDeleted(n),
  });
  retention.start();
  const feedRetention = new FeedRetention(app.store, { days: config.feedRetentionDays, intervalMs: config.retentionIntervalMs, log: logger });
  feedRetention.start();
  logger.info({ address: `${host}:${boundPort}`, db: config.db, durability: config.durability, sqliteWriter: config.sqliteWriter, metricsPort, webPort: web?.port }, 'palimpsest listening');

  let shutdownPromise: Promise<void> | undefined;
  const shutdown = (): Promise<void> => {
    shutdownPromise ??= (async () => {
      logger.info({}, 'shutting down');
      health.setNotServing();
      streams.shutdown();
      app.sessionFeed.close(); // SubscribeSessions streams end with SERVER_SHUTDOWN and their cursor
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
      await retention.stop();
      await feedRetention.stop();
      await webClosed;
      await app.close();
      if (metricsServer) await new Promise<void>((r) => metricsServer.close(() => r()));
      await tracing?.shutdown().catch((e: unknown) => logger.warn({ err: (e as Error).message }, 'trace export failed at shutdown'));
      logger.info({}, 'stopped');
    })();
    return shutdownPromise;
  };
  const security = { tls: transport.tls, mtls: transport.mtls, auth: registry !== undefined };
  const reloadTokens = (): void => {
    if (!registry) return;
    registry.reload();
    // Open streams were authorized by the old file: end those whose token is gone or lost a permission.
    const lookup = (credential: string) => registry.byHash(credential);
    const ended = (streams.recheck?.(lookup) ?? 0) + revocable.recheck(lookup);
    logger.info({ tokens: registry.size, streamsEnded: ended }, 'token file reloaded');
  };
  return { security, reloadTokens, port: boundPort, address: `${host.includes(':') ? `[${host}]` : host}:${boundPort}`, metricsPort, webPort: web?.port, app, metrics, logger, shutdown };
}
