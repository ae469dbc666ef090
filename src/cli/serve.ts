/**
 * `palimpsest serve`: the composition root. Flags override PALIMPSEST_* environment variables,
 * which override the defaults.
 */
import { DEFAULT_CONFIG, type ServerConfig } from '../server/config.js';
import type { AppLimits } from '../app/session-service.js';
import { UsageError } from './args.js';

export { UsageError };

/** A server option: flag name, env var, parser, where it goes. */
interface Option {
  readonly flag: string;
  readonly help: string;
  readonly apply: (cfg: MutableConfig, value: string) => void;
  readonly boolean?: boolean;
}

type MutableLimits = { -readonly [K in keyof AppLimits]: AppLimits[K] };
type MutableConfig = Omit<{ -readonly [K in keyof ServerConfig]: ServerConfig[K] }, "limits"> & { limits: MutableLimits };

function int(name: string, v: string, min = 0): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return n;
}

/** pino's levels. */
const LOG_LEVELS: readonly string[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** Every `serve` option. */
export const SERVE_OPTIONS: readonly Option[] = [
  { flag: 'listen', help: 'gRPC listen address HOST:PORT (default 127.0.0.1:50051)', apply: (c, v) => { c.listen = v; } },
  { flag: 'db', help: "SQLite database file (default ./palimpsest.db; ':memory:' = in-memory store), or a postgresql://USER@HOST:PORT/DBNAME URL for the shared PostgreSQL store (PG* env vars and sslmode apply)", apply: (c, v) => { c.db = v; } },
  {
    flag: 'durability', help: 'full (default: every acknowledged append survives power loss) or normal', apply: (c, v) => {
      if (v !== 'full' && v !== 'normal') throw new UsageError(`--durability must be full or normal, got ${JSON.stringify(v)}`);
      c.durability = v;
    },
  },
  {
    flag: 'sqlite-writer', help: 'thread (default: SQLite appends are written by a writer thread, off the event loop) or inline', apply: (c, v) => {
      if (v !== 'thread' && v !== 'inline') throw new UsageError(`--sqlite-writer must be thread or inline, got ${JSON.stringify(v)}`);
      c.sqliteWriter = v;
    },
  },
  { flag: 'max-message-bytes', help: 'max gRPC message size (default 16 MiB)', apply: (c, v) => { c.maxMessageBytes = int('max-message-bytes', v, 1024); } },
  { flag: 'max-batch-events', help: 'max events per AppendEvents (default 1000)', apply: (c, v) => { c.limits.maxBatchEvents = int('max-batch-events', v, 1); } },
  {
    flag: 'blob-min-bytes', help: 'store strings of event data of at least N bytes, and image data, once per tenant as blobs (default 65536; 0 = off), see docs/blobs.md',
    apply: (c, v) => { c.blobMinBytes = int('blob-min-bytes', v); },
  },
  { flag: 'max-event-bytes', help: "max bytes of one event's data (default 4 MiB)", apply: (c, v) => { c.limits.maxEventBytes = int('max-event-bytes', v, 1); } },
  { flag: 'max-page-size', help: 'max page size of list RPCs (default 1000)', apply: (c, v) => { c.limits.maxPageSize = int('max-page-size', v, 1); } },
  { flag: 'cache-sessions', help: 'hot sessions kept in memory (default 10000)', apply: (c, v) => { c.limits.cacheMaxSessions = int('cache-sessions', v, 1); } },
  { flag: 'cache-events', help: 'total events of hot sessions kept in memory (default 20000000)', apply: (c, v) => { c.limits.cacheMaxEvents = int('cache-events', v, 1); } },
  { flag: 'tenant-max-sessions', help: 'per-tenant session quota (0 = unlimited)', apply: (c, v) => { c.limits.tenantMaxSessions = int('tenant-max-sessions', v); } },
  { flag: 'tenant-max-bytes', help: 'per-tenant stored-bytes quota (0 = unlimited)', apply: (c, v) => { c.limits.tenantMaxBytes = int('tenant-max-bytes', v); } },
  { flag: 'max-concurrent-streams', help: 'max concurrent streams per connection (default 1000)', apply: (c, v) => { c.maxConcurrentStreams = int('max-concurrent-streams', v, 1); } },
  { flag: 'heartbeat-ms', help: 'default subscription heartbeat interval (default 15000)', apply: (c, v) => { c.heartbeatMs = int('heartbeat-ms', v, 100); } },
  { flag: 'subscriber-buffer-bytes', help: 'bytes buffered per slow subscriber before it falls back to catch-up (default 4 MiB)', apply: (c, v) => { c.subscriberBufferBytes = int('subscriber-buffer-bytes', v, 1024); } },
  {
    flag: 'log-level', help: `${LOG_LEVELS.join('|')} (default info)`, apply: (c, v) => {
      if (!LOG_LEVELS.includes(v)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(v)}`);
      c.logLevel = v;
    },
  },
  { flag: 'metrics-listen', help: 'serve Prometheus /metrics on HOST:PORT (default off)', apply: (c, v) => { c.metricsListen = v; } },
  { flag: 'tls-cert', help: 'TLS certificate chain (PEM file)', apply: (c, v) => { c.tlsCert = v; } },
  { flag: 'tls-key', help: 'TLS private key (PEM file)', apply: (c, v) => { c.tlsKey = v; } },
  { flag: 'tls-client-ca', help: 'require client certificates signed by this CA (PEM file): mutual TLS', apply: (c, v) => { c.tlsClientCa = v; } },
  {
    flag: 'no-migrate', help: 'refuse a database of an older schema version instead of migrating it in place (docs/operations.md, Schema migrations)',
    boolean: true, apply: (c, v) => { c.noMigrate = v !== 'false' && v !== '0'; },
  },
  { flag: 'insecure', help: 'allow plaintext on a non-loopback address', boolean: true, apply: (c, v) => { c.insecure = v !== 'false' && v !== '0'; } },
  { flag: 'auth-tokens', help: 'bearer-token file (JSON; see docs/operations.md, Security); reloaded on SIGHUP', apply: (c, v) => { c.authTokens = v; } },
  { flag: 'retention-days', help: `delete sessions untouched for N days (0 = never, default; the ${"'palimpsest.dev/ttl-days'"} label sets a session's own)`, apply: (c, v) => { c.retentionDays = int('retention-days', v); } },
  { flag: 'retention-interval-ms', help: 'time between retention sweeps (default 3600000)', apply: (c, v) => { c.retentionIntervalMs = int('retention-interval-ms', v, 10); } },
  { flag: 'retention-batch', help: 'sessions a retention sweep examines per batch (default 100)', apply: (c, v) => { c.retentionBatch = int('retention-batch', v, 1); } },
  { flag: 'feed-retention-days', help: 'days the session feed (SubscribeSessions) keeps its records; older ones are pruned at each retention sweep (0 = keep forever; default 7)', apply: (c, v) => { c.feedRetentionDays = int('feed-retention-days', v); } },
  { flag: 'web-listen', help: 'serve Connect, gRPC-Web and the session viewer on HOST:PORT (default off)', apply: (c, v) => { c.webListen = v; } },
  {
    flag: 'web-cors-origins', help: 'comma-separated origins allowed to call the web port from a browser (* = any; default none)',
    apply: (c, v) => { c.webCorsOrigins = v.split(',').map((o) => o.trim()).filter((o) => o !== ''); },
  },
  { flag: 'otel-genai-export', help: 'export each committed turn as OpenTelemetry GenAI spans (semconv 1.41.0) through the OTLP exporter (OTEL_EXPORTER_OTLP_*), at least once; see docs/otel-genai.md', boolean: true, apply: (c, v) => { c.otelGenaiExport = v !== 'false' && v !== '0'; } },
  { flag: 'otel-genai-positions', help: "the live export's positions file (default <db>.otel-genai-positions; required with a PostgreSQL store)", apply: (c, v) => { c.otelGenaiPositions = v; } },
  { flag: 'otel-genai-content', help: 'with --otel-genai-export: record message content, tool arguments and results (opt-in; may hold sensitive data)', boolean: true, apply: (c, v) => { c.otelGenaiContent = v !== 'false' && v !== '0'; } },
  {
    flag: 'search-index', help: 'on (default: SearchEvents over an index kept by a follower of the session feed) or off (no index and no follower; SearchEvents answers FAILED_PRECONDITION), see docs/search.md',
    apply: (c, v) => {
      if (v !== 'on' && v !== 'off') throw new UsageError(`--search-index must be on or off, got ${JSON.stringify(v)}`);
      c.searchIndex = v === 'on';
    },
  },
  { flag: 'shutdown-grace-ms', help: 'graceful shutdown deadline (default 10000)', apply: (c, v) => { c.shutdownGraceMs = int('shutdown-grace-ms', v); } },
  {
    flag: 'store-wait-ms', help: 'PostgreSQL: how long a replica started while the database is unreachable waits for it, with backoff and health NOT_SERVING, before exiting (default 180000; 0 = exit at once)',
    apply: (c, v) => { c.storeWaitMs = int('store-wait-ms', v); },
  },
];

/** Builds the server config from argv (after `serve`) and the environment. */
export function parseServeArgs(argv: readonly string[], env: NodeJS.ProcessEnv): ServerConfig {
  const cfg: MutableConfig = { ...DEFAULT_CONFIG, limits: { ...DEFAULT_CONFIG.limits } };
  for (const o of SERVE_OPTIONS) {
    const name = `PALIMPSEST_${o.flag.toUpperCase().replace(/-/g, '_')}`;
    const v = env[name];
    if (v === undefined || v === '') continue;
    try {
      o.apply(cfg, v);
    } catch (e) {
      // Name where the bad value came from: the variable, not a flag the user never typed.
      if (e instanceof UsageError) throw new UsageError(e.message.replace(`--${o.flag}`, `${name} (the environment variable for --${o.flag})`));
      throw e;
    }
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    const o = SERVE_OPTIONS.find((x) => x.flag === name);
    if (!o) throw new UsageError(`unknown option --${name}`);
    let value: string;
    if (eq >= 0) value = arg.slice(eq + 1);
    else if (o.boolean) value = 'true';
    else {
      const next = argv[++i];
      if (next === undefined) throw new UsageError(`--${name} needs a value`);
      value = next;
    }
    o.apply(cfg, value);
  }
  return cfg;
}
