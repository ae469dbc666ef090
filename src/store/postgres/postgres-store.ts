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
 * One instance sends its appends of one session in call order, one transaction at a time, and
 * runs at most a few append transactions at once: the appends queued meanwhile, of any sessions,
 * go together in one statement (append_batch / append_many: each call still checked), so
 * concurrent writers cost one commit per group rather than one per append (group-commit.ts).
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
 *
 * The folder (shaped like src/store/sqlite): options.ts, open-database.ts (connection settings,
 * schema creation and version check, the sweep of expired pending imports), schema.ts,
 * statements.ts (named prepared statements, the queries in flight), row-codec.ts (rows <->
 * events), group-commit.ts (the per-session append lanes), session-writes.ts (create, delete,
 * import chunks, publish, labels), coalesced-reads.ts, notifier.ts + head-watch.ts (NOTIFY and the
 * watch over it). This file is the port.
 */
import pg from 'pg';
import type {
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
import type { SessionEvent, SurfaceOp } from '../../domain/event.js';
import { checkPageSize, decodePageToken, encodePageToken } from '../page-token.js';
import { StoreClosedError, StoreOpenError, StoreUsageError, checkAscendingSeqs } from '../store-errors.js';
import { decodeSurfaceOp } from '../sqlite/codec.js';
import { TurnReads } from './coalesced-reads.js';
import { AppendLanes } from './group-commit.js';
import { PgHeadWatch } from './head-watch.js';
import { feedRetentionSql } from './feed-retention.js';
import { HeadNotifier } from './notifier.js';
import { connectionConfig, initialiseSchema, sweepExpiredImports, watchPoolErrors } from './open-database.js';
import type { PostgresStoreOptions, PostgresStoreStats } from './options.js';
import { describe as describeError, isUnavailable } from './pg-errors.js';
import { EVENT_COLUMNS, SESSION_COLUMNS, decodeEvent, decodeEventText, decodeFeedRow, decodeSession, type RawEvent, type RawFeedRow, type RawSession } from './row-codec.js';
import { SCHEMA_NAME_PATTERN, channelOf } from './schema.js';
import * as writes from './session-writes.js';
import { Statements } from './statements.js';
import { redactUrl } from './url.js';
import type { BlobStorePort, BlobWrites } from '../../app/blob-port.js';
import { PgBlobs } from './pg-blobs.js';

export type { PostgresStoreOptions, PostgresStoreStats } from './options.js';




/** Rows per structural-scan query. */
const STRUCTURE_CHUNK = 10_000;
const FIRST_PAGE_CREATED_AT = Number.MAX_SAFE_INTEGER + 1;



/** The PostgreSQL implementation of the store port (see the module comment). Open with {@link PostgresSessionStore.open}. */
export class PostgresSessionStore implements SessionStore {
  readonly #pool: pg.Pool;
  readonly #connection: pg.ClientConfig;
  readonly #sql: Statements;
  readonly #channel: string;
  readonly #now: () => number;
  readonly #notifier: HeadNotifier;
  readonly #options: PostgresStoreOptions;
  readonly #watches = new Set<PgHeadWatch>();
  /** Identical reads issued in the current event-loop turn, not sent yet (coalesced-reads.ts). */
  readonly #turnReads = new TurnReads();
  /** Per-session append queues (group-commit.ts). */
  readonly #lanes: AppendLanes;
  /** The blobs (issue #39, pg-blobs.ts). */
  readonly blobs: BlobStorePort;
  #sweepTimer: NodeJS.Timeout | undefined;
  /** close() was called: new calls are refused. */
  #closed = false;
  readonly #counters = { commits: 0, appends: 0, maxGroupSize: 0 };
  /** What the session writes need (session-writes.ts). */
  readonly #w: writes.WriteContext;

  private constructor(pool: pg.Pool, connection: pg.ClientConfig, options: PostgresStoreOptions, schema: string) {
    this.#pool = pool;
    this.#connection = connection;
    this.#options = options;
    this.#sql = new Statements(pool, schema, options.onStatementRetry);
    this.#channel = channelOf(schema);
    this.#now = options.now ?? Date.now;
    this.#notifier = new HeadNotifier(pool, this.#channel);
    const blobs = new PgBlobs(pool, this.#sql);
    this.blobs = blobs.port(() => this.#checkOpen(), this.#turnReads);
    this.#lanes = new AppendLanes(this.#sql, this.#counters, this.#notifier, this.#now, blobs);
    this.#w = { sql: this.#sql, counters: this.#counters, notifier: this.#notifier, blobs };
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
    const connection = connectionConfig(options);
    const pool = new pg.Pool({ ...connection, max: options.poolSize ?? 10, idleTimeoutMillis: 30_000, query_timeout: options.queryTimeoutMs ?? 30_000 });
    watchPoolErrors(pool, (error) => options.onError?.(error));
    const store = new PostgresSessionStore(pool, connection, options, schema);
    try {
      await initialiseSchema(connection, schema, where, options);
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

  /** Write counters. */
  stats(): PostgresStoreStats {
    return { ...this.#counters, statementRetries: this.#sql.retries };
  }

  /** Every call checks this first; calls issued before close() still run to the end. */
  #checkOpen(): void {
    if (this.#closed) throw new StoreClosedError();
  }

  async createSession(record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota, blobs?: BlobWrites): Promise<CreateOutcome> {
    this.#checkOpen();
    return writes.createSession(this.#w, record, events, quota, blobs);
  }

  async getSession(id: string): Promise<SessionRecord | undefined> {
    this.#checkOpen();
    const rows = await this.#sql.query<RawSession>(`SELECT ${SESSION_COLUMNS} FROM ${this.#sql.s}.sessions WHERE id = $1 AND pending_owner IS NULL`, [id]);
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
    const rows = await this.#sql.query<RawSession>(
      `SELECT ${SESSION_COLUMNS} FROM ${this.#sql.s}.sessions
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
    return writes.deleteSession(this.#w, id, expected);
  }

  append(sessionId: string, req: AppendRequest): Promise<AppendOutcome> {
    if (this.#closed) return Promise.reject(new StoreClosedError());
    try {
      checkAscendingSeqs(sessionId, req.events, req.expectedNextSeq);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#lanes.enqueue(sessionId, req);
  }

  async getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined> {
    this.#checkOpen();
    const rows = await this.#sql.query<{ request_hash: string; seqs: number[]; surface_length: number }>(
      `SELECT i.request_hash, i.seqs, i.surface_length FROM ${this.#sql.s}.idempotency i
         JOIN ${this.#sql.s}.sessions s ON s.id = i.session_id AND s.pending_owner IS NULL
        WHERE i.session_id = $1 AND i.key = $2`,
      [sessionId, key],
    );
    const r = rows[0];
    return r === undefined ? undefined : { seqs: r.seqs, requestHash: r.request_hash, surfaceLength: r.surface_length };
  }

  /** Identical reads of this turn share one query (coalesced-reads.ts). */
  #coalesce<T>(key: string, read: () => Promise<readonly T[]>): Promise<T[]> {
    this.#checkOpen();
    return this.#turnReads.read(key, read);
  }

  readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]> {
    return this.#coalesce(`e\0${sessionId}\0${query.fromSeq}\0${query.direction}\0${query.limit}\0${query.types?.join('\0') ?? ''}`, async () =>
      (await this.#selectEvents(sessionId, query)).map(decodeEvent));
  }

  async readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]> {
    this.#checkOpen();
    return (await this.#selectEvents(sessionId, query)).map(decodeEventText);
  }

  #selectEvents(sessionId: string, query: ReadEventsQuery): Promise<RawEvent[]> {
    if (query.limit <= 0) return Promise.resolve([]);
    const forward = query.direction === 'forward';
    const types = query.types !== undefined && query.types.length > 0 ? query.types : undefined;
    const values: unknown[] = [sessionId, query.fromSeq, query.limit];
    if (types !== undefined) values.push(types);
    return this.#sql.query<RawEvent>(
      `SELECT ${EVENT_COLUMNS} FROM ${this.#sql.s}.events
        WHERE session_id = $1 AND seq ${forward ? '>=' : '<='} $2 ${types === undefined ? '' : 'AND type = ANY($4::text[])'}
          AND ${this.#sql.visible('$1')}
        ORDER BY seq ${forward ? 'ASC' : 'DESC'} LIMIT $3`,
      values,
    );
  }

  async getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    if (seqs.length === 0) return [];
    return this.#coalesce(`g\0${sessionId}\0${seqs.join(',')}`, () => this.#getEvents(sessionId, seqs));
  }

  async #getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    const rows = await this.#sql.query<RawEvent>(
      `SELECT ${EVENT_COLUMNS} FROM ${this.#sql.s}.events WHERE session_id = $1 AND seq = ANY($2::bigint[]) AND ${this.#sql.visible('$1')} ORDER BY seq`,
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
      const rows = await this.#sql.query<Omit<RawEvent, 'time' | 'data'>>(
        `SELECT seq, type, surface_op, source_event_seqs, ignorable FROM ${this.#sql.s}.events
          WHERE session_id = $1 AND seq >= $2 AND ${this.#sql.visible('$1')} ORDER BY seq LIMIT $3`,
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
      const rows = await this.#sql.query<RawEvent>(
        `SELECT ${EVENT_COLUMNS} FROM ${this.#sql.s}.events WHERE session_id = $1 AND seq >= $2 AND ${this.#sql.visible('$1')} ORDER BY seq LIMIT $3`,
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
    return writes.deletePending(this.#w, id, owner);
  }

  async publishSession(id: string, owner: string, metadata?: PublishMetadata): Promise<void> {
    this.#checkOpen();
    return writes.publishSession(this.#w, id, owner, metadata);
  }

  async appendPending(sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): Promise<PendingChunkOutcome> {
    this.#checkOpen();
    return writes.appendPending(this.#w, sessionId, events, opts);
  }

  async getPendingEvents(sessionId: string, owner: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    this.#checkOpen();
    const head = await this.#sql.query<{ owner: string | null }>(`SELECT pending_owner AS owner FROM ${this.#sql.s}.sessions WHERE id = $1`, [sessionId]);
    const found = head[0]?.owner ?? null;
    if (found !== owner) {
      throw new StoreUsageError(
        found === null
          ? `cannot read back the import chunks of session ${sessionId}: no such pending session (its lease may have expired)`
          : `cannot read back the import chunks of session ${sessionId}: the pending session is owned by another importer (${found})`,
      );
    }
    if (seqs.length === 0) return [];
    const rows = await this.#sql.query<RawEvent>(
      `SELECT ${EVENT_COLUMNS} FROM ${this.#sql.s}.events WHERE session_id = $1 AND seq = ANY($2::bigint[])
          AND EXISTS (SELECT 1 FROM ${this.#sql.s}.sessions WHERE id = $1 AND pending_owner = $3) ORDER BY seq`,
      [sessionId, seqs, owner],
    );
    return rows.map(decodeEvent);
  }

  async updateLabels(id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome> {
    this.#checkOpen();
    return writes.updateLabels(this.#w, id, labels, expectedVersion);
  }

  async readFeed(query: FeedQuery): Promise<FeedRecord[]> {
    this.#checkOpen();
    if (query.limit <= 0) return [];
    const rows = await this.#sql.query<RawFeedRow>(
      `SELECT position, tenant, session_id, kind, created_at, next_seq, event_count, surface_length, event_types, labels, previous_labels, time
         FROM ${this.#sql.s}.feed WHERE tenant = $1 AND position > $2 ORDER BY position LIMIT $3`,
      [query.tenant, Math.max(0, Math.floor(query.after)), query.limit],
    );
    return rows.map(decodeFeedRow);
  }

  async feedEnd(tenant: string): Promise<number> {
    this.#checkOpen();
    const rows = await this.#sql.query<{ position: number | null }>(`SELECT position FROM ${this.#sql.s}.feed_heads WHERE tenant = $1`, [tenant]);
    return Number(rows[0]?.position ?? 0);
  }

  async feedPrunedUpTo(tenant: string): Promise<number> {
    this.#checkOpen();
    const rows = await this.#sql.query<{ position: number | null }>(feedRetentionSql(this.#sql.s).feedPrunedUpTo, [tenant]);
    return Number(rows[0]?.position ?? 0);
  }

  async pruneFeed(before: number): Promise<number> {
    this.#checkOpen();
    const rows = await this.#sql.query<{ n: number }>(feedRetentionSql(this.#sql.s).pruneFeed, [Math.floor(before)]);
    return Number(rows[0]?.n ?? 0);
  }

  async getTenantUsage(tenant: string): Promise<TenantUsage> {
    this.#checkOpen();
    const rows = await this.#sql.query<{ sessions: number | null; bytes: number | null }>(
      `SELECT (SELECT session_count FROM ${this.#sql.s}.tenants WHERE tenant = $1) AS sessions,
              (SELECT sum(data_bytes)::bigint FROM ${this.#sql.s}.tenant_bytes WHERE tenant = $1) AS bytes`,
      [tenant],
    );
    return { sessions: rows[0]?.sessions ?? 0, dataBytes: rows[0]?.bytes ?? 0 };
  }
  /** Every tenant's stored session count (the palimpsest_tenant_sessions gauge). */
  async tenantSessionCounts(): Promise<ReadonlyMap<string, number>> {
    this.#checkOpen();
    const rows = await this.#sql.query<{ tenant: string; sessions: string | number }>(`SELECT tenant, session_count AS sessions FROM ${this.#sql.s}.tenants`);
    return new Map(rows.map((r) => [r.tenant, Number(r.sessions)]));
  }


  /**
   * Drops pending imports whose lease has passed (their importer died or gave up); imports of
   * live processes renew their lease with every chunk and are left alone. Returns how many.
   */
  sweepExpiredImports(): Promise<number> {
    return sweepExpiredImports(this.#sql, this.#now);
  }

  /** Heads and creation times of the visible sessions among `ids` (the head watch's reads). */
  async readHeads(ids: readonly string[]): Promise<Map<string, { head: number; createdAt: number }>> {
    const rows = await this.#sql.query<{ id: string; next_seq: number; created_at: number }>(
      `SELECT id, next_seq, created_at FROM ${this.#sql.s}.sessions WHERE id = ANY($1::text[]) AND pending_owner IS NULL`,
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
    while (this.#lanes.size > 0 || this.#sql.inFlight.size > 0 || this.#turnReads.size > 0) {
      await Promise.allSettled([...this.#sql.inFlight, ...this.#turnReads.pending()]);
      await new Promise((r) => setImmediate(r));
    }
    this.#sql.ended = true;
    await this.#notifier.close();
    await Promise.all([...this.#watches].map((w) => w.close()));
    await this.#pool.end().catch(() => undefined);
  }
}


