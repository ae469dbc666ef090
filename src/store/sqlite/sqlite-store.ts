/**
 * The embedded SQLite implementation of the store port (better-sqlite3: synchronous calls, so every transaction below runs
 * without an `await` inside; one connection, plus the writer thread's when appends are written by one).
 *
 * The folder: options.ts, open-database.ts (file identity and version checks), schema.ts, statements.ts (prepared once),
 * row-codec.ts + codec.ts (rows <-> events), group-commit.ts (appends of one event-loop turn share a transaction: a private
 * optimisation, each call is a compare-and-set on the stored head and writer token), session-writes.ts (create/delete/
 * import-chunk/publish transactions with the tenant counters), structure-reads.ts, token-figures.ts, wal-sync.ts (background
 * durability), head-watch.ts (commits of other connections), head-record.ts + head-guard.ts (the second record of heads,
 * sessions refused at open), startup-report.ts, append-thread*.ts (the writer thread, its messages and commit gate). This file is the port.
 */
import type { BlobStorePort, BlobWrites } from '../../app/blob-port.js';
import { SqliteBlobs } from './sqlite-blobs.js';
import fs from 'node:fs';
import Database from 'better-sqlite3';
import type {
  AppendOutcome, AppendRequest, CreateOutcome, CreateQuota, DeleteExpectation, EncodedEventPage, FeedQuery, FeedRecord, HeadWatch,
  IdempotentResult, NewSession, PendingChunkOptions, PendingChunkOutcome, PublishMetadata, ReadEventsQuery, SessionPage, SessionRecord,
  SessionStore, StoreStartLog, StoredEventText, StructuralColumns, StructuralRow, SurfaceStructure, TenantUsage, TokenFigureRows, UpdateLabelsOutcome,
} from '../../app/store-port.js';
import type { SessionEvent } from '../../domain/event.js';
import { checkPageSize, decodePageToken, encodePageToken } from '../page-token.js';
import { StoreClosedError, StoreUsageError, checkAscendingSeqs, classifyStoreErrors } from '../store-errors.js';
import { sqliteStorageError } from './sqlite-errors.js';
import { OwnAppends, SqliteHeadWatch } from './head-watch.js';
import { busyTimeoutMs, openDatabase } from './open-database.js';
import { loadChecksumExtension, type ChecksumExtension } from './sqlite-ext.js';
import { LINE_FORMAT, decodeEvent, decodeEventPage, decodeEventText, decodeIdempotent, decodeSession, encodeEvents, type RawEvent, type RawSession, type StoredIdempotent } from './row-codec.js';
import { durableFeedRecords, feedStatements, type FeedStatements } from './feed-statements.js';
import { prepareStatements, type Statements } from './statements.js';
import { WalSync } from './wal-sync.js';
import { GroupCommit, queuedAppend, type AppendQueue } from './group-commit.js';
import { AppendThread } from './append-thread.js';
import { sessionWrites, type SessionWrites } from './session-writes.js';
import type { DataCorruptedError } from '../../app/storage-error.js';
import { HeadGuard } from './head-guard.js';
import type { SqliteStoreOptions, SqliteStoreStats } from './options.js';
import { reportOpen } from './startup-report.js';
import { structureReads, type StructureReads } from './structure-reads.js';
import { tokenFigureRows, type TokenFigureRaw } from './token-figures.js';
export type { SqliteStoreOptions, SqliteStoreStats } from './options.js';

/** Above every safe-integer createdAt: the first page's cursor. */
const FIRST_PAGE_CREATED_AT = Number.MAX_SAFE_INTEGER + 1;

/** The SQLite implementation of {@link SessionStore}. The constructor opens (and if new, initialises) the file. */
export class SqliteSessionStore implements SessionStore {
  /** The database file path. */
  readonly path: string;
  /** True when reads verify row checksums in SQLite (the checksum extension loaded), false when in JavaScript. */
  readonly checksumsInSqlite: boolean;
  /** How the checksum extension loaded (the composition root logs its problem, if any). */
  readonly checksumExtension: ChecksumExtension;
  /** The wire format version of readEncodedEventPage's pages (the extension's; undefined without it). */
  readonly eventPageFormat: number | undefined;
  private readonly db: Database.Database;
  private readonly now: () => number;
  private closed = false;
  private readonly counters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
  /** Background WAL sync (durability 'full', fullSync 'background'); undefined otherwise. */
  private readonly walSync: WalSync | undefined;
  private readonly headWatchPollMs: number;
  private readonly headWatches = new Set<SqliteHeadWatch>();
  private readonly st: Statements;
  private readonly feed: FeedStatements;
  private readonly groups: AppendQueue;
  /** The writer thread, when appends are written by one. */
  private readonly appendThread: AppendThread | undefined;
  /** Writer thread: this store's appends in flight per session, and the highest next seq they planned (for the head watch). */
  private readonly ownInflight = new OwnAppends();
  private readonly writes: SessionWrites;
  private readonly structure: StructureReads;
  /** The blobs (issue #39, sqlite-blobs.ts). */
  readonly blobs: BlobStorePort;
  /** The heads record and the sessions refused at open (head-guard.ts). */
  private readonly guard: HeadGuard;

  constructor(options: SqliteStoreOptions) {
    this.path = options.path;
    this.now = options.now ?? Date.now;
    this.headWatchPollMs = options.headWatchPollMs ?? 150;
    const background = options.durability !== 'normal' && options.fullSync !== 'inline';
    this.db = openDatabase(options, background, this.now);
    const db = this.db;
    const wal = this.db.pragma('journal_mode', { simple: true }) === 'wal';
    if (background && !wal && !this.db.memory) {
      // No WAL (e.g. a filesystem without shared memory): background syncing cannot work, so
      // durability full falls back to SQLite's own fsync in COMMIT rather than silently degrading.
      this.db.pragma('synchronous = FULL');
    }
    try {
      this.checksumExtension = loadChecksumExtension(db, options.nativeChecksums ?? 'auto', LINE_FORMAT);
    } catch (e) {
      db.close();
      throw e;
    }
    this.checksumsInSqlite = this.checksumExtension.loaded;
    this.eventPageFormat = this.checksumExtension.eventPageFormat;
    this.st = prepareStatements(db, this.checksumsInSqlite);
    this.feed = feedStatements(db);
    // SQLite puts the WAL next to the real database file (symlinks resolved): sync that file.
    const real = this.db.memory ? undefined : fs.realpathSync(this.db.name);
    // Durability 'normal' may lose acknowledged commits on power loss by design: no second record.
    this.guard = real === undefined || options.durability === 'normal' ? new HeadGuard(this.st) : HeadGuard.open(db, `${real}-heads`, this.st);
    this.walSync = background && wal && real !== undefined ? new WalSync(`${real}-wal`) : undefined;
    const onHeads = (moved: readonly (readonly [string, number, number])[]): void => {
      this.guard.heads(moved);
      for (const w of this.headWatches) for (const [id, createdAt, next] of moved) w.own(id, createdAt, next);
    };
    if (options.appendWriter === 'thread' && wal && real !== undefined) {
      this.appendThread = new AppendThread({
        path: real,
        durability: options.durability ?? 'full',
        fullSync: background ? 'background' : 'inline',
        busyTimeoutMs: busyTimeoutMs(options),
        groupCommit: options.groupCommit, sqlChecksums: this.checksumsInSqlite,
      }, this.counters, onHeads, options.startWriter);
      this.groups = this.appendThread;
    } else {
      this.appendThread = undefined;
      this.groups = new GroupCommit(db, this.st, this.walSync, this.counters, options.groupCommit, onHeads, undefined, this.checksumsInSqlite);
    }
    this.writes = sessionWrites(db, this.st);
    this.structure = structureReads(db, this.st, this.checksumsInSqlite);
    this.blobs = new SqliteBlobs(db).port(() => this.checkOpen());
  }

  /** Write counters. */
  stats(): SqliteStoreStats {
    return { ...this.counters, syncs: (this.walSync?.completed ?? 0) + (this.appendThread?.syncs ?? 0), handOvers: this.appendThread?.handOvers ?? 0, checkpoints: this.appendThread?.checkpoints ?? 0 };
  }

  /** Resolves once every commit made so far is on disk (at once unless a background sync is owed). */
  private durable(): Promise<void> | undefined {
    const sync = this.walSync;
    if (sync === undefined || !sync.owed) return undefined;
    return sync.request();
  }

  /** Commits made so far are durable, then the store is checked open (reads run on durable state only). */
  private async readable(): Promise<void> {
    this.checkOpen();
    const wait = this.durable();
    if (wait !== undefined) {
      await wait;
      this.checkOpen();
    }
  }

  async createSession(record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota, blobs?: BlobWrites): Promise<CreateOutcome> {
    this.checkOpen();
    const id = record.header.id;
    this.guard.checkIntact(id);
    checkAscendingSeqs(id, events, 0);
    const { rows, dataBytes } = encodeEvents(id, events, true, undefined, blobs?.tokenFigures);
    const last = events[events.length - 1];
    const outcome = this.writes.createTxn.immediate(record, rows, last === undefined ? 0 : last.seq + 1, dataBytes, quota, blobs);
    if (outcome.kind === 'created') {
      this.counters.commits++;
      await this.committed();
      if (record.pending === undefined) this.guard.recordHead(id);
    }
    return outcome;
  }

  async getSession(id: string): Promise<SessionRecord | undefined> {
    // Not refused for a damaged session that has a record (it is how the app finds it to delete
    // it); one missing from the database answers its damage (DATA_LOSS, not NOT_FOUND).
    await this.readable();
    const row = this.st.selectSession.get(id) as RawSession | undefined;
    if (row === undefined && this.guard.missing.has(id)) throw this.guard.damaged.get(id)!;
    return this.seen(row === undefined ? undefined : decodeSession(row));
  }

  async listSessions(query: {
    tenant?: string;
    labels?: Readonly<Record<string, string>>;
    pageSize: number;
    pageToken?: string;
  }): Promise<SessionPage> {
    await this.readable();
    checkPageSize(query.pageSize);
    const after = query.pageToken ? decodePageToken(query.pageToken) : { createdAt: FIRST_PAGE_CREATED_AT, id: '' };
    const hasLabels = query.labels !== undefined && Object.keys(query.labels).length > 0;
    const hasTenant = query.tenant !== undefined;
    const statement = this.st.listStatements[(hasTenant ? 2 : 0) + (hasLabels ? 1 : 0)]!;
    const params: Record<string, unknown> = { createdAt: after.createdAt, id: after.id, limit: query.pageSize + 1 };
    if (hasTenant) params.tenant = query.tenant;
    if (hasLabels) params.labels = JSON.stringify(query.labels);
    let records = (statement.all(params) as RawSession[]).map(decodeSession);
    // Damaged sessions missing from the database are listed in their place (newest first).
    if (!hasLabels) records = this.guard.withMissing(records, after, query.tenant, query.pageSize + 1);
    const more = records.length > query.pageSize;
    const sessions = more ? records.slice(0, query.pageSize) : records;
    const last = sessions[sessions.length - 1];
    return this.seen({
      sessions,
      nextPageToken: more && last !== undefined ? encodePageToken({ createdAt: last.header.createdAt, id: last.header.id }) : '',
    });
  }

  async deleteSession(id: string, expected?: DeleteExpectation): Promise<boolean> {
    this.checkOpen();
    const before = this.st.selectDigest.get(id) as [number, number, number] | undefined;
    const deleted = this.writes.deleteTxn.immediate(id, expected);
    // A refused session is cleared, a deleted one recorded (head-guard.ts).
    const cleared = this.guard.deleted(id, before, deleted, expected !== undefined);
    if (deleted) {
      this.counters.commits++;
      await this.committed();
    }
    return deleted || cleared;
  }

  async deletePending(id: string, owner: string): Promise<boolean> {
    this.checkOpen();
    // A pending session is not in the heads record (it is recorded when published).
    const deleted = this.writes.deletePendingTxn.immediate(id, owner);
    if (deleted) {
      this.counters.commits++;
      await this.committed();
    }
    return deleted;
  }

  append(sessionId: string, req: AppendRequest): Promise<AppendOutcome> {
    return new Promise<AppendOutcome>((resolve, reject) => {
      this.checkOpen();
      this.guard.checkIntact(sessionId);
      checkAscendingSeqs(sessionId, req.events, req.expectedNextSeq);
      // Encode outside the write transaction: the shared transaction only binds and inserts (the
      // writer thread computes the rows' checksums itself).
      const { rows, dataBytes } = encodeEvents(sessionId, req.events, this.appendThread === undefined && !this.checksumsInSqlite, req.dataTexts, req.blobs?.tokenFigures);
      const done = this.appendThread === undefined ? undefined : this.ownInflight.add(sessionId, req.events.length === 0 ? req.expectedNextSeq : req.events[req.events.length - 1]!.seq + 1);
      this.groups.enqueue(queuedAppend(sessionId, req, rows, dataBytes, this.now(), resolve, reject, done));
    });
  }

  async getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined> {
    await this.readable();
    if (this.st.selectVisible.get(sessionId) === undefined) return undefined;
    const stored = this.st.selectIdempotent.get(sessionId, key) as StoredIdempotent | undefined;
    return this.seen(stored === undefined ? undefined : decodeIdempotent(stored));
  }

  async readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]> {
    await this.readable();
    return this.seen(this.selectEvents(sessionId, query).map((r) => decodeEvent(sessionId, r)));
  }

  async readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]> {
    await this.readable();
    return this.seen(this.selectEvents(sessionId, query).map((r) => decodeEventText(sessionId, r)));
  }

  async readEncodedEventPage(sessionId: string, query: ReadEventsQuery, budgetBytes: number): Promise<EncodedEventPage | undefined> {
    await this.readable();
    this.guard.checkIntact(sessionId);
    const pages = this.st.readPage;
    if (pages === undefined) return undefined;
    if (query.limit <= 0 || this.st.selectVisible.get(sessionId) === undefined) return this.seen({ bytes: new Uint8Array(0), count: 0, nextSeq: undefined, firstSeq: undefined, lastSeq: undefined });
    const forward = query.direction === 'forward';
    const types = query.types !== undefined && query.types.length > 0 ? JSON.stringify(query.types) : undefined;
    const stmt = types === undefined ? (forward ? pages.forward : pages.backward) : forward ? pages.forwardTyped : pages.backwardTyped;
    const params = { limit: query.limit, budget: budgetBytes, sessionId, fromSeq: query.fromSeq, rows: query.limit + 1, ...(types === undefined ? {} : { types }) };
    return this.seen(decodeEventPage(sessionId, stmt.get(params) as Buffer));
  }

  private selectEvents(sessionId: string, query: ReadEventsQuery): RawEvent[] {
    this.guard.checkIntact(sessionId);
    if (query.limit <= 0 || this.st.selectVisible.get(sessionId) === undefined) return [];
    const forward = query.direction === 'forward';
    const types = query.types !== undefined && query.types.length > 0 ? query.types : undefined;
    return (
      types === undefined
        ? (forward ? this.st.readForward : this.st.readBackward).all(sessionId, query.fromSeq, query.limit)
        : (forward ? this.st.readForwardTyped : this.st.readBackwardTyped).all(sessionId, query.fromSeq, JSON.stringify(types), query.limit)
    ) as RawEvent[];
  }

  async getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    await this.readable();
    this.guard.checkIntact(sessionId);
    if (seqs.length === 0 || this.st.selectVisible.get(sessionId) === undefined) return [];
    return this.seen((this.st.selectBySeqs.all(sessionId, JSON.stringify(seqs)) as RawEvent[]).map((r) => decodeEvent(sessionId, r)));
  }

  async readStructure(sessionId: string, fromSeq: number, limit = Number.MAX_SAFE_INTEGER): Promise<StructuralRow[]> {
    await this.readable();
    this.guard.checkIntact(sessionId);
    if (this.st.selectVisible.get(sessionId) === undefined) return [];
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
    return this.seen(this.structure.structure(sessionId, fromSeq, limit));
  }

  /** Issue #37, the cold open: a whole log's structure in columns, checked as readStructure(id, 0) (structure-columns.ts). */
  async readStructureColumns(sessionId: string): Promise<StructuralColumns> {
    await this.readable();
    this.guard.checkIntact(sessionId);
    return this.seen(this.structure.columns(sessionId));
  }

  async readSurfaceStructure(sessionId: string, toSeq: number): Promise<SurfaceStructure> {
    await this.readable();
    if (this.st.selectVisible.get(sessionId) === undefined) return { rows: [], headSeq: undefined };
    this.guard.checkIntact(sessionId);
    return this.seen(this.structure.surfaceStructure(sessionId, toSeq));
  }

  /** Issue #37: the token figures from a seq, over events_structure (token-figures.ts). */
  async readTokenFigures(sessionId: string, fromSeq: number): Promise<TokenFigureRows> {
    await this.readable();
    this.guard.checkIntact(sessionId);
    return this.seen(tokenFigureRows(this.st.selectTokenFigures.get(sessionId, fromSeq) as TokenFigureRaw));
  }

  async *scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]> {
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    let next = fromSeq;
    for (;;) {
      await this.readable();
      this.guard.checkIntact(sessionId);
      // Re-checked per batch: a session deleted mid-scan ends the scan instead of yielding a torn tail.
      if (this.st.selectVisible.get(sessionId) === undefined) return;
      const events = (this.st.readForward.all(sessionId, next, batchSize) as RawEvent[]).map((r) => decodeEvent(sessionId, r));
      if (events.length === 0) return;
      next = events[events.length - 1]!.seq + 1;
      yield await this.seen(events);
      if (events.length < batchSize) return;
    }
  }

  async publishSession(id: string, owner: string, metadata?: PublishMetadata): Promise<void> {
    this.checkOpen();
    const published = this.writes.publishTxn.immediate(id, owner, metadata);
    if (!published) {
      const pending = this.st.selectPendingHead.get(id) as [number, string | null, string] | undefined;
      throw new StoreUsageError(
        pending === undefined
          ? `cannot publish session ${id}: no such pending session`
          : `cannot publish session ${id}: the pending session is owned by another importer (${pending[1]})`,
      );
    }
    this.counters.commits++;
    await this.committed();
    this.guard.recordHead(id);
  }

  async appendPending(sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): Promise<PendingChunkOutcome> {
    this.checkOpen();
    const outcome = this.writes.appendPendingTxn.immediate(sessionId, events, opts);
    if (outcome.kind === 'appended') {
      this.counters.commits++;
      await this.committed();
    }
    return outcome;
  }

  async getPendingEvents(sessionId: string, owner: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    await this.readable();
    const pending = this.st.selectPendingHead.get(sessionId) as [number, string | null, string, number] | undefined;
    if (pending === undefined) throw new StoreUsageError(`cannot read back the import chunks of session ${sessionId}: no such pending session`);
    if (pending[1] !== owner) throw new StoreUsageError(`cannot read back the import chunks of session ${sessionId}: the pending session is owned by another importer (${pending[1]})`);
    if (seqs.length === 0) return [];
    return this.seen((this.st.selectBySeqs.all(sessionId, JSON.stringify(seqs)) as RawEvent[]).map((r) => decodeEvent(sessionId, r)));
  }

  async getTenantUsage(tenant: string): Promise<TenantUsage> {
    await this.readable();
    const row = this.st.selectTenant.get(tenant) as [number, number] | undefined;
    return this.seen({ sessions: row?.[0] ?? 0, dataBytes: row?.[1] ?? 0 });
  }

  /** Every tenant's stored session count (the palimpsest_tenant_sessions gauge). */
  async tenantSessionCounts(): Promise<ReadonlyMap<string, number>> {
    await this.readable();
    const rows = this.st.selectTenantCounts.all() as [string, number][];
    return this.seen(new Map(rows));
  }

  async updateLabels(id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome> {
    this.checkOpen();
    this.guard.checkIntact(id);
    const outcome = this.writes.updateLabelsTxn.immediate(id, labels, expectedVersion);
    if (outcome.kind === 'updated') {
      this.counters.commits++;
      await this.committed();
    }
    return outcome;
  }

  async readFeed(query: FeedQuery): Promise<FeedRecord[]> {
    await this.readable();
    return durableFeedRecords(this.feed.readFeed(query), this.appendThread?.durableFeedPosition(), (r) => this.seen(r));
  }

  async feedEnd(tenant: string): Promise<number> {
    await this.readable();
    return this.seen(this.feed.feedEnd(tenant));
  }

  async feedPrunedUpTo(tenant: string): Promise<number> {
    await this.readable();
    return this.seen(this.feed.feedPrunedUpTo(tenant));
  }

  async pruneFeed(before: number): Promise<number> {
    this.checkOpen();
    return this.feed.pruneFeed(before);
  }

  /**
   * A head watch over this database file: polls `PRAGMA data_version` (which moves only when another connection committed)
   * while sessions are watched, and then reads the watched sessions' heads. Commits of this instance (its writer thread's
   * included) are not reported: the app publishes them itself.
   */
  openHeadWatch(): HeadWatch {
    this.checkOpen();
    const watch = new SqliteHeadWatch(this.db, this.headWatchPollMs, () => this.closed, (id) => this.ownInflight.planned(id));
    this.headWatches.add(watch);
    return watch;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.groups.flush();
    this.closed = true;
    await this.appendThread?.close();
    for (const w of this.headWatches) await w.close();
    // Settle what the last groups committed before closing (their promises wait for this sync).
    const sync = this.walSync;
    if (sync !== undefined) {
      if (sync.owed) await sync.request().catch(() => undefined);
      sync.close();
    }
    this.guard.record?.close();
    this.db.close();
  }

  /** After a commit outside the group path: resolves once it is durable. */
  private committed(): Promise<void> | undefined {
    const sync = this.walSync;
    if (sync === undefined) return undefined;
    sync.owe();
    return sync.request();
  }

  /**
   * Why the heads record cannot be trusted (missing, emptied or damaged while the database held
   * sessions; head-record.ts), until `palimpsest verify --db F --reseal-heads`; undefined when sealed.
   */
  get headsUnsealed(): string | undefined {
    return this.guard.unsealed;
  }

  /** Sessions refused at open because they lost acknowledged commits (head-record.ts). */
  get damagedSessions(): readonly DataCorruptedError[] {
    return [...this.guard.damaged.values()];
  }

  /** Start-up (main.ts): the writer thread's connection opens, and what open found is logged. */
  async start(log: StoreStartLog): Promise<void> {
    // The writer thread opens its connection now: a database it cannot open fails the start.
    try {
      await this.writerReady();
    } catch (e) {
      await this.close().catch(() => undefined);
      throw e;
    }
    reportOpen(this, log);
  }

  private checkOpen(): void {
    if (this.closed) throw new StoreClosedError();
    // Fail-stop after a failed WAL sync: what the page cache holds is unknown, so neither reads
    // nor writes are served any more (restart the process; the database recovers from its WAL).
    if (this.walSync?.broken) throw this.walSync.error;
    const writer = this.appendThread?.failure;
    if (writer !== undefined) throw writer;
  }

  /** With the writer thread: starts it and resolves once its connection is open (rejects with a StorageError `unavailable` if it cannot open the file). Without one: resolves at once. */
  async writerReady(): Promise<void> {
    this.checkOpen();
    await this.appendThread?.ready();
  }

  /** What a read answers: at once, or (writer thread, background sync) once every append group the read may have seen is durable. */
  private seen<T>(value: T): T | Promise<T> {
    const wait = this.appendThread?.visible();
    return wait === undefined ? value : wait.then(() => value);
  }
}

// The port methods report a full disk and I/O failures as StorageError (sqlite-errors.ts).
classifyStoreErrors(SqliteSessionStore.prototype, [
  'createSession', 'getSession', 'listSessions', 'deleteSession', 'deletePending', 'append', 'getIdempotent', 'readEvents', 'readEventTexts',
  'readEncodedEventPage', 'getEvents', 'readStructure', 'readSurfaceStructure', 'readTokenFigures', 'scanEvents', 'publishSession', 'appendPending', 'getPendingEvents',
  'getTenantUsage', 'updateLabels', 'readFeed', 'feedEnd', 'feedPrunedUpTo', 'pruneFeed', 'close',
], sqliteStorageError);
