/**
 * The PostgreSQL implementation of the store port: any number of server replicas over one
 * database behave as one store (node-postgres `pg`: a bounded pool plus one LISTEN connection).
 *
 * Appends are conditional writes, not a tail of a global sequence. Each write is one call of a SQL
 * function (schema.ts), one statement and so one implicit transaction: it locks the session row
 * (SELECT ... FOR UPDATE), checks the head and the writer token the plan was made against, checks
 * the idempotency key and the tenant quota, inserts the events under the unique (session_id, seq)
 * key and updates head, writer and counters, and commits all of it or nothing. A writer that lost
 * the race gets a conflict and re-plans on fresh state; a replica killed mid-call leaves nothing:
 * PostgreSQL rolls back the open transaction and releases its locks when the connection dies.
 * One instance sends its appends of one session in call order, one transaction at a time, and the
 * ones queued meanwhile together in one statement (append_batch: each call still checked), so a
 * pipelined writer costs one commit per group rather than one per batch (see #runLane).
 *
 * Why no global bigserial is tailed (the usual way to build a feed on a table): a bigserial is
 * handed out when a row is inserted, not when its transaction commits, so a reader that tails
 * "id > last seen" skips a row whose transaction commits after a higher id was already read, and
 * never comes back for it. Here readers follow one session by its own contiguous seqs, which only
 * the session-row lock holder can write and which become visible all at once at commit; a gap in
 * what a reader sees is therefore impossible, and NOTIFY (notifier.ts) is only a hint to re-read.
 *
 * Durability: a call resolves only after COMMIT returned, i.e. the transaction is durable as the
 * operator configured `synchronous_commit` (default `on`: flushed to the WAL on disk, and with
 * synchronous standbys, confirmed by them). Under `synchronous_commit = off` an acknowledged append
 * may be lost if the PostgreSQL server crashes within about 3 x wal_writer_delay of the commit
 * (the database stays consistent; the tail of acknowledged appends is gone), which breaks the
 * service's promise that an acknowledged append is kept: leave it on.
 */
import pg from 'pg';
import type {
  FeedChangeKind,
  FeedQuery,
  FeedRecord,
  PublishMetadata,
  UpdateLabelsOutcome,
  AppendOutcome,
  AppendRequest,
  CreateOutcome,
  CreateQuota,
  DeleteExpectation,
  HeadWatch,
  IdempotentResult,
  NewSession,
  PendingChunkOptions,
  PendingChunkOutcome,
  ReadEventsQuery,
  SessionPage,
  SessionRecord,
  SessionStore,
  StoredEventText,
  StructuralRow,
  TenantUsage,
} from '../../app/store-port.js';
import { labelsBytesDelta, storedSessionBytes, utf8Length } from '../../app/store-port.js';
import type { Json, SessionEvent, SessionHeader, SurfaceOp } from '../../domain/event.js';
import { checkPageSize, decodePageToken, encodePageToken } from '../page-token.js';
import { StoreClosedError, StoreOpenError, StoreUsageError, checkAscendingSeqs } from '../store-errors.js';
import { decodeSurfaceOp, encodeSurfaceOp } from '../sqlite/codec.js';
import { PgHeadWatch } from './head-watch.js';
import { HeadNotifier } from './notifier.js';
import { describe as describeError, isUnavailable, mapError } from './pg-errors.js';
import { redactUrl } from './url.js';
import { SCHEMA_NAME_PATTERN, TENANT_SHARDS, channelOf } from './schema.js';
import { prepareSchema } from './migrate.js';
import type { MigrationOptions } from '../migration-options.js';

/** Options of {@link PostgresSessionStore.open}. */
export interface PostgresStoreOptions extends MigrationOptions {
  /**
   * `postgresql://` / `postgres://` URL. Missing parts come from the standard PG* environment
   * variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE); TLS from `sslmode`.
   */
  readonly url: string;
  /** PostgreSQL schema holding the tables (default `palimpsest`). */
  readonly schema?: string;
  /** Pool size: connections for queries and writes (default 10). The LISTEN connection is extra. */
  readonly poolSize?: number;
  /** How long a call waits for a pooled connection (or a new one) before UNAVAILABLE, ms (default 5000). */
  readonly connectTimeoutMs?: number;
  /**
   * How long a query may go unanswered before the call fails with UNAVAILABLE, ms (default 30000):
   * a network partition that drops packets without a reset would otherwise hang calls until TCP
   * keepalive notices. A write timed out this way may still have committed (the message says so).
   */
  readonly queryTimeoutMs?: number;
  /** Slow poll of watched heads backing NOTIFY up, ms (default 2000). */
  readonly headPollMs?: number;
  /** Lease sweep period for abandoned pending imports, ms (default 60000; 0 = only at open). */
  readonly sweepIntervalMs?: number;
  /** Clock (default Date.now): idempotency rows, lease expiry. */
  readonly now?: () => number;
  /** Connection problems of the pool's idle clients and the LISTEN connection (for logs). */
  readonly onError?: (error: unknown) => void;
}

/** Counters for tests and metrics. */
export interface PostgresStoreStats {
  /** Write calls committed (creates, appends, chunks, publishes, deletes). */
  readonly commits: number;
  /** `append` calls that appended events. */
  readonly appends: number;
  /** Most appends of one session sent in one transaction so far. */
  readonly maxGroupSize: number;
}

/** int8 as number (every value the store writes is a safe integer) and int8[] as number[]. */
const TYPES = {
  getTypeParser(oid: number, format?: string): (value: string) => unknown {
    if (oid === 20) return Number;
    if (oid === 1016) return parseInt8Array;
    return (pg.types.getTypeParser as (oid: number, format?: string) => (value: string) => unknown)(oid, format);
  },
};

function parseInt8Array(text: string): number[] {
  if (text === '{}') return [];
  return text.slice(1, -1).split(',').map(Number);
}

/** Event columns as the write functions take them (one array per column). */
type EventArrays = [seqs: number[], types: string[], times: number[], data: string[], sources: (string | null)[], ops: (string | null)[], ign: (boolean | null)[]];

function encodeEvents(events: readonly SessionEvent[], dataTexts?: readonly (string | undefined)[]): { arrays: EventArrays; dataBytes: number } {
  const n = events.length;
  const seqs = new Array<number>(n);
  const types = new Array<string>(n);
  const times = new Array<number>(n);
  const data = new Array<string>(n);
  const sources = new Array<string | null>(n);
  const ops = new Array<string | null>(n);
  const ign = new Array<boolean | null>(n);
  let dataBytes = 0;
  for (let i = 0; i < n; i++) {
    const e = events[i]!;
    const text = dataTexts?.[i] ?? JSON.stringify(e.data);
    dataBytes += utf8Length(text);
    seqs[i] = e.seq;
    types[i] = e.type;
    times[i] = e.time;
    data[i] = text;
    sources[i] = e.sourceEventSeqs === undefined ? null : `{${e.sourceEventSeqs.join(',')}}`;
    ops[i] = encodeSurfaceOp(e.surfaceOp);
    ign[i] = e.ignorable === true ? true : null;
  }
  return { arrays: [seqs, types, times, data, sources, ops, ign], dataBytes };
}

const SESSION_COLUMNS =
  'id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, labels, tenant, strict, pairing_guard, next_seq, event_count, data_bytes, writer, metadata_version';
const EVENT_COLUMNS = 'seq, type, time, data, source_event_seqs, surface_op, ignorable';
/** Rows per structural-scan query. */
const STRUCTURE_CHUNK = 10_000;
const FIRST_PAGE_CREATED_AT = Number.MAX_SAFE_INTEGER + 1;

interface RawSession {
  id: string;
  version: number;
  created_at: number;
  cwd: string | null;
  parent_session: string | null;
  seed_length: number | null;
  origin: string | null;
  delegation_depth: number | null;
  agent_preset: string | null;
  labels: Record<string, string>;
  tenant: string;
  strict: boolean;
  pairing_guard: boolean;
  next_seq: number;
  event_count: number;
  data_bytes: number;
  writer: string;
  metadata_version: number;
}

interface RawEvent {
  seq: number;
  type: string;
  time: number;
  data: string;
  source_event_seqs: number[] | null;
  surface_op: string | null;
  ignorable: boolean | null;
}

/** A row of the append function. */
interface AppendRow {
  outcome: string;
  head: number | null;
  r_hash: string | null;
  r_seqs: number[] | null;
  r_surface: number | null;
  q_limit: number | null;
  q_actual: number | null;
}

/** An append waiting in its session's lane. */
interface QueuedAppend {
  readonly values: unknown[];
  /** The byte quota as given (reported back as the limit). */
  readonly maxBytes: number;
  readonly resolve: (outcome: AppendOutcome) => void;
  readonly reject: (error: unknown) => void;
}

/** A session's appends of this store instance, sent in call order. */
interface Lane {
  readonly queue: QueuedAppend[];
  running: boolean;
}

/** Most appends of one session sent in one transaction. */
const MAX_GROUP = 64;

const APPENDED = Object.freeze({ kind: 'appended' as const });
const NOT_FOUND = Object.freeze({ kind: 'not-found' as const });

/** The PostgreSQL implementation of the store port (see the module comment). Open with {@link PostgresSessionStore.open}. */
export class PostgresSessionStore implements SessionStore {
  readonly #pool: pg.Pool;
  readonly #connection: pg.ClientConfig;
  readonly #s: string;
  readonly #channel: string;
  readonly #now: () => number;
  readonly #notifier: HeadNotifier;
  readonly #options: PostgresStoreOptions;
  readonly #watches = new Set<PgHeadWatch>();
  /** Identical reads issued in the current event-loop turn, not sent yet (see #coalesce). */
  readonly #turnReads = new Map<string, Promise<readonly unknown[]>>();
  /** Per-session append queues (see #runLane). */
  readonly #lanes = new Map<string, Lane>();
  #sweepTimer: NodeJS.Timeout | undefined;
  /** close() was called: new calls are refused. */
  #closed = false;
  /** The pool is gone (after close() let every call issued before it finish). */
  #ended = false;
  /** Queries in flight: close() lets them finish before ending the pool. */
  readonly #inFlight = new Set<Promise<unknown>>();
  #counters = { commits: 0, appends: 0, maxGroupSize: 0 };

  private constructor(pool: pg.Pool, connection: pg.ClientConfig, options: PostgresStoreOptions, schema: string) {
    this.#pool = pool;
    this.#connection = connection;
    this.#options = options;
    this.#s = schema;
    this.#channel = channelOf(schema);
    this.#now = options.now ?? Date.now;
    this.#notifier = new HeadNotifier(pool, this.#channel);
  }

  /**
   * Connects, creates the schema on a fresh database, refuses one written by another schema
   * version, and drops pending imports whose lease expired. Throws StoreOpenError.
   */
  static async open(options: PostgresStoreOptions): Promise<PostgresSessionStore> {
    const schema = options.schema ?? 'palimpsest';
    const where = redactUrl(options.url);
    if (!SCHEMA_NAME_PATTERN.test(schema)) {
      throw new StoreOpenError('CANNOT_OPEN', where, `schema name ${JSON.stringify(schema)} must match ${SCHEMA_NAME_PATTERN}`);
    }
    const connection: pg.ClientConfig = {
      connectionString: options.url,
      types: TYPES,
      application_name: 'palimpsest',
      connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
      keepAlive: true,
    };
    const pool = new pg.Pool({ ...connection, max: options.poolSize ?? 10, idleTimeoutMillis: 30_000, query_timeout: options.queryTimeoutMs ?? 30_000 });
    // An idle client whose connection broke emits here; without a listener Node would crash.
    pool.on('error', (error) => options.onError?.(error));
    const store = new PostgresSessionStore(pool, connection, options, schema);
    try {
      await store.#initialise(where);
      await store.sweepExpiredImports();
    } catch (error) {
      await pool.end().catch(() => undefined);
      if (error instanceof StoreOpenError) throw error;
      const why = isUnavailable(error) ? `the database is unreachable (${describeError(error)})` : describeError(error);
      throw new StoreOpenError('CANNOT_OPEN', where, `cannot open PostgreSQL store ${where}: ${why}`, { cause: error });
    }
    const sweep = options.sweepIntervalMs ?? 60_000;
    if (sweep > 0) {
      store.#sweepTimer = setInterval(() => {
        store.sweepExpiredImports().catch((error: unknown) => options.onError?.(error));
      }, sweep);
      store.#sweepTimer.unref();
    }
    return store;
  }

  async #initialise(where: string): Promise<void> {
    const s = this.#s;
    const client = await this.#pool.connect();
    try {
      await client.query('BEGIN');
      // Replicas starting together: one creates or migrates the schema, the others wait and then see it current.
      await client.query("SELECT pg_advisory_xact_lock(hashtext('palimpsest schema ' || $1))", [s]);
      const migrated = await prepareSchema(client, s, where, this.#options);
      await client.query('COMMIT');
      if (migrated !== undefined) this.#options.onMigrated?.(migrated);
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  /** Write counters. */
  stats(): PostgresStoreStats {
    return { ...this.#counters };
  }

  /** Every call checks this first; calls issued before close() still run to the end. */
  #checkOpen(): void {
    if (this.#closed) throw new StoreClosedError();
  }

  /**
   * Runs a query on the pool, mapping an unreachable database to StoreUnavailableError. Every
   * statement is a named prepared statement (parsed and planned once per connection, the name
   * derived from the text), so the server only binds and executes on the hot paths.
   */
  async #query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]> {
    if (this.#ended) throw new StoreClosedError();
    const running = this.#pool.query<R>({ name: statementName(text), text, values: values ?? [] });
    this.#inFlight.add(running);
    try {
      return (await running).rows;
    } catch (error) {
      return mapError(error);
    } finally {
      this.#inFlight.delete(running);
    }
  }

  async createSession(record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota): Promise<CreateOutcome> {
    this.#checkOpen();
    const h = record.header;
    checkAscendingSeqs(h.id, events, 0);
    const { arrays, dataBytes } = encodeEvents(events);
    const rows = await this.#query<{ outcome: string; q_name: string | null; q_limit: number | null; q_actual: number | null }>(
      `SELECT * FROM ${this.#s}.create_session($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
         $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)`,
      [
        h.id, h.version, h.createdAt, h.cwd ?? null, h.parentSession ?? null, h.seedLength ?? null, h.origin ?? null,
        h.delegationDepth ?? null, h.agentPreset ?? null, JSON.stringify(record.labels), record.tenant, record.strict,
        record.pairingGuard, record.pending?.owner ?? null, record.pending?.leaseUntil ?? null, record.writer, ...arrays,
        dataBytes + storedSessionBytes(h, record.labels), Math.floor(quota?.maxSessions ?? 0), Math.floor(quota?.maxBytes ?? 0),
      ],
    );
    const r = rows[0]!;
    if (r.outcome === 'created') {
      this.#counters.commits++;
      return { kind: 'created' };
    }
    if (r.outcome === 'exists') return { kind: 'exists' };
    // The limit as given (the SQL compares integers: used > floor(limit) iff used > limit).
    const limitName = r.q_name as 'tenant_max_sessions' | 'tenant_max_bytes';
    return { kind: 'quota-exceeded', limitName, limit: (limitName === 'tenant_max_sessions' ? quota?.maxSessions : quota?.maxBytes) ?? r.q_limit!, actual: r.q_actual! };
  }

  async getSession(id: string): Promise<SessionRecord | undefined> {
    this.#checkOpen();
    const rows = await this.#query<RawSession>(`SELECT ${SESSION_COLUMNS} FROM ${this.#s}.sessions WHERE id = $1 AND pending_owner IS NULL`, [id]);
    return rows[0] === undefined ? undefined : decodeSession(rows[0]);
  }

  async listSessions(query: { tenant?: string; labels?: Readonly<Record<string, string>>; pageSize: number; pageToken?: string }): Promise<SessionPage> {
    this.#checkOpen();
    checkPageSize(query.pageSize);
    const after = query.pageToken ? decodePageToken(query.pageToken) : { createdAt: FIRST_PAGE_CREATED_AT, id: '' };
    const values: unknown[] = [after.createdAt, after.id, query.pageSize + 1];
    let filter = '';
    if (query.tenant !== undefined) {
      values.push(query.tenant);
      filter += ` AND tenant = $${values.length}`;
    }
    if (query.labels !== undefined && Object.keys(query.labels).length > 0) {
      values.push(JSON.stringify(query.labels));
      filter += ` AND labels @> $${values.length}::jsonb`;
    }
    // The keyset position in (created_at desc, id desc) order (ids are COLLATE "C", see schema.ts).
    const rows = await this.#query<RawSession>(
      `SELECT ${SESSION_COLUMNS} FROM ${this.#s}.sessions
        WHERE pending_owner IS NULL${filter}
          AND (created_at < $1 OR (created_at = $1 AND id < $2))
        ORDER BY created_at DESC, id DESC LIMIT $3`,
      values,
    );
    const more = rows.length > query.pageSize;
    const sessions = (more ? rows.slice(0, query.pageSize) : rows).map(decodeSession);
    const last = sessions[sessions.length - 1];
    return {
      sessions,
      nextPageToken: more && last !== undefined ? encodePageToken({ createdAt: last.header.createdAt, id: last.header.id }) : '',
    };
  }

  async deleteSession(id: string, expected?: DeleteExpectation): Promise<boolean> {
    this.#checkOpen();
    // Conditional: the session row is locked (FOR UPDATE, as every append locks it) and its head
    // and creation time compared in the same statement; an append that committed first is seen
    // (READ COMMITTED re-reads a locked row after the holder commits), so the session is kept.
    const rows = expected === undefined
      ? await this.#query<{ deleted: boolean }>(`SELECT ${this.#s}.delete_session($1) AS deleted`, [id])
      : await this.#query<{ deleted: boolean }>(
        `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${this.#s}.sessions WHERE id = $1 AND pending_owner IS NULL AND next_seq = $2 AND created_at = $3 FOR UPDATE)
           THEN ${this.#s}.delete_session($1) ELSE false END AS deleted`,
        [id, expected.nextSeq, expected.createdAt],
      );
    const deleted = rows[0]!.deleted;
    if (deleted) {
      this.#counters.commits++;
      this.#notifier.notify(id, -1);
    }
    return deleted;
  }

  append(sessionId: string, req: AppendRequest): Promise<AppendOutcome> {
    if (this.#closed) return Promise.reject(new StoreClosedError());
    try {
      checkAscendingSeqs(sessionId, req.events, req.expectedNextSeq);
    } catch (error) {
      return Promise.reject(error);
    }
    const { arrays, dataBytes } = encodeEvents(req.events, req.dataTexts);
    const key = req.idempotency;
    const values = [
      sessionId, req.expectedNextSeq, req.expectedWriter, req.writer, ...arrays, dataBytes,
      key?.key ?? null, key?.requestHash ?? null, req.surfaceLength, Math.floor(req.quota?.maxBytes ?? 0), this.#now(),
    ];
    return new Promise<AppendOutcome>((resolve, reject) => {
      let lane = this.#lanes.get(sessionId);
      if (lane === undefined) {
        lane = { queue: [], running: false };
        this.#lanes.set(sessionId, lane);
      }
      lane.queue.push({ values, maxBytes: req.quota?.maxBytes ?? 0, resolve, reject });
      if (!lane.running) void this.#runLane(sessionId, lane);
    });
  }

  /**
   * Sends a session's queued appends, in call order, one transaction at a time: alone when one is
   * queued, else up to MAX_GROUP together in one transaction (one commit). Order matters for
   * speed, not correctness: the app pipelines batches planned on top of batches not yet committed
   * (each naming its predecessor's writer token); sent concurrently on different pool connections,
   * a later batch could reach the row lock first and conflict. Every call still checks head and
   * token under the row lock, so other replicas' writes interleave safely.
   */
  async #runLane(sessionId: string, lane: Lane): Promise<void> {
    lane.running = true;
    try {
      while (lane.queue.length > 0) {
        const group = lane.queue.splice(0, MAX_GROUP);
        if (group.length > this.#counters.maxGroupSize) this.#counters.maxGroupSize = group.length;
        let outcomes: AppendRow[];
        try {
          outcomes = await this.#appendGroup(sessionId, group);
        } catch (error) {
          for (const call of group) call.reject(error);
          continue;
        }
        for (let i = 0; i < group.length; i++) group[i]!.resolve(this.#appendOutcome(sessionId, outcomes[i]!, group[i]!.maxBytes));
      }
    } finally {
      lane.running = false;
      if (lane.queue.length === 0 && this.#lanes.get(sessionId) === lane) this.#lanes.delete(sessionId);
    }
  }

  /**
   * One statement, one transaction for a group of appends of one session (append_batch: the calls
   * in order, each with append's checks); an unexpected error fails the whole group, nothing of it
   * commits.
   */
  #appendGroup(sessionId: string, group: readonly QueuedAppend[]): Promise<AppendRow[]> {
    if (group.length === 1) {
      return this.#query<AppendRow>(`SELECT * FROM ${this.#s}.append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`, group[0]!.values);
    }
    const counts: number[] = [];
    const next: number[] = [];
    const expectedWriter: string[] = [];
    const writer: string[] = [];
    const columns: unknown[][] = [[], [], [], [], [], [], []];
    const bytes: number[] = [];
    const keys: (string | null)[] = [];
    const hashes: (string | null)[] = [];
    const surface: number[] = [];
    const maxBytes: number[] = [];
    for (const call of group) {
      const v = call.values;
      const seqs = v[4] as unknown[];
      counts.push(seqs.length);
      next.push(v[1] as number);
      expectedWriter.push(v[2] as string);
      writer.push(v[3] as string);
      for (let c = 0; c < 7; c++) for (const x of v[4 + c] as unknown[]) columns[c]!.push(x);
      bytes.push(v[11] as number);
      keys.push(v[12] as string | null);
      hashes.push(v[13] as string | null);
      surface.push(v[14] as number);
      maxBytes.push(v[15] as number);
    }
    return this.#query<AppendRow>(
      `SELECT * FROM ${this.#s}.append_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
      [sessionId, counts, next, expectedWriter, writer, ...columns, bytes, keys, hashes, surface, maxBytes, this.#now()],
    );
  }

  #appendOutcome(sessionId: string, r: AppendRow, maxBytes: number): AppendOutcome {
    switch (r.outcome) {
      case 'appended':
        this.#counters.commits++;
        this.#counters.appends++;
        this.#notifier.notify(sessionId, r.head!);
        return APPENDED;
      case 'conflict':
        return { kind: 'conflict', actualNextSeq: r.head! };
      case 'duplicate':
        return { kind: 'duplicate', result: { seqs: r.r_seqs!, requestHash: r.r_hash!, surfaceLength: r.r_surface! } };
      case 'quota-exceeded':
        return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: maxBytes, actual: r.q_actual! };
      default:
        return NOT_FOUND;
    }
  }

  async getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined> {
    this.#checkOpen();
    const rows = await this.#query<{ request_hash: string; seqs: number[]; surface_length: number }>(
      `SELECT i.request_hash, i.seqs, i.surface_length FROM ${this.#s}.idempotency i
         JOIN ${this.#s}.sessions s ON s.id = i.session_id AND s.pending_owner IS NULL
        WHERE i.session_id = $1 AND i.key = $2`,
      [sessionId, key],
    );
    const r = rows[0];
    return r === undefined ? undefined : { seqs: r.seqs, requestHash: r.request_hash, surfaceLength: r.surface_length };
  }

  /**
   * Identical reads issued in one event-loop turn share one query, sent at the end of the turn:
   * a commit notified to this replica wakes every subscription of the session at once, and each
   * reads the same rows after the same cursor (100 subscribers would be 100 identical queries).
   * Only reads not yet sent are joined, so every caller still sees every commit acknowledged
   * before it called (read-your-writes holds). Each caller gets its own array.
   */
  async #coalesce<T>(key: string, read: () => Promise<readonly T[]>): Promise<T[]> {
    this.#checkOpen();
    let shared = this.#turnReads.get(key) as Promise<readonly T[]> | undefined;
    if (shared === undefined) {
      shared = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        this.#turnReads.delete(key);
        return read();
      });
      this.#turnReads.set(key, shared);
    }
    return (await shared).slice();
  }

  readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]> {
    return this.#coalesce(`e\0${sessionId}\0${query.fromSeq}\0${query.direction}\0${query.limit}\0${query.types?.join('\0') ?? ''}`, async () =>
      (await this.#selectEvents(sessionId, query)).map(decodeEvent));
  }

  async readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]> {
    this.#checkOpen();
    return (await this.#selectEvents(sessionId, query)).map(decodeEventText);
  }

  /** The visibility check and the read in one statement (one snapshot, one round trip). */
  #visible(param: string): string {
    return `EXISTS (SELECT 1 FROM ${this.#s}.sessions WHERE id = ${param} AND pending_owner IS NULL)`;
  }

  #selectEvents(sessionId: string, query: ReadEventsQuery): Promise<RawEvent[]> {
    if (query.limit <= 0) return Promise.resolve([]);
    const forward = query.direction === 'forward';
    const types = query.types !== undefined && query.types.length > 0 ? query.types : undefined;
    const values: unknown[] = [sessionId, query.fromSeq, query.limit];
    if (types !== undefined) values.push(types);
    return this.#query<RawEvent>(
      `SELECT ${EVENT_COLUMNS} FROM ${this.#s}.events
        WHERE session_id = $1 AND seq ${forward ? '>=' : '<='} $2 ${types === undefined ? '' : 'AND type = ANY($4::text[])'}
          AND ${this.#visible('$1')}
        ORDER BY seq ${forward ? 'ASC' : 'DESC'} LIMIT $3`,
      values,
    );
  }

  async getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    if (seqs.length === 0) return [];
    return this.#coalesce(`g\0${sessionId}\0${seqs.join(',')}`, () => this.#getEvents(sessionId, seqs));
  }

  async #getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    const rows = await this.#query<RawEvent>(
      `SELECT ${EVENT_COLUMNS} FROM ${this.#s}.events WHERE session_id = $1 AND seq = ANY($2::bigint[]) AND ${this.#visible('$1')} ORDER BY seq`,
      [sessionId, seqs],
    );
    return rows.map(decodeEvent);
  }

  async readStructure(sessionId: string, fromSeq: number, limit = Number.MAX_SAFE_INTEGER): Promise<StructuralRow[]> {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
    return this.#coalesce(`s\0${sessionId}\0${fromSeq}\0${limit}`, () => this.#readStructure(sessionId, fromSeq, limit));
  }

  async #readStructure(sessionId: string, fromSeq: number, limit: number): Promise<StructuralRow[]> {
    const out: StructuralRow[] = [];
    const types = new Map<string, string>();
    let next = fromSeq;
    // Keyset chunks: events are immutable once committed and seqs only grow, so chunks read in
    // separate snapshots still form one consistent prefix of the log.
    for (;;) {
      const want = Math.min(STRUCTURE_CHUNK, limit - out.length);
      const rows = await this.#query<Omit<RawEvent, 'time' | 'data'>>(
        `SELECT seq, type, surface_op, source_event_seqs, ignorable FROM ${this.#s}.events
          WHERE session_id = $1 AND seq >= $2 AND ${this.#visible('$1')} ORDER BY seq LIMIT $3`,
        [sessionId, next, want],
      );
      for (const r of rows) {
        let type = types.get(r.type);
        if (type === undefined) {
          types.set(r.type, r.type);
          type = r.type;
        }
        const row: { seq: number; type: string; surfaceOp?: SurfaceOp; sourceEventSeqs?: readonly number[]; ignorable?: true } = { seq: r.seq, type };
        if (r.surface_op !== null) row.surfaceOp = decodeSurfaceOp(r.surface_op);
        if (r.source_event_seqs !== null) row.sourceEventSeqs = r.source_event_seqs;
        if (r.ignorable === true) row.ignorable = true;
        out.push(row);
      }
      if (rows.length < want || out.length >= limit) return out;
      next = out[out.length - 1]!.seq + 1;
    }
  }

  async *scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]> {
    this.#checkOpen();
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    let next = fromSeq;
    for (;;) {
      // The visibility check is per batch: a session deleted mid-scan ends the scan.
      const rows = await this.#query<RawEvent>(
        `SELECT ${EVENT_COLUMNS} FROM ${this.#s}.events WHERE session_id = $1 AND seq >= $2 AND ${this.#visible('$1')} ORDER BY seq LIMIT $3`,
        [sessionId, next, batchSize],
      );
      if (rows.length === 0) return;
      next = rows[rows.length - 1]!.seq + 1;
      yield rows.map(decodeEvent);
      if (rows.length < batchSize) return;
    }
  }

  async deletePending(id: string, owner: string): Promise<boolean> {
    this.#checkOpen();
    // Re-checked under the row lock (as the sweep does): a published or foreign session is kept.
    const rows = await this.#query<{ deleted: boolean }>(
      `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${this.#s}.sessions WHERE id = $1 AND pending_owner = $2 FOR UPDATE)
              THEN ${this.#s}.delete_session($1) ELSE false END AS deleted`,
      [id, owner],
    );
    const deleted = rows[0]!.deleted;
    if (deleted) this.#counters.commits++;
    return deleted;
  }

  async publishSession(id: string, owner: string, metadata?: PublishMetadata): Promise<void> {
    this.#checkOpen();
    // With an import's metadata trailer (issue #35): labels, pairing guard and the byte counters in
    // the publish's own statement.
    const rows = await this.#query<{ published: boolean; owner: string | null }>(
      `WITH p AS (UPDATE ${this.#s}.sessions SET pending_owner = NULL, lease_until = NULL,
                    labels = coalesce($3::jsonb, labels), pairing_guard = coalesce($4::boolean, pairing_guard), data_bytes = data_bytes + $5
                  WHERE id = $1 AND pending_owner = $2 RETURNING id, tenant),
            t AS (UPDATE ${this.#s}.tenant_bytes SET data_bytes = data_bytes + $5
                  WHERE $5 <> 0 AND tenant = (SELECT tenant FROM p) AND shard = (hashtext($1) & ${TENANT_SHARDS - 1}))
       SELECT EXISTS (SELECT 1 FROM p) AS published, (SELECT pending_owner FROM ${this.#s}.sessions WHERE id = $1) AS owner`,
      [id, owner, metadata === undefined ? null : JSON.stringify(metadata.labels), metadata?.pairingGuard ?? null, metadata?.bytesDelta ?? 0],
    );
    const r = rows[0]!;
    if (!r.published) {
      throw new StoreUsageError(
        r.owner === null
          ? `cannot publish session ${id}: no such pending session`
          : `cannot publish session ${id}: the pending session is owned by another importer (${r.owner})`,
      );
    }
    this.#counters.commits++;
  }

  async appendPending(sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): Promise<PendingChunkOutcome> {
    this.#checkOpen();
    checkAscendingSeqs(sessionId, events, 0);
    const { arrays, dataBytes } = encodeEvents(events);
    const rows = await this.#query<{ outcome: string; owner: string | null; q_limit: number | null; q_actual: number | null }>(
      `SELECT * FROM ${this.#s}.append_pending($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [sessionId, opts.owner, opts.leaseUntil, ...arrays, dataBytes, Math.floor(opts.quota?.maxBytes ?? 0)],
    );
    const r = rows[0]!;
    if (r.outcome === 'appended') {
      this.#counters.commits++;
      return APPENDED;
    }
    if (r.outcome === 'not-found') {
      throw new StoreUsageError(
        r.owner === null
          ? `cannot append an import chunk to session ${sessionId}: no such pending session (its lease may have expired)`
          : `cannot append an import chunk to session ${sessionId}: the pending session is owned by another importer (${r.owner})`,
      );
    }
    return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: opts.quota?.maxBytes ?? r.q_limit!, actual: r.q_actual! };
  }

  async getPendingEvents(sessionId: string, owner: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    this.#checkOpen();
    const head = await this.#query<{ owner: string | null }>(`SELECT pending_owner AS owner FROM ${this.#s}.sessions WHERE id = $1`, [sessionId]);
    const found = head[0]?.owner ?? null;
    if (found !== owner) {
      throw new StoreUsageError(
        found === null
          ? `cannot read back the import chunks of session ${sessionId}: no such pending session (its lease may have expired)`
          : `cannot read back the import chunks of session ${sessionId}: the pending session is owned by another importer (${found})`,
      );
    }
    if (seqs.length === 0) return [];
    const rows = await this.#query<RawEvent>(
      `SELECT ${EVENT_COLUMNS} FROM ${this.#s}.events WHERE session_id = $1 AND seq = ANY($2::bigint[])
          AND EXISTS (SELECT 1 FROM ${this.#s}.sessions WHERE id = $1 AND pending_owner = $3) ORDER BY seq`,
      [sessionId, seqs, owner],
    );
    return rows.map(decodeEvent);
  }

  async updateLabels(id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome> {
    this.#checkOpen();
    // The labels at the expected version give the byte change; the function's compare-and-set on
    // the version makes sure they are still the stored ones.
    const current = await this.#query<{ labels: Record<string, string>; metadata_version: number }>(
      `SELECT labels, metadata_version FROM ${this.#s}.sessions WHERE id = $1 AND pending_owner IS NULL`, [id]);
    const before = current[0];
    if (before === undefined) return { kind: 'not-found' };
    if (Number(before.metadata_version) !== expectedVersion) return { kind: 'version-mismatch', actual: Number(before.metadata_version) };
    const rows = await this.#query<{ outcome: string; actual: number | null }>(
      `SELECT outcome, actual FROM ${this.#s}.update_labels($1, $2::jsonb, $3, $4)`,
      [id, JSON.stringify(labels), expectedVersion, labelsBytesDelta(before.labels, labels)],
    );
    const r = rows[0]!;
    if (r.outcome === 'updated') {
      this.#counters.commits++;
      return { kind: 'updated' };
    }
    if (r.outcome === 'version-mismatch') return { kind: 'version-mismatch', actual: Number(r.actual) };
    return { kind: 'not-found' };
  }

  async readFeed(query: FeedQuery): Promise<FeedRecord[]> {
    this.#checkOpen();
    if (query.limit <= 0) return [];
    const rows = await this.#query<{
      position: number; tenant: string; session_id: string; kind: FeedChangeKind; created_at: number; next_seq: number; event_count: number;
      surface_length: number; event_types: string[]; labels: Record<string, string>; previous_labels: Record<string, string> | null; time: number;
    }>(
      `SELECT position, tenant, session_id, kind, created_at, next_seq, event_count, surface_length, event_types, labels, previous_labels, time
         FROM ${this.#s}.feed WHERE tenant = $1 AND position > $2 ORDER BY position LIMIT $3`,
      [query.tenant, Math.max(0, Math.floor(query.after)), query.limit],
    );
    return rows.map((r) => ({
      position: Number(r.position), tenant: r.tenant, sessionId: r.session_id, kind: r.kind, createdAt: Number(r.created_at), nextSeq: Number(r.next_seq),
      eventCount: Number(r.event_count), surfaceLength: Number(r.surface_length), eventTypes: r.event_types, labels: r.labels,
      previousLabels: r.previous_labels ?? undefined, time: Number(r.time),
    }));
  }

  async feedEnd(tenant: string): Promise<number> {
    this.#checkOpen();
    const rows = await this.#query<{ position: number | null }>(`SELECT position FROM ${this.#s}.feed_heads WHERE tenant = $1`, [tenant]);
    return Number(rows[0]?.position ?? 0);
  }

  async getTenantUsage(tenant: string): Promise<TenantUsage> {
    this.#checkOpen();
    const rows = await this.#query<{ sessions: number | null; bytes: number | null }>(
      `SELECT (SELECT session_count FROM ${this.#s}.tenants WHERE tenant = $1) AS sessions,
              (SELECT sum(data_bytes)::bigint FROM ${this.#s}.tenant_bytes WHERE tenant = $1) AS bytes`,
      [tenant],
    );
    return { sessions: rows[0]?.sessions ?? 0, dataBytes: rows[0]?.bytes ?? 0 };
  }
  /** Every tenant's stored session count (the palimpsest_tenant_sessions gauge). */
  async tenantSessionCounts(): Promise<ReadonlyMap<string, number>> {
    this.#checkOpen();
    const rows = await this.#query<{ tenant: string; sessions: string | number }>(`SELECT tenant, session_count AS sessions FROM ${this.#s}.tenants`);
    return new Map(rows.map((r) => [r.tenant, Number(r.sessions)]));
  }


  /**
   * Drops pending imports whose lease has passed (their importer died or gave up); imports of
   * live processes renew their lease with every chunk and are left alone. Returns how many.
   */
  async sweepExpiredImports(): Promise<number> {
    const rows = await this.#query<{ id: string }>(
      `SELECT id FROM ${this.#s}.sessions WHERE pending_owner IS NOT NULL AND lease_until < $1`,
      [this.#now()],
    );
    let dropped = 0;
    for (const { id } of rows) {
      // Re-checked under the row lock by the delete: a lease renewed meanwhile keeps the import.
      const done = await this.#query<{ deleted: boolean }>(
        `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${this.#s}.sessions WHERE id = $1 AND pending_owner IS NOT NULL AND lease_until < $2 FOR UPDATE)
                THEN ${this.#s}.delete_session($1) ELSE false END AS deleted`,
        [id, this.#now()],
      );
      if (done[0]?.deleted === true) dropped++;
    }
    return dropped;
  }

  /** Heads and creation times of the visible sessions among `ids` (the head watch's reads). */
  async readHeads(ids: readonly string[]): Promise<Map<string, { head: number; createdAt: number }>> {
    const rows = await this.#query<{ id: string; next_seq: number; created_at: number }>(
      `SELECT id, next_seq, created_at FROM ${this.#s}.sessions WHERE id = ANY($1::text[]) AND pending_owner IS NULL`,
      [ids],
    );
    return new Map(rows.map((r) => [r.id, { head: r.next_seq, createdAt: r.created_at }]));
  }

  openHeadWatch(): HeadWatch {
    if (this.#closed) throw new StoreClosedError();
    const watch = new PgHeadWatch(this, {
      connection: this.#connection,
      channel: this.#channel,
      ...(this.#options.headPollMs === undefined ? {} : { pollMs: this.#options.headPollMs }),
      ...(this.#options.onError === undefined ? {} : { onError: this.#options.onError }),
    });
    this.#watches.add(watch);
    return watch;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#sweepTimer);
    // Calls already issued finish (and are acknowledged) before the pool goes: reads waiting for
    // the end of the turn, queued appends (their lanes drain), whatever else is in flight.
    while (this.#lanes.size > 0 || this.#inFlight.size > 0 || this.#turnReads.size > 0) {
      await Promise.allSettled([...this.#inFlight, ...this.#turnReads.values()]);
      await new Promise((r) => setImmediate(r));
    }
    this.#ended = true;
    await this.#notifier.close();
    await Promise.all([...this.#watches].map((w) => w.close()));
    await this.#pool.end().catch(() => undefined);
  }
}

/** Prepared-statement names by statement text (texts are few: built from a fixed set per schema). */
const STATEMENT_NAMES = new Map<string, string>();

function statementName(text: string): string {
  let name = STATEMENT_NAMES.get(text);
  if (name === undefined) {
    name = `pal${STATEMENT_NAMES.size}`;
    STATEMENT_NAMES.set(text, name);
  }
  return name;
}

function decodeEvent(r: RawEvent): SessionEvent {
  const event: { type: string; seq: number; time: number; data: Json; sourceEventSeqs?: readonly number[]; surfaceOp?: SurfaceOp; ignorable?: true } = {
    type: r.type, seq: r.seq, time: r.time, data: JSON.parse(r.data) as Json,
  };
  if (r.source_event_seqs !== null) event.sourceEventSeqs = r.source_event_seqs;
  if (r.surface_op !== null) event.surfaceOp = decodeSurfaceOp(r.surface_op);
  if (r.ignorable === true) event.ignorable = true;
  return event;
}

function decodeEventText(r: RawEvent): StoredEventText {
  const event: { type: string; seq: number; time: number; dataText: string; sourceEventSeqs?: readonly number[]; surfaceOp?: SurfaceOp; ignorable?: true } = {
    type: r.type, seq: r.seq, time: r.time, dataText: r.data,
  };
  if (r.source_event_seqs !== null) event.sourceEventSeqs = r.source_event_seqs;
  if (r.surface_op !== null) event.surfaceOp = decodeSurfaceOp(r.surface_op);
  if (r.ignorable === true) event.ignorable = true;
  return event;
}

function decodeSession(r: RawSession): SessionRecord {
  const header: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = { version: r.version, id: r.id, createdAt: r.created_at };
  if (r.cwd !== null) header.cwd = r.cwd;
  if (r.parent_session !== null) header.parentSession = r.parent_session;
  if (r.seed_length !== null) header.seedLength = r.seed_length;
  if (r.origin !== null) header.origin = r.origin as 'subagent';
  if (r.delegation_depth !== null) header.delegationDepth = r.delegation_depth;
  if (r.agent_preset !== null) header.agentPreset = r.agent_preset;
  return {
    header,
    labels: r.labels,
    tenant: r.tenant,
    strict: r.strict,
    pairingGuard: r.pairing_guard,
    nextSeq: r.next_seq,
    eventCount: r.event_count,
    dataBytes: r.data_bytes,
    writer: r.writer,
    metadataVersion: r.metadata_version,
  };
}
