/**
 * Prometheus metrics (prom-client), served on a separate HTTP port when enabled. prom-client (and
 * the @opentelemetry/api it pulls in) is loaded only when metrics are served: `loadMetrics`;
 * otherwise the server counts into `NO_METRICS` (about a tenth of process start-up, measured).
 */
import { createServer, type Server } from 'node:http';
import type { Counter as CounterT, Gauge as GaugeT, Histogram as HistogramT, Registry as RegistryT } from 'prom-client';

/** A worker thread's V8 heap as the store reports it (the SQLite store's thread-heap.ts). */
export interface ThreadHeapReading {
  readonly thread: string;
  readonly used: number;
  readonly total: number;
  readonly physical: number;
  readonly malloced: number;
  readonly external: number;
  readonly spaces: readonly { readonly name: string; readonly size: number; readonly used: number }[];
}

/** The `grpc_type` label. */
export type RpcType = 'unary' | 'client_stream' | 'server_stream' | 'bidi_stream';

/** What the server records. */
export interface Metrics {
  /** An RPC started (grpc_server_started_total). */
  rpcStarted(service: string, method: string, type: RpcType): void;
  /** An RPC ended with `code` (a go-grpc-prometheus code name) after `seconds`. */
  rpcHandled(service: string, method: string, type: RpcType, code: string, seconds: number): void;
  /** An accepted append. */
  appended(events: number, seconds: number): void;
  /** A rejected append. */
  rejected(reason: string): void;
  /** Open subscription streams. */
  readonly subscriptions: { inc(): void; dec(): void };
  /** Lag of subscribers, in events. */
  readonly subscriptionLag: { observe(value: number): void };
  /** Open SubscribeSessions streams (issue #35). */
  readonly feedSubscribers: { inc(): void; dec(): void };
  /** Seconds from a feed change being recorded to its delivery to a subscriber (live items). */
  readonly feedLag: { observe(value: number): void };
  /** Where palimpsest_cached_sessions is read from at each scrape. */
  trackCachedSessions(source: () => number): void;
  /** Sessions deleted by retention. */
  retentionDeleted(count: number): void;
  /** A compaction or a pruned tool result committed: events it took off the surface, tokens it saved. */
  compacted(kind: 'compact' | 'prune', shadowedEvents: number, tokensSaved: number): void;
  /** Where palimpsest_tenant_sessions is read from at each scrape (sessions per tenant). */
  trackTenantSessions(source: () => Promise<ReadonlyMap<string, number>>): void;
  /** Where palimpsest_search_index_lag_events and _seconds are read from at each scrape. */
  trackSearchLag(source: () => Promise<{ events: number; seconds: number }>): void;
  /** Where palimpsest_heads_record_unsealed is read from at each scrape (1 while the SQLite heads record is unsealed). */
  trackHeadsUnsealed(source: () => boolean): void;
  /** A PostgreSQL statement rolled back for a deadlock (40P01) or a serialization failure (40001) and run again. */
  storeStatementRetried(sqlstate: string): void;
  /** Where palimpsest_thread_heap_* (the worker threads' V8 heaps) are read from at each scrape. */
  trackThreadHeaps(source: () => Promise<readonly ThreadHeapReading[]>): void;
}

/** Metrics that record nothing (metrics not served). */
export const NO_METRICS: Metrics = Object.freeze({
  rpcStarted: () => undefined,
  rpcHandled: () => undefined,
  appended: () => undefined,
  rejected: () => undefined,
  subscriptions: Object.freeze({ inc: () => undefined, dec: () => undefined }),
  subscriptionLag: Object.freeze({ observe: () => undefined }),
  feedSubscribers: Object.freeze({ inc: () => undefined, dec: () => undefined }),
  feedLag: Object.freeze({ observe: () => undefined }),
  trackCachedSessions: () => undefined,
  retentionDeleted: () => undefined,
  compacted: () => undefined,
  trackTenantSessions: () => undefined,
  trackSearchLag: () => undefined,
  trackHeadsUnsealed: () => undefined,
  storeStatementRetried: () => undefined,
  trackThreadHeaps: () => undefined,
});

/** Loads prom-client and creates the Prometheus metrics. */
export async function loadMetrics(defaults = true): Promise<PromMetrics> {
  return new PromMetrics(await import('prom-client'), defaults);
}

/** The service's metrics in a prom-client registry. */
export class PromMetrics implements Metrics {
  readonly registry: RegistryT;
  readonly #appends: CounterT;
  readonly #requests: CounterT;
  readonly #rejections: CounterT<'reason'>;
  readonly #latency: HistogramT;
  readonly #batch: HistogramT;
  #cachedSessionsSource: () => number = () => 0;
  readonly cachedSessions: GaugeT;
  readonly subscriptions: GaugeT;
  readonly subscriptionLag: HistogramT;
  readonly feedSubscribers: GaugeT;
  readonly feedLag: HistogramT;
  readonly #started: CounterT<'grpc_service' | 'grpc_method' | 'grpc_type'>;
  readonly #handled: CounterT<'grpc_service' | 'grpc_method' | 'grpc_type' | 'grpc_code'>;
  readonly #handling: HistogramT<'grpc_service' | 'grpc_method' | 'grpc_type'>;
  readonly #operations: Record<string, CounterT>;
  readonly #retentionDeleted: CounterT;
  readonly #compactions: CounterT<'kind'>;
  readonly #compactionShadowed: HistogramT<'kind'>;
  readonly #compactionSaved: HistogramT<'kind'>;
  #tenantSessionsSource: () => Promise<ReadonlyMap<string, number>> = async () => new Map();
  readonly tenantSessions: GaugeT<'tenant'>;
  #headsUnsealedSource: () => boolean = () => false;
  readonly headsUnsealed: GaugeT;
  #searchLagSource: () => Promise<{ events: number; seconds: number }> = async () => ({ events: 0, seconds: 0 });
  readonly searchLagEvents: GaugeT;
  readonly searchLagSeconds: GaugeT;
  readonly #statementRetries: CounterT<'sqlstate'>;
  #threadHeapsSource: () => Promise<readonly ThreadHeapReading[]> = async () => [];

  constructor(prom: typeof import('prom-client'), defaults = true) {
    const { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } = prom;
    this.registry = new Registry();
    this.#appends = new Counter({ name: 'palimpsest_appended_events_total', help: 'Events appended', registers: [this.registry] });
    this.#requests = new Counter({ name: 'palimpsest_append_requests_total', help: 'Accepted AppendEvents requests', registers: [this.registry] });
    this.#rejections = new Counter({ name: 'palimpsest_append_rejections_total', help: 'Rejected AppendEvents requests by reason', labelNames: ['reason'], registers: [this.registry] });
    this.#latency = new Histogram({
      name: 'palimpsest_append_duration_seconds', help: 'AppendEvents latency (decode to durable commit)',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1], registers: [this.registry],
    });
    this.#batch = new Histogram({ name: 'palimpsest_append_batch_events', help: 'Events per AppendEvents request', buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000], registers: [this.registry] });
    /** Read at scrape time (a timer would report a stale count). */
    this.cachedSessions = new Gauge({
      name: 'palimpsest_cached_sessions', help: 'Hot sessions held in memory', registers: [this.registry],
      collect: (): void => this.cachedSessions.set(this.#cachedSessionsSource()),
    });
    this.subscriptions = new Gauge({ name: 'palimpsest_subscriptions', help: 'Open subscription streams', registers: [this.registry] });
    this.subscriptionLag = new Histogram({
      name: 'palimpsest_subscription_lag_events', help: 'Events between the session head and what a subscriber was sent, sampled at one delivery in 16 per stream',
      buckets: [0, 1, 10, 100, 1000, 10000, 100000], registers: [this.registry],
    });
    this.feedSubscribers = new Gauge({ name: 'palimpsest_feed_subscribers', help: 'Open SubscribeSessions streams (the session feed)', registers: [this.registry] });
    this.feedLag = new Histogram({
      name: 'palimpsest_feed_lag_seconds', help: 'Seconds from a session change being recorded by the store to its delivery on a live SubscribeSessions stream, sampled at one delivery in 16 per stream',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [this.registry],
    });
    this.#retentionDeleted = new Counter({ name: 'palimpsest_retention_deleted_total', help: 'Sessions deleted by retention (--retention-days, the palimpsest.dev/ttl-days label)', registers: [this.registry] });
    this.#compactions = new Counter({ name: 'palimpsest_compactions_total', help: 'Compactions (kind=compact) and pruned tool results (kind=prune) committed', labelNames: ['kind'], registers: [this.registry] });
    this.#compactionShadowed = new Histogram({
      name: 'palimpsest_compaction_shadowed_events', help: 'Events one compaction or pruned result took off the surface', labelNames: ['kind'],
      buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000], registers: [this.registry],
    });
    this.#compactionSaved = new Histogram({
      name: 'palimpsest_compaction_tokens_saved', help: 'Estimated tokens one compaction or pruned result saved (shadowed minus replacement)', labelNames: ['kind'],
      buckets: [0, 100, 1000, 5000, 10000, 50000, 100000, 500000], registers: [this.registry],
    });
    /** Read from the store at scrape time. */
    this.tenantSessions = new Gauge({
      name: 'palimpsest_tenant_sessions', help: 'Sessions per tenant (tenant="" when auth is off)', labelNames: ['tenant'], registers: [this.registry],
      collect: async (): Promise<void> => {
        // A store that cannot answer (PostgreSQL down, a replica still waiting for it) keeps the
        // last values: one failing gauge must not fail the whole scrape.
        let counts: ReadonlyMap<string, number>;
        try {
          counts = await this.#tenantSessionsSource();
        } catch {
          return;
        }
        this.tenantSessions.reset();
        for (const [tenant, n] of counts) this.tenantSessions.set({ tenant }, n);
      },
    });
    this.headsUnsealed = new Gauge({
      name: 'palimpsest_heads_record_unsealed',
      help: '1 while the SQLite heads record (FILE-heads) is unsealed: lost acknowledged commits would go unseen until `palimpsest verify --db FILE --reseal-heads`; 0 otherwise',
      registers: [this.registry],
      collect: (): void => this.headsUnsealed.set(this.#headsUnsealedSource() ? 1 : 0),
    });
    // The search index's follower (issue #40), read from the store at scrape time (once for both
    // gauges: a reading is shared for a second); a store that cannot answer keeps the last values.
    let reading: { at: number; lag: Promise<{ events: number; seconds: number }> } | undefined;
    const searchLag = (pick: 'events' | 'seconds', gauge: () => GaugeT) => async (): Promise<void> => {
      const now = Date.now();
      if (reading === undefined || now - reading.at > 1000) reading = { at: now, lag: this.#searchLagSource() };
      try {
        gauge().set((await reading.lag)[pick]);
      } catch {
        // kept
      }
    };
    this.searchLagEvents = new Gauge({
      name: 'palimpsest_search_index_lag_events', help: 'Events appended but not yet indexed for SearchEvents (the index follower is behind by this many)',
      registers: [this.registry], collect: searchLag('events', () => this.searchLagEvents),
    });
    this.searchLagSeconds = new Gauge({
      name: 'palimpsest_search_index_lag_seconds', help: 'Age in seconds of the oldest change the search index has not followed yet; 0 when caught up',
      registers: [this.registry], collect: searchLag('seconds', () => this.searchLagSeconds),
    });
    this.#statementRetries = new Counter({
      name: 'palimpsest_store_statement_retries_total',
      help: 'PostgreSQL statements rolled back for a deadlock (sqlstate 40P01) or a serialization failure (40001) and run again; the lock order should keep it at 0',
      labelNames: ['sqlstate'], registers: [this.registry],
    });
    this.#threadHeapGauges(Gauge);
    // The go-grpc-prometheus names and labels, so stock gRPC dashboards work unchanged.
    const rpcLabels = ['grpc_service', 'grpc_method', 'grpc_type'] as const;
    this.#started = new Counter({ name: 'grpc_server_started_total', help: 'RPCs started on the server', labelNames: rpcLabels, registers: [this.registry] });
    this.#handled = new Counter({ name: 'grpc_server_handled_total', help: 'RPCs completed on the server, by code', labelNames: [...rpcLabels, 'grpc_code'], registers: [this.registry] });
    this.#handling = new Histogram({
      name: 'grpc_server_handling_seconds', help: 'Time from the start of an RPC to its status', labelNames: rpcLabels,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [this.registry],
    });
    const op = (name: string, help: string) => new Counter({ name, help, registers: [this.registry] });
    this.#operations = {
      ImportSession: op('palimpsest_imports_total', 'Sessions imported'),
      ForkSession: op('palimpsest_forks_total', 'Sessions forked'),
      RepairSession: op('palimpsest_repairs_total', 'RepairSession calls that succeeded'),
    };
    // Node's default metrics under their stock names (process_*, nodejs_*): what Node dashboards expect.
    if (defaults) collectDefaultMetrics({ register: this.registry });
  }

  /**
   * The worker threads' V8 heaps (the main thread's are nodejs_heap_*), read once per scrape for
   * all the gauges of a scrape, by `thread` (threads of one name summed) and, for the spaces, `space`.
   */
  #threadHeapGauges(Gauge: typeof import('prom-client').Gauge): void {
    // One reading while it is under way: the registry starts every gauge's collect in one turn.
    let reading: Promise<readonly ThreadHeapReading[]> | undefined;
    const read = (): Promise<readonly ThreadHeapReading[]> => {
      reading ??= this.#threadHeapsSource().catch(() => []).finally(() => {
        reading = undefined;
      });
      return reading;
    };
    const perThread = (name: string, help: string, pick: (h: ThreadHeapReading) => number): void => {
      const gauge: GaugeT<'thread'> = new Gauge({
        name, help, labelNames: ['thread'], registers: [this.registry],
        collect: async (): Promise<void> => {
          const sums = new Map<string, number>();
          for (const h of await read()) sums.set(h.thread, (sums.get(h.thread) ?? 0) + pick(h));
          gauge.reset();
          for (const [thread, v] of sums) gauge.set({ thread }, v);
        },
      });
    };
    perThread('palimpsest_thread_heap_used_bytes', 'V8 heap used by a worker thread (thread="writer": the SQLite writer thread; "search-follower": the search index follower)', (h) => h.used);
    perThread('palimpsest_thread_heap_total_bytes', 'V8 heap size of a worker thread (what its isolate has allocated for its heap)', (h) => h.total);
    perThread('palimpsest_thread_heap_physical_bytes', 'Resident bytes of a worker thread\'s V8 heap', (h) => h.physical);
    perThread('palimpsest_thread_heap_malloced_bytes', 'Bytes a worker thread\'s V8 isolate holds with malloc', (h) => h.malloced);
    perThread('palimpsest_thread_heap_external_bytes', 'Memory outside a worker thread\'s V8 heap held by its objects (ArrayBuffers, strings)', (h) => h.external);
    const perSpace = (name: string, help: string, pick: (s: ThreadHeapReading['spaces'][number]) => number): void => {
      const gauge: GaugeT<'thread' | 'space'> = new Gauge({
        name, help, labelNames: ['thread', 'space'], registers: [this.registry],
        collect: async (): Promise<void> => {
          const sums = new Map<string, { thread: string; space: string; v: number }>();
          for (const h of await read()) {
            for (const s of h.spaces) {
              const k = `${h.thread}\0${s.name}`;
              sums.set(k, { thread: h.thread, space: s.name, v: (sums.get(k)?.v ?? 0) + pick(s) });
            }
          }
          gauge.reset();
          for (const { thread, space, v } of sums.values()) gauge.set({ thread, space }, v);
        },
      });
    };
    perSpace('palimpsest_thread_heap_space_size_bytes', 'Size of one V8 heap space (new_space, old_space, ...) of a worker thread', (s) => s.size);
    perSpace('palimpsest_thread_heap_space_used_bytes', 'Bytes used in one V8 heap space of a worker thread', (s) => s.used);
  }

  /** Where palimpsest_thread_heap_* are read from at each scrape. */
  trackThreadHeaps(source: () => Promise<readonly ThreadHeapReading[]>): void {
    this.#threadHeapsSource = source;
  }

  /** Where palimpsest_cached_sessions is read from at each scrape. */
  trackCachedSessions(source: () => number): void {
    this.#cachedSessionsSource = source;
  }

  /** An RPC started. */
  rpcStarted(service: string, method: string, type: RpcType): void {
    this.#started.inc({ grpc_service: service, grpc_method: method, grpc_type: type });
  }

  /** An RPC ended. */
  rpcHandled(service: string, method: string, type: RpcType, code: string, seconds: number): void {
    const labels = { grpc_service: service, grpc_method: method, grpc_type: type };
    this.#handled.inc({ ...labels, grpc_code: code });
    this.#handling.observe(labels, seconds);
    if (code === 'OK') this.#operations[method]?.inc();
  }

  /** An accepted append. */
  appended(events: number, seconds: number): void {
    this.#appends.inc(events);
    this.#requests.inc();
    this.#latency.observe(seconds);
    this.#batch.observe(events);
  }

  /** Sessions deleted by retention. */
  retentionDeleted(count: number): void {
    this.#retentionDeleted.inc(count);
  }

  /** A compaction or a pruned tool result committed. */
  compacted(kind: 'compact' | 'prune', shadowedEvents: number, tokensSaved: number): void {
    this.#compactions.inc({ kind });
    this.#compactionShadowed.observe({ kind }, shadowedEvents);
    this.#compactionSaved.observe({ kind }, tokensSaved);
  }

  /** Where palimpsest_tenant_sessions is read from at each scrape. */
  trackTenantSessions(source: () => Promise<ReadonlyMap<string, number>>): void {
    this.#tenantSessionsSource = source;
  }

  /** Where palimpsest_heads_record_unsealed is read from at each scrape. */
  storeStatementRetried(sqlstate: string): void {
    this.#statementRetries.inc({ sqlstate });
  }

  trackHeadsUnsealed(source: () => boolean): void {
    this.#headsUnsealedSource = source;
  }

  /** Where palimpsest_search_index_lag_events and _seconds are read from at each scrape. */
  trackSearchLag(source: () => Promise<{ events: number; seconds: number }>): void {
    this.#searchLagSource = source;
  }

  /** A rejected append. */
  rejected(reason: string): void {
    this.#rejections.inc({ reason });
  }

  /** Serves /metrics on host:port; resolves with the bound port. */
  async serve(host: string, port: number): Promise<{ server: Server; port: number }> {
    const server = createServer((req, res) => {
      if (req.url !== '/metrics') {
        res.writeHead(404).end();
        return;
      }
      this.registry.metrics().then((text) => {
        res.writeHead(200, { 'content-type': this.registry.contentType }).end(text);
      }, () => res.writeHead(500).end());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    const addr = server.address();
    return { server, port: typeof addr === 'object' && addr ? addr.port : port };
  }
}
