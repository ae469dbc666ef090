/**
 * Server configuration from flags and environment (flags win). Every option has an env var
 * PALIMPSEST_<NAME> (upper snake case of the flag).
 */
import { DEFAULT_LIMITS, type AppLimits } from '../app/session-service.js';

/** Everything `startServer` needs. */
export interface ServerConfig {
  /** gRPC listen address host:port (port 0 = any free port). */
  readonly listen: string;
  /** SQLite database path, or ':memory:' for the in-memory store. */
  readonly db: string;
  /** SQLite durability. */
  readonly durability: 'full' | 'normal';
  /**
   * Who writes SQLite appends: `thread` (a writer thread on its own connection, so inserts,
   * COMMIT and fsync overlap the event loop) or `inline` (the event loop, on the store's one
   * connection). See src/store/sqlite/append-thread.ts.
   */
  readonly sqliteWriter: 'thread' | 'inline';
  /**
   * Refuse a database (SQLite file or PostgreSQL schema) of an older schema version instead of
   * migrating it in place at open (docs/operations.md, "Schema migrations").
   */
  readonly noMigrate?: boolean;
  /** App limits. */
  readonly limits: AppLimits;
  /** Max gRPC message size in bytes (both directions). */
  readonly maxMessageBytes: number;
  /** Max concurrent streams per HTTP/2 connection. */
  readonly maxConcurrentStreams: number;
  /** Default subscription heartbeat interval, ms. */
  readonly heartbeatMs: number;
  /** Max undelivered bytes buffered per subscriber before it is switched back to catch-up. */
  readonly subscriberBufferBytes: number;
  /** pino level. */
  readonly logLevel: string;
  /** Prometheus listen address host:port, or '' to disable. */
  readonly metricsListen: string;
  /** TLS certificate chain file (PEM); '' = plaintext. */
  readonly tlsCert: string;
  /** TLS private key file (PEM). */
  readonly tlsKey: string;
  /** Client CA file (PEM) for mutual TLS; '' = no client certificates. */
  readonly tlsClientCa: string;
  /** Allow plaintext on a non-loopback address. */
  readonly insecure: boolean;
  /** Token file for bearer authentication; '' = auth off. */
  readonly authTokens: string;
  /** Graceful shutdown deadline, ms. */
  readonly shutdownGraceMs: number;
  /**
   * How long a replica started while its PostgreSQL database is unreachable waits for it (with
   * backoff, health NOT_SERVING meanwhile) before it gives up and exits, ms; 0 = fail at once.
   */
  readonly storeWaitMs: number;
  /**
   * Strings of event data of at least this many UTF-8 bytes, and image data, are stored once per
   * tenant as content-addressed blobs (issue #39, docs/blobs.md); 0 = off (blobs stored earlier are still read).
   */
  readonly blobMinBytes: number;
  /** Days after which untouched sessions are deleted (0 = never; the ttl-days label overrides), see src/app/retention.ts. */
  readonly retentionDays: number;
  /** Time between retention sweeps, ms. */
  readonly retentionIntervalMs: number;
  /** Sessions a retention sweep examines per batch. */
  readonly retentionBatch: number;
  /** Days the session feed keeps its records (0 = forever), see src/app/feed-retention.ts; pruned at every retention sweep. */
  readonly feedRetentionDays: number;
  /** Web port (Connect, gRPC-Web, the viewer) host:port, or '' to disable. */
  readonly webListen: string;
  /** Origins the web port allows by CORS ('*' = any); empty = CORS off. */
  readonly webCorsOrigins: readonly string[];
  /** Export each committed turn as OpenTelemetry GenAI spans through the OTLP exporter (issue #41, src/app/otel-genai-live.ts). */
  readonly otelGenaiExport?: boolean;
  /** The live export's positions file (default `<db>.otel-genai-positions`; required for PostgreSQL). */
  readonly otelGenaiPositions?: string;
  /** Record message content in the live export (opt-in attributes). */
  readonly otelGenaiContent?: boolean;
  /**
   * The session feed reads on the store's change hints (PostgreSQL NOTIFY) and polls every 5 s as
   * a safety net (default true); false = poll every 200 ms without hints (no flag: benches
   * compare the two, bench/feed.bench.ts --replicas).
   */
  readonly feedHints?: boolean;
  /** SearchEvents' index (issue #40; default true): false = no index, no follower, SearchEvents answers SEARCH_INDEX_OFF. */
  readonly searchIndex?: boolean;
}


/** Defaults: embedded SQLite file in the working directory, durable appends, loopback. */
export const DEFAULT_CONFIG: ServerConfig = {
  listen: '127.0.0.1:50051',
  db: 'palimpsest.db',
  durability: 'full',
  sqliteWriter: 'thread',
  searchIndex: true,
  limits: DEFAULT_LIMITS,
  maxMessageBytes: 16 * 1024 * 1024,
  maxConcurrentStreams: 1000,
  heartbeatMs: 15_000,
  subscriberBufferBytes: 4 * 1024 * 1024,
  logLevel: 'info',
  metricsListen: '',
  tlsCert: '',
  tlsKey: '',
  tlsClientCa: '',
  insecure: false,
  authTokens: '',
  shutdownGraceMs: 10_000,
  storeWaitMs: 180_000,
  blobMinBytes: 65_536,
  retentionDays: 0,
  retentionIntervalMs: 3_600_000,
  retentionBatch: 100,
  feedRetentionDays: 7,
  webListen: '',
  webCorsOrigins: [],
};
