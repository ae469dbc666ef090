/**
 * The composition root: which store (a PostgreSQL URL, a SQLite file, or memory for ':memory:'), which change feed
 * (the store-driven one, so subscribers also hear commits of other processes on the same
 * database), the app over them, and the gRPC server around the app. `palimpsest serve`, the test
 * server and the benches start Palimpsest through here; the server module never chooses a store.
 */
import { SessionService } from './app/session-service.js';
import { StoreChangeFeed } from './app/store-change-feed.js';
import { monitorStorage } from './app/storage-monitor.js';
import type { SessionStore } from './app/store-port.js';
import type { ServerConfig } from './server/config.js';
import type { Logger } from './server/logger.js';
import { loadTracing, type Tracing } from './server/tracing.js';
import { resolveConfig, serveApp, serverLogger, type RunningServer, type ServerExtensions } from './server/server.js';
import { MemorySessionStore } from './store/memory/memory-store.js';
import { SqliteSessionStore } from './store/sqlite/sqlite-store.js';
import { isPostgresUrl, redactUrl } from './store/postgres/url.js';
import type { CommittedBatch } from './app/change-feed.js';
import { LiveGenAiExporter, TappedChangeFeed, type ExportPositions } from './app/otel-genai-live.js';
import { otlpSpanSink } from './app/otel-genai-otlp-sink.js';
import { FileExportPositions, MemoryExportPositions } from './store/otel-genai-positions.js';
import { VERSION } from './cli/version.js';
import { compactionObservations } from './app/compaction-metrics.js';

export type { RunningServer, ServerExtensions };

/**
 * Opens the configured store: a `postgresql://` / `postgres://` URL selects the shared PostgreSQL
 * store (the driver is loaded only then), anything else is a SQLite file or `:memory:`.
 */
export async function openStore(config: ServerConfig, logger?: Logger): Promise<SessionStore> {
  if (config.db === ':memory:') return new MemorySessionStore();
  if (isPostgresUrl(config.db)) {
    const { PostgresSessionStore } = await import('./store/postgres/postgres-store.js');
    return PostgresSessionStore.open({ url: config.db, onError: (error) => logger?.warn({ err: error }, 'PostgreSQL connection problem') });
  }
  return new SqliteSessionStore({ path: config.db, durability: config.durability, appendWriter: config.sqliteWriter });
}

/** The app over the configured store, with the store-driven change feed. */
export async function composeApp(config: ServerConfig, logger: Logger, tracing?: Tracing, tap?: (batch: CommittedBatch) => void): Promise<SessionService> {
  const opened = await openStore(config, logger);
  if (opened instanceof SqliteSessionStore) {
    // The writer thread opens its connection now: a database it cannot open fails the start.
    try {
      await opened.writerReady();
    } catch (e) {
      await opened.close().catch(() => undefined);
      throw e;
    }
    for (const d of opened.damagedSessions) logger.error({ dataLoss: true, sessionId: d.sessionId, err: d.message }, 'DATA LOSS found at open: session refused');
    const ext = opened.checksumExtension;
    if (ext.problem !== undefined) logger.warn({ checksums: 'javascript' }, ext.problem);
    else logger.info({ checksums: ext.loaded ? (ext.hardwareCrc === true ? 'sqlite (crc32c instruction)' : 'sqlite (table)') : 'javascript' }, 'row checksums verified on read');
  }
  // Storage failures are logged once per episode (not per request) by the monitor.
  const monitored = monitorStorage(opened, logger);
  // With tracing on, every store call is a span inside its RPC's span.
  const store = tracing ? tracing.traceStore(monitored) : monitored;
  // Subscribers hear this process's commits at once and other processes' through the store.
  // A tap (the live GenAI export) hears every batch this process commits, whatever session.
  const feed = new StoreChangeFeed(store.openHeadWatch());
  return new SessionService(store, config.limits, Date.now, logger, undefined, tap === undefined ? feed : new TappedChangeFeed(feed, tap));
}

/** The positions of the live GenAI export: a file next to a SQLite database, memory for `:memory:`. */
export function otelGenaiPositions(config: ServerConfig): ExportPositions {
  if (config.otelGenaiPositions) return new FileExportPositions(config.otelGenaiPositions);
  if (config.db === ':memory:') return new MemoryExportPositions();
  if (isPostgresUrl(config.db)) throw new Error('--otel-genai-export with a PostgreSQL store needs --otel-genai-positions FILE (where this server keeps how far it exported)');
  return new FileExportPositions(`${config.db}.otel-genai-positions`);
}

/** Starts Palimpsest (store, app, gRPC server); resolves once it is listening. */
export async function startServer(partial: Partial<ServerConfig> = {}, ext: ServerExtensions = {}): Promise<RunningServer> {
  const config = resolveConfig(partial);
  const logger = serverLogger(config);
  // OpenTelemetry: off unless OTEL_* asks for it (or a test passes a provider); loaded only then.
  const tracing = ext.tracing ?? await loadTracing(process.env, ext.tracerProvider);
  const positions = config.otelGenaiExport ? otelGenaiPositions(config) : undefined;
  let live: LiveGenAiExporter | undefined;
  let observeCompactions: ((batch: CommittedBatch) => void) | undefined;
  // The export runs outside the span of the RPC whose commit triggered it (its store reads are
  // not that RPC's children); the API is loaded only with the export on.
  const otel = positions === undefined ? undefined : await import('@opentelemetry/api');
  const tapped = positions !== undefined || Boolean(config.metricsListen);
  const app = await composeApp(config, logger, tracing, !tapped ? undefined : (b) => {
    if (live !== undefined && otel !== undefined) otel.context.with(otel.ROOT_CONTEXT, () => live?.onCommit(b));
    observeCompactions?.(b);
  });
  try {
    if (positions !== undefined) {
      // Started before the server listens: no commit can slip between the catch-up scan and the tap.
      live = new LiveGenAiExporter(app.store, await otlpSpanSink(process.env, VERSION), positions, { content: config.otelGenaiContent === true, logger });
      await live.start();
    }
    // The server only shows `db` in its start-up log: never a database password.
    const running = await serveApp(app, isPostgresUrl(config.db) ? { ...config, db: redactUrl(config.db) } : config, logger, { ...ext, tracing });
    if (config.metricsListen) {
      // Compaction/prune metrics from the committed batches; sessions per tenant from the store at each scrape.
      const metrics = running.metrics;
      observeCompactions = (b) => {
        for (const o of compactionObservations(b)) metrics.compacted(o.kind, o.shadowedEvents, o.tokensSaved);
      };
      const store = app.store;
      metrics.trackTenantSessions(async () => (await store.tenantSessionCounts?.()) ?? new Map());
    }
    const exporter = live;
    if (exporter === undefined) return running;
    return {
      ...running,
      // The live export stops first: it reads the store the server's shutdown closes.
      shutdown: async () => {
        await exporter.close().catch((e: unknown) => logger.warn({ err: e }, 'otel-genai export: close failed'));
        await running.shutdown();
      },
    };
  } catch (e) {
    await live?.close().catch(() => undefined);
    await app.close().catch(() => undefined);
    throw e;
  }
}
