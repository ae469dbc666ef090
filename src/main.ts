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
import { SearchIndexOff, SearchIndexUnavailable } from './app/search-index-off.js';
import { SqliteSearchIndex } from './store/sqlite/search.js';
import { threadHeaps } from './store/sqlite/thread-heap.js';
import { isPostgresUrl, redactUrl } from './store/postgres/url.js';
import type { CommittedBatch } from './app/change-feed.js';
import { LiveGenAiExporter, TappedChangeFeed, type ExportPositions } from './app/otel-genai-live.js';
import { otlpSpanSink } from './app/otel-genai-otlp-sink.js';
import { FileExportPositions, MemoryExportPositions } from './store/otel-genai-positions.js';
import { VERSION } from './cli/version.js';
import { compactionObservations } from './app/compaction-metrics.js';
import { isUnavailable } from './store/postgres/pg-errors.js';
import { DeferredStore } from './store/deferred-store.js';
import { BlobbingStore } from './app/blobbing-store.js';
import { HealthState } from './server/health.js';
import type { MigrationOptions, MigrationReport } from './store/migration-options.js';

export type { RunningServer, ServerExtensions };

/** A started server; `storeReady` settles once its store is open (rejects when the wait for PostgreSQL ran out; the server is then shut down). */
export type StartedServer = RunningServer & { readonly storeReady: Promise<void> };

/** Backoff between attempts to reach PostgreSQL at start-up: doubling from the first, capped. */
const STORE_WAIT_FIRST_MS = 250;
const STORE_WAIT_MAX_MS = 5_000;

/** True when a store open failed only because the database cannot be reached (worth waiting for). */
function unreachable(e: unknown): boolean {
  return e instanceof Error && (isUnavailable(e) || isUnavailable(e.cause));
}

/**
 * Keeps opening the PostgreSQL store with backoff until it opens (then hands it to `deferred`
 * and marks the server serving) or `deadline` passes or it fails for another reason (rejects).
 */
async function waitForStore(config: ServerConfig, logger: Logger, deferred: DeferredStore, health: HealthState, deadline: number): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const delay = Math.min(STORE_WAIT_MAX_MS, STORE_WAIT_FIRST_MS * 2 ** Math.min(attempt - 1, 10)) * (0.75 + Math.random() / 2);
    if (Date.now() + delay > deadline) {
      throw new Error(`the PostgreSQL database ${redactUrl(config.db)} was not reachable within --store-wait-ms ${config.storeWaitMs} ms; giving up`);
    }
    await new Promise((r) => setTimeout(r, delay).unref());
    if (deferred.closed) return;
    let store: SessionStore;
    try {
      store = await openStore(config, logger);
    } catch (e) {
      if (!unreachable(e)) throw e;
      logger.warn({ attempt, err: (e as Error).message }, 'PostgreSQL not reachable yet; still waiting (health NOT_SERVING)');
      continue;
    }
    if (deferred.closed) {
      await store.close();
      return;
    }
    deferred.open(store);
    health.setServing();
    logger.info({ attempt }, 'PostgreSQL reachable: serving');
    return;
  }
}

/** Counts a PostgreSQL statement retry in the served metrics (set once metrics are served). */
let statementRetried: ((sqlstate: string) => void) | undefined;

/**
 * Opens the configured store: a `postgresql://` / `postgres://` URL selects the shared PostgreSQL
 * store (the driver is loaded only then), anything else is a SQLite file or `:memory:`.
 */
export async function openStore(config: ServerConfig, logger?: Logger): Promise<SessionStore> {
  if (config.db === ':memory:') return new MemorySessionStore();
  const migration = migrationOptions(config, logger);
  if (isPostgresUrl(config.db)) {
    const { PostgresSessionStore } = await import('./store/postgres/postgres-store.js');
    return PostgresSessionStore.open({ url: config.db, ...migration, onError: (error) => logger?.warn({ err: error }, 'PostgreSQL connection problem'),
      onStatementRetry: (retry) => {
        logger?.warn(retry, 'PostgreSQL statement rolled back (deadlock or serialization failure) and run again');
        statementRetried?.(retry.sqlstate);
      } });
  }
  return new SqliteSessionStore({ path: config.db, durability: config.durability, appendWriter: config.sqliteWriter, ...migration });
}

/** In-place schema migration at open (docs/operations.md, "Schema migrations"): --no-migrate, the build recorded, the log line. */
function migrationOptions(config: ServerConfig, logger?: Logger): MigrationOptions {
  return {
    noMigrate: config.noMigrate === true,
    build: VERSION,
    onMigrated: (r: MigrationReport) => logger?.warn({ schemaFrom: r.from, schemaTo: r.to, backup: r.backup, ms: r.ms },
      r.backup === undefined
        ? `migrated the database schema in place from version ${r.from} to ${r.to}`
        : `migrated the database schema in place from version ${r.from} to ${r.to}; the file as it was is backed up at ${r.backup}`),
    onWaiting: (message: string) => logger?.warn({}, message),
  };
}

/** The app over the configured store, with the store-driven change feed. */
export async function composeApp(config: ServerConfig, logger: Logger, tracing?: Tracing, tap?: (batch: CommittedBatch) => void, given?: SessionStore, health?: HealthState): Promise<SessionService> {
  const opened = given ?? await openStore(config, logger);
  // A store's own start-up work and report (the SQLite writer thread, sessions refused at open).
  await opened.start?.(logger);
  // Health `palimpsest.heads-record` answers NOT_SERVING while the SQLite heads record is unsealed (server.ts: and the gauge).
  if (opened instanceof SqliteSessionStore) health?.setHeadsUnsealed(opened.headsUnsealed);
  // Large values are stored once per tenant as blobs (issue #39); reads get the bytes back.
  const blobbing = new BlobbingStore(opened, config.blobMinBytes);
  // Storage failures are logged once per episode (not per request) by the monitor.
  const monitored = monitorStorage(blobbing, logger);
  // With tracing on, every store call is a span inside its RPC's span.
  const store = tracing ? tracing.traceStore(monitored) : monitored;
  // Subscribers hear this process's commits at once and other processes' through the store.
  // A tap (the live GenAI export) hears every batch this process commits, whatever session.
  const watch = store.openHeadWatch();
  const feed = new StoreChangeFeed(watch);
  // The session feed reads on the store's change hints (PostgreSQL NOTIFY) where it has them, else polls.
  const notifications = watch.watchFeed === undefined || config.feedHints === false ? undefined : (onChange: (tenant?: string) => void): (() => void) => watch.watchFeed!(onChange);
  const service = new SessionService(store, config.limits, Date.now, logger, undefined, tap === undefined ? feed : new TappedChangeFeed(feed, tap), { notifications });
  // Sessions deleted through another replica leave the hot-session cache at once (issue #33).
  watch.watchDeletes?.((key) => service.cache.deletedElsewhere(key));
  // SearchEvents (issue #40): the store's index; the memory store keeps the app's scan.
  // The index is kept by a follower of the session feed (started by useIndex; docs/search.md).
  if (config.searchIndex === false) service.search.useIndex(new SearchIndexOff());
  else if (opened instanceof SqliteSessionStore) {
    let index: SqliteSearchIndex;
    try {
      index = new SqliteSearchIndex(config.db);
    } catch (e) {
      // Not fatal: the server runs without search (SEARCH_INDEX_UNAVAILABLE), the file left as it is.
      logger.error({ err: e }, 'search index unavailable: SearchEvents answers FAILED_PRECONDITION SEARCH_INDEX_UNAVAILABLE until a restart opens it');
      service.search.useIndex(new SearchIndexUnavailable((e as Error).message));
      return service;
    }
    // The index file (<db>-search) is derived: missing or damaged, it is built again from the events, online.
    if (index.opened.state === 'rebuilt') logger.warn({ reason: index.opened.reason }, 'the search index file was damaged: created again and built from the events (searches answer from what is built so far)');
    else if (index.opened.state === 'created') logger.info('search index file created: the follower builds it from the events');
    service.search.useIndex(index, { onError: (error) => logger.warn({ err: error }, 'search index follower failed a batch; retrying') });
  } else if (isPostgresUrl(config.db)) {
    const { PostgresSearchIndex } = await import('./store/postgres/search.js');
    service.search.useIndex(new PostgresSearchIndex({ url: config.db, onError: (error) => logger.warn({ err: error }, 'PostgreSQL connection problem (search)') }),
      { onError: (error) => logger.warn({ err: error }, 'search index follower failed a batch; retrying') });
  }
  return service;
}

/** The positions of the live GenAI export: a file next to a SQLite database, memory for `:memory:`. */
export function otelGenaiPositions(config: ServerConfig): ExportPositions {
  if (config.otelGenaiPositions) return new FileExportPositions(config.otelGenaiPositions);
  if (config.db === ':memory:') return new MemoryExportPositions();
  if (isPostgresUrl(config.db)) throw new Error('--otel-genai-export with a PostgreSQL store needs --otel-genai-positions FILE (where this server keeps how far it exported)');
  return new FileExportPositions(`${config.db}.otel-genai-positions`);
}

/**
 * Starts Palimpsest (store, app, gRPC server); resolves once it is listening. A PostgreSQL
 * database that cannot be reached at start is waited for (issue #33 item 3): the server listens at
 * once, answers UNAVAILABLE / STORE_UNAVAILABLE and health NOT_SERVING, and keeps trying with
 * backoff for `storeWaitMs`; `storeReady` rejects (and the server shuts down) if it never comes.
 */
export async function startServer(partial: Partial<ServerConfig> = {}, ext: ServerExtensions = {}): Promise<StartedServer> {
  const config = resolveConfig(partial);
  const logger = serverLogger(config);
  // OpenTelemetry: off unless OTEL_* asks for it (or a test passes a provider); loaded only then.
  const tracing = ext.tracing ?? await loadTracing(process.env, ext.tracerProvider);
  let store: SessionStore | undefined;
  let waiting: { deferred: DeferredStore; health: HealthState } | undefined;
  if (isPostgresUrl(config.db) && config.storeWaitMs > 0) {
    try {
      store = await openStore(config, logger);
    } catch (e) {
      if (!unreachable(e)) throw e;
      logger.warn({ err: (e as Error).message, storeWaitMs: config.storeWaitMs }, 'PostgreSQL not reachable at start: serving NOT_SERVING and waiting for it');
      const deferred = new DeferredStore(
        `the PostgreSQL database is not reachable yet (this replica started while it was down and waits for it up to --store-wait-ms ${config.storeWaitMs} ms); retry later or on another replica`);
      waiting = { deferred, health: new HealthState(false) };
      store = deferred;
    }
  }
  const health = waiting?.health ?? ext.health ?? new HealthState();
  let running: RunningServer;
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
  }, store, health);
  try {
    if (positions !== undefined) {
      // Started before the server listens: no commit can slip between the catch-up scan and the tap.
      live = new LiveGenAiExporter(app.store, await otlpSpanSink(process.env, VERSION), positions, { content: config.otelGenaiContent === true, logger });
      // A replica waiting for PostgreSQL starts it once the store opens (nothing commits before).
      if (waiting === undefined) await live.start();
    }
    // The server only shows `db` in its start-up log: never a database password.
    const served = await serveApp(app, isPostgresUrl(config.db) ? { ...config, db: redactUrl(config.db) } : config, logger, { ...ext, tracing, health });
    if (config.metricsListen) {
      // Compaction/prune metrics from the committed batches; sessions per tenant from the store at each scrape.
      const metrics = served.metrics;
      observeCompactions = (b) => {
        for (const o of compactionObservations(b)) metrics.compacted(o.kind, o.shadowedEvents, o.tokensSaved);
      };
      const appStore = app.store;
      statementRetried = (sqlstate) => metrics.storeStatementRetried(sqlstate);
      metrics.trackTenantSessions(async () => (await appStore.tenantSessionCounts?.()) ?? new Map());
      metrics.trackSearchLag(() => app.search.lag());
      // The SQLite store's worker threads (none on PostgreSQL or in memory: no gauge values).
      metrics.trackThreadHeaps(() => threadHeaps());
    }
    const exporter = live;
    running = exporter === undefined ? served : {
      ...served,
      // The live export stops first: it reads the store the server's shutdown closes.
      shutdown: async () => {
        await exporter.close().catch((e: unknown) => logger.warn({ err: e }, 'otel-genai export: close failed'));
        await served.shutdown();
      },
    };
  } catch (e) {
    await live?.close().catch(() => undefined);
    await app.close().catch(() => undefined);
    throw e;
  }
  let storeReady = Promise.resolve();
  if (waiting !== undefined) {
    const exporter = live;
    storeReady = waitForStore(config, logger, waiting.deferred, waiting.health, Date.now() + config.storeWaitMs).then(async () => {
      await exporter?.start();
    }).catch(async (e: unknown) => {
      logger.error({ err: (e as Error).message }, 'the store did not open (or the live GenAI export could not start on it): shutting down');
      await running.shutdown();
      throw e;
    });
    // Observed here so that a caller that never awaits it does not crash the process.
    storeReady.catch(() => undefined);
  }
  return Object.assign(running, { storeReady });
}
