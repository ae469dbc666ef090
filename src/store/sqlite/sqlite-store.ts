/**
 * The embedded SQLite implementation of the store port (better-sqlite3: synchronous calls, so
 * every transaction below runs without an `await` inside; one connection, plus the writer
 * thread's when appends are written by one).
 *
 * The folder: open-database.ts (file identity and version checks), schema.ts, statements.ts
 * (prepared once), row-codec.ts + codec.ts (rows <-> events), group-commit.ts (appends of one
 * event-loop turn share a transaction: a private optimisation, each call is a compare-and-set on
 * the stored head and writer token), session-writes.ts (create/delete/import-chunk transactions
 * with the tenant counters), wal-sync.ts (background durability), head-watch.ts (commits of other
 * connections), append-thread*.ts (the writer thread, its messages and commit gate). This file is
 * the port.
 */
import fs from 'node:fs';
import Database from 'better-sqlite3';
import type {
  AppendOutcome,
  AppendRequest,
  CreateOutcome,
  CreateQuota,
  DeleteExpectation,
  EncodedEventPage,
  FeedChangeKind,
  FeedQuery,
  FeedRecord,
  HeadWatch,
  PublishMetadata,
  UpdateLabelsOutcome,
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
  SurfaceStructure,
  TenantUsage,
} from '../../app/store-port.js';
import type { SessionEvent } from '../../domain/event.js';
import { checkPageSize, decodePageToken, encodePageToken } from '../page-token.js';
import { StoreClosedError, StoreUsageError, checkAscendingSeqs, classifyStoreErrors } from '../store-errors.js';
import { sqliteStorageError } from './sqlite-errors.js';
import { SqliteHeadWatch } from './head-watch.js';
import { busyTimeoutMs, openDatabase } from './open-database.js';
import type { MigrationOptions } from '../migration-options.js';
import { loadChecksumExtension, type ChecksumExtension, type NativeChecksums } from './native-checksums.js';
import {
  LINE_FORMAT, TypeTable, decodeEvent, decodeEventPage, decodeEventText, decodeIdempotent, decodeSession, decodeStructureLine, encodeEvents,
  type RawEvent, type RawSession, type StoredIdempotent,
} from './row-codec.js';
import { prepareStatements, type Statements } from './statements.js';
import { WalSync } from './wal-sync.js';
import { GroupCommit, type AppendQueue } from './group-commit.js';
import { AppendThread } from './append-thread.js';
import type { WriterConfig } from './append-thread-wire.js';
import type { Worker } from 'node:worker_threads';
import { sessionWrites, type SessionWrites } from './session-writes.js';
import { DataCorruptedError } from '../../app/storage-error.js';
import { HeadRecord, readHeads, readHeadsFile, type RecordedHead } from './head-record.js';

/** Options of {@link SqliteSessionStore}. */
export interface SqliteStoreOptions extends MigrationOptions {
  /** Database file path (created when missing). `:memory:` works for throwaway stores. */
  readonly path: string;
  /**
   * 'full' (default): synchronous=FULL, every acknowledged append survives power loss.
   * 'normal': synchronous=NORMAL, WAL commits are not fsynced; a power loss may drop the last
   * acknowledged transactions (never corrupts the database).
   */
  readonly durability?: 'full' | 'normal';
  /**
   * How durability 'full' syncs (ignored for 'normal'):
   * 'background' (default): the connection runs synchronous=NORMAL and the store fdatasyncs the
   * WAL file on the libuv thread pool after each commit; calls settle (and reads run) only once
   * the sync that covers their commit completed. The event loop keeps decoding, planning and
   * committing the next group while the disk syncs, and one sync covers every group committed
   * meanwhile. Same guarantee as 'inline': nothing acknowledged or read is lost on power loss.
   * 'inline': synchronous=FULL, SQLite fsyncs inside COMMIT, blocking the event loop.
   */
  readonly fullSync?: 'background' | 'inline';
  /** How long a write waits for another process's lock before failing, ms (default 5000). */
  readonly busyTimeoutMs?: number;
  /**
   * When queued appends are flushed: 'immediate' (default; setImmediate, batches everything that
   * arrived in the current event-loop turn including the rest of the I/O poll phase) or
   * 'microtask' (queueMicrotask, batches only what the current macrotask enqueued). With the
   * background sync a transaction takes at most GROUP_ROWS (300) rows' worth of calls (at least
   * one call); the rest go in the next turn's (group-commit.ts).
   */
  readonly groupCommit?: 'immediate' | 'microtask';
  /** Clock for idempotency records and pending-import leases (default Date.now). */
  readonly now?: () => number;
  /** How often a head watch polls `PRAGMA data_version` while sessions are watched, ms (default 150). */
  readonly headWatchPollMs?: number;
  /**
   * Row checksums of reads verified by SQLite with the checksum extension (native-checksums.ts):
   * 'auto' (default) when it is built, 'require' (fail to open without it), 'off' (in JavaScript).
   * The rule is the same either way; only the cost differs.
   */
  readonly nativeChecksums?: NativeChecksums;
  /**
   * Who writes appends: 'inline' (default) on the store's own connection, in the event loop;
   * 'thread': a worker thread on a connection of its own (append-thread.ts), so inserts, COMMIT
   * and fsync overlap the event loop's work (the server's choice). Needs a WAL database file:
   * `:memory:` and files without WAL write inline.
   */
  readonly appendWriter?: 'inline' | 'thread';
  /** Starts the writer thread (tests run a scripted one; default: append-thread-worker). */
  readonly startWriter?: (config: WriterConfig) => Worker;
}

/** Write counters, for tests and metrics. */
export interface SqliteStoreStats {
  /** Write transactions committed (group commits, creates, deletes, import chunks, publishes). */
  readonly commits: number;
  /** Group-commit transactions (one per flush of the append queue, or per GROUP_ROWS part of it with the background sync). */
  readonly groupCommits: number;
  /** `append` calls that appended events. */
  readonly appends: number;
  /** Largest number of `append` calls flushed in one transaction. */
  readonly maxGroupSize: number;
  /** Background WAL syncs (fdatasync calls) completed. */
  readonly syncs: number;
}


/** Deleted incarnations remembered against late head lines (see deletedHere). */
const DELETED_KEPT = 10_000;
/** Rows per structural-scan chunk. */
const STRUCTURE_CHUNK = 4096;
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
  private readonly db: Database.Database;
  private readonly now: () => number;
  private closed = false;
  private readonly counters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0 };
  /** Background WAL sync (durability 'full', fullSync 'background'); undefined otherwise. */
  private readonly walSync: WalSync | undefined;
  private readonly headWatchPollMs: number;
  private readonly headWatches = new Set<SqliteHeadWatch>();
  private readonly st: Statements;
  private readonly groups: AppendQueue;
  /** The writer thread, when appends are written by one. */
  private readonly appendThread: AppendThread | undefined;
  /**
   * Incarnations (`<created_at> <id>`) this store deleted: a head line of theirs that arrives after
   * the delete is not recorded. Cleared when the id is created or published again (a re-import
   * keeps its created_at).
   */
  private readonly deletedHere = new Set<string>();
  /** Writer thread: this store's appends in flight per session, and the highest next seq they planned (for the head watch). */
  private readonly ownInflight = new Map<string, { count: number; planned: number }>();
  private readonly writes: SessionWrites;

  private readonly structureTxn: Database.Transaction<(sessionId: string, fromSeq: number, limit: number) => StructuralRow[]>;
  private readonly surfaceStructureTxn: Database.Transaction<(sessionId: string, toSeq: number) => SurfaceStructure>;
  /** The second record of session heads (head-record.ts); undefined for `:memory:`. */
  private readonly headRecord: HeadRecord | undefined;
  /** Sessions that lost acknowledged commits (found at open), refused until deleted. */
  private readonly damaged = new Map<string, DataCorruptedError>();
  /**
   * The damaged sessions missing from the database altogether: their recorded head. getSession
   * answers them with their damage and listSessions lists them (issue #33 item 4), so every RPC
   * says DATA_LOSS and both verifies find them, until they are deleted.
   */
  private readonly missing = new Map<string, RecordedHead>();

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
    this.st = prepareStatements(db, this.checksumsInSqlite);
    // SQLite puts the WAL next to the real database file (symlinks resolved): sync that file.
    const real = this.db.memory ? undefined : fs.realpathSync(this.db.name);
    // Durability 'normal' may lose acknowledged commits on power loss by design: no second record.
    this.headRecord = real === undefined || options.durability === 'normal' ? undefined : this.openHeadRecord(`${real}-heads`);
    const heads = this.headRecord;
    this.walSync = background && wal && real !== undefined ? new WalSync(`${real}-wal`) : undefined;
    const onHeads = (moved: readonly (readonly [string, number, number])[]): void => {
      heads?.heads(this.deletedHere.size === 0 ? moved : moved.filter(([id, createdAt]) => !this.deletedHere.has(`${createdAt} ${id}`)));
      for (const w of this.headWatches) for (const [id, createdAt, next] of moved) w.own(id, createdAt, next);
    };
    if (options.appendWriter === 'thread' && wal && real !== undefined) {
      this.appendThread = new AppendThread({
        path: real,
        durability: options.durability ?? 'full',
        fullSync: background ? 'background' : 'inline',
        busyTimeoutMs: busyTimeoutMs(options),
        groupCommit: options.groupCommit,
      }, this.counters, onHeads, options.startWriter);
      this.groups = this.appendThread;
    } else {
      this.appendThread = undefined;
      this.groups = new GroupCommit(db, this.st, this.walSync, this.counters, options.groupCommit, onHeads);
    }

    this.writes = sessionWrites(db, this.st);

    this.structureTxn = db.transaction((sessionId: string, fromSeq: number, limit: number): StructuralRow[] => {
      const types = new TypeTable();
      const scan = { sessionId, digest: 0 };
      const out: StructuralRow[] = [];
      let next = fromSeq;
      for (;;) {
        const want = Math.min(STRUCTURE_CHUNK, limit - out.length);
        const lines = this.st.selectStructure.all(sessionId, next, want) as string[];
        for (let i = 0; i < lines.length; i++) out.push(decodeStructureLine(lines[i]!, types, scan));
        if (lines.length < want && fromSeq === 0) {
          // A whole log (the cold open): its rows must chain to the session's recorded digest.
          const stored = this.st.selectDigest.get(sessionId) as [number, number, number] | undefined;
          if (stored !== undefined && stored[0] !== scan.digest) {
            throw new DataCorruptedError(sessionId, undefined,
              `session ${sessionId}: its stored events do not match the session's digest (rows missing, moved or rewritten on disk); ` +
              'the session is not served; restore it from a backup (palimpsest verify reports the details)');
          }
        }
        if (lines.length < want || out.length >= limit) return out;
        next = out[out.length - 1]!.seq + 1;
      }
    });

    this.surfaceStructureTxn = db.transaction((sessionId: string, toSeq: number): SurfaceStructure => {
      const types = new TypeTable();
      // The digest of a subset of rows means nothing: only the row checksums are checked here.
      const scan = { sessionId, digest: 0 };
      const lines = this.st.selectSurfaceStructure.all(sessionId, toSeq) as string[];
      const rows = new Array<StructuralRow>(lines.length);
      for (let i = 0; i < lines.length; i++) {
        // Checked with every column, answered as the port says: a surface replay needs no citations.
        const r = decodeStructureLine(lines[i]!, types, scan);
        rows[i] = r.sourceEventSeqs === undefined && r.ignorable === undefined ? r : { seq: r.seq, type: r.type, surfaceOp: r.surfaceOp! };
      }
      const head = this.st.selectHeadAtOrBefore.get(sessionId, toSeq) as number | null;
      return { rows, headSeq: head ?? undefined };
    });

  }

  /** Write counters. */
  stats(): SqliteStoreStats {
    return { ...this.counters, syncs: (this.walSync?.completed ?? 0) + (this.appendThread?.syncs ?? 0) };
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

  async createSession(record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota): Promise<CreateOutcome> {
    this.checkOpen();
    const id = record.header.id;
    this.checkIntact(id);
    checkAscendingSeqs(id, events, 0);
    const { rows, dataBytes } = encodeEvents(id, events);
    const last = events[events.length - 1];
    const outcome = this.writes.createTxn.immediate(record, rows, last === undefined ? 0 : last.seq + 1, dataBytes, quota);
    if (outcome.kind === 'created') {
      this.counters.commits++;
      await this.committed();
      if (record.pending === undefined) this.recordHead(id);
    }
    return outcome;
  }

  async getSession(id: string): Promise<SessionRecord | undefined> {
    // Not refused for a damaged session that has a record (it is how the app finds it to delete
    // it); one missing from the database answers its damage (DATA_LOSS, not NOT_FOUND).
    await this.readable();
    const row = this.st.selectSession.get(id) as RawSession | undefined;
    if (row === undefined && this.missing.has(id)) throw this.damaged.get(id)!;
    return this.seen(row === undefined ? undefined : decodeSession(row));
  }

  /** The record listSessions shows for a damaged session missing from the database. */
  private missingRecord(id: string, head: RecordedHead): SessionRecord {
    const slash = id.indexOf('/');
    return {
      header: { version: 0, id, createdAt: head.createdAt }, labels: {}, tenant: slash < 0 ? '' : id.slice(0, slash), nextSeq: head.nextSeq,
      eventCount: head.nextSeq, dataBytes: 0, strict: false, pairingGuard: false, writer: '', metadataVersion: 0,
    };
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
    if (this.missing.size > 0 && !hasLabels) {
      // Damaged sessions missing from the database are listed in their place (newest first).
      const before = (r: { header: { createdAt: number; id: string } }): boolean =>
        r.header.createdAt < after.createdAt || (r.header.createdAt === after.createdAt && r.header.id < after.id);
      const extra = [...this.missing].map(([id, head]) => this.missingRecord(id, head))
        .filter((r) => before(r) && (!hasTenant || r.tenant === query.tenant) && this.st.selectSession.get(r.header.id) === undefined);
      if (extra.length > 0) {
        records = [...records, ...extra].sort((x, y) => y.header.createdAt - x.header.createdAt || (x.header.id < y.header.id ? 1 : x.header.id > y.header.id ? -1 : 0));
        records = records.slice(0, query.pageSize + 1);
      }
    }
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
    // A conditional delete (retention) that was refused leaves a damaged session as it is.
    const damage = deleted || expected === undefined ? this.damaged.get(id) : undefined;
    if (damage !== undefined) {
      // A refused session that is gone from the database: deleting it is how an operator clears it.
      this.damaged.delete(id);
      this.missing.delete(id);
      const recorded = readHeads(this.headRecord!.path).get(id);
      if (recorded !== undefined) this.headRecord!.deleted(id, recorded.createdAt);
    }
    if (deleted) {
      this.counters.commits++;
      if (before !== undefined) {
        this.headRecord?.deleted(id, before[2]);
        // A group of it that committed just before the delete records its head once its sync
        // ended: that line must not bring the deleted incarnation back (see onHeads).
        if (this.headRecord !== undefined) {
          this.deletedHere.add(`${before[2]} ${id}`);
          // Such a line comes within a sync of the delete: the latest deletes are enough.
          if (this.deletedHere.size > DELETED_KEPT) this.deletedHere.delete(this.deletedHere.values().next().value!);
        }
      }
      await this.committed();
    }
    return deleted || damage !== undefined;
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
      this.checkIntact(sessionId);
      checkAscendingSeqs(sessionId, req.events, req.expectedNextSeq);
      // Encode outside the write transaction: the shared transaction only binds and inserts (the
      // writer thread computes the rows' checksums itself).
      const { rows, dataBytes } = encodeEvents(sessionId, req.events, this.appendThread === undefined, req.dataTexts);
      const idempotency = req.idempotency;
      const done = this.appendThread === undefined ? undefined : this.ownAppend(sessionId, req.events.length === 0 ? req.expectedNextSeq : req.events[req.events.length - 1]!.seq + 1);
      this.groups.enqueue({
        sessionId,
        expectedNextSeq: req.expectedNextSeq,
        expectedWriter: req.expectedWriter,
        writer: req.writer,
        rows,
        dataBytes,
        surfaceLength: req.surfaceLength,
        idempotency: idempotency === undefined ? undefined : { key: idempotency.key, requestHash: idempotency.requestHash },
        maxBytes: req.quota?.maxBytes ?? 0,
        at: this.now(),
        resolve: done === undefined ? resolve : (outcome) => {
          done();
          resolve(outcome);
        },
        reject: done === undefined ? reject : (error: unknown) => {
          done();
          reject(error);
        },
      });
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
    this.checkIntact(sessionId);
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
    this.checkIntact(sessionId);
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
    this.checkIntact(sessionId);
    if (seqs.length === 0 || this.st.selectVisible.get(sessionId) === undefined) return [];
    return this.seen((this.st.selectBySeqs.all(sessionId, JSON.stringify(seqs)) as RawEvent[]).map((r) => decodeEvent(sessionId, r)));
  }

  async readStructure(sessionId: string, fromSeq: number, limit = Number.MAX_SAFE_INTEGER): Promise<StructuralRow[]> {
    await this.readable();
    this.checkIntact(sessionId);
    if (this.st.selectVisible.get(sessionId) === undefined) return [];
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
    return this.seen(this.structureTxn(sessionId, fromSeq, limit));
  }

  async readSurfaceStructure(sessionId: string, toSeq: number): Promise<SurfaceStructure> {
    await this.readable();
    if (this.st.selectVisible.get(sessionId) === undefined) return { rows: [], headSeq: undefined };
    this.checkIntact(sessionId);
    return this.seen(this.surfaceStructureTxn(sessionId, toSeq));
  }

  async *scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]> {
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    let next = fromSeq;
    for (;;) {
      await this.readable();
      this.checkIntact(sessionId);
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
    const published = this.db.transaction((): boolean => {
      if (metadata !== undefined) {
        const tenant = this.st.publishMetadata.get(JSON.stringify(metadata.labels), metadata.pairingGuard ? 1 : 0, metadata.bytesDelta, id, owner) as string | undefined;
        if (tenant !== undefined && metadata.bytesDelta !== 0) this.st.addTenant.run(tenant, 0, metadata.bytesDelta);
      }
      return this.st.publishStmt.run(id, owner).changes > 0;
    }).immediate();
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
    this.recordHead(id);
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
    const rows = this.db.prepare('SELECT tenant, session_count FROM tenants').raw().all() as [string, number][];
    return this.seen(new Map(rows));
  }

  async updateLabels(id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome> {
    this.checkOpen();
    this.checkIntact(id);
    const outcome = this.writes.updateLabelsTxn.immediate(id, labels, expectedVersion);
    if (outcome.kind === 'updated') {
      this.counters.commits++;
      await this.committed();
    }
    return outcome;
  }

  async readFeed(query: FeedQuery): Promise<FeedRecord[]> {
    await this.readable();
    if (query.limit <= 0) return [];
    const rows = this.st.readFeed.all(query.tenant, Math.max(0, Math.floor(query.after)), query.limit) as RawFeedRow[];
    return this.seen(rows.map(decodeFeedRow));
  }

  async feedEnd(tenant: string): Promise<number> {
    await this.readable();
    return this.seen((this.st.feedEnd.get(tenant) as number | null) ?? 0);
  }

  /**
   * A head watch over this database file: polls `PRAGMA data_version` (which moves only when
   * another connection committed) while sessions are watched, and then reads the watched
   * sessions' heads. Commits of this instance (its writer thread's included) are not reported: the
   * app publishes them itself.
   */
  openHeadWatch(): HeadWatch {
    this.checkOpen();
    const watch = new SqliteHeadWatch(this.db, this.headWatchPollMs, () => this.closed, (id) => this.ownInflight.get(id)?.planned);
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
    this.headRecord?.close();
    this.db.close();
  }

  /** After a commit outside the group path: resolves once it is durable. */
  private committed(): Promise<void> | undefined {
    const sync = this.walSync;
    if (sync === undefined) return undefined;
    sync.owe();
    return sync.request();
  }



  /** Opens the heads file and refuses the sessions whose stored head is below the recorded one. */
  private openHeadRecord(path: string): HeadRecord {
    // The file is read before the database: every line in it is of a commit the database has.
    const file = readHeadsFile(path);
    let recorded = file.heads;
    // A file missing, empty or damaged while the database holds sessions protects nothing (issue
    // #33 item 5): marked unsealed, reported at every open until an operator re-seals it.
    let unsealed = file.unsealed;
    if (unsealed === undefined && this.db.prepare('SELECT 1 FROM sessions WHERE pending = 0 LIMIT 1').get() !== undefined) {
      if (!file.exists) unsealed = `${path} is missing`;
      else if (file.badLines > 0) unsealed = `${path} is damaged (${file.badLines} lines fail their checksum)`;
      else if (recorded.size === 0 && fs.statSync(path).size === 0) unsealed = `${path} is empty`;
    }
    const current = this.db.prepare('SELECT created_at, next_seq FROM sessions WHERE id = ? AND pending = 0').raw();
    const behind = (id: string, want: RecordedHead): boolean => {
      const row = current.get(id) as [number, number] | undefined;
      return row === undefined || row[0] !== want.createdAt || row[1] < want.nextSeq;
    };
    if ([...recorded].some(([id, want]) => behind(id, want))) {
      // Another process may have deleted a session between the two reads and not yet recorded
      // the delete: read the file again (its delete lines come after its commits) before judging.
      recorded = readHeads(path);
    }
    for (const [id, want] of recorded) {
      const row = current.get(id) as [number, number] | undefined;
      let problem: string | undefined;
      if (row === undefined || row[0] !== want.createdAt) problem = 'is missing from the database';
      if (row === undefined) this.missing.set(id, want);
      else if (row[1] < want.nextSeq) problem = `has head ${row[1] - 1} in the database`;
      if (problem !== undefined) {
        this.damaged.set(id, new DataCorruptedError(id, row !== undefined && row[0] === want.createdAt ? row[1] : undefined,
          `session ${id} ${problem} but its recorded head is ${want.nextSeq - 1}: acknowledged commits were lost ` +
          '(a damaged WAL or database file); the session is refused so its seqs are never reused; restore it from a backup or delete it'));
      }
    }
    const record = new HeadRecord(path, file.unsealed);
    if (unsealed !== undefined && file.unsealed === undefined) record.unseal(unsealed);
    this.headsUnsealed = unsealed;
    record.compact(() => {
      const all = new Map<string, RecordedHead>();
      for (const [id, created, next] of this.db.prepare('SELECT id, created_at, next_seq FROM sessions WHERE pending = 0').raw().iterate() as Iterable<[string, number, number]>) {
        if (!this.damaged.has(id)) all.set(id, { createdAt: created, nextSeq: next });
      }
      for (const id of this.damaged.keys()) all.set(id, recorded.get(id)!);
      return all;
    });
    return record;
  }

  /**
   * Why the heads record cannot be trusted (missing, emptied or damaged while the database held
   * sessions; head-record.ts), until `palimpsest verify --db F --reseal-heads`; undefined when sealed.
   */
  headsUnsealed: string | undefined;

  /** Sessions refused at open because they lost acknowledged commits (head-record.ts). */
  get damagedSessions(): readonly DataCorruptedError[] {
    return [...this.damaged.values()];
  }

  /** Throws for a session refused at open. */
  private checkIntact(sessionId: string): void {
    const damage = this.damaged.get(sessionId);
    if (damage !== undefined) throw damage;
  }

  /** Records a created or published session's head. */
  private recordHead(id: string): void {
    if (this.headRecord === undefined) return;
    const row = this.st.selectDigest.get(id) as [number, number, number] | undefined;
    if (row === undefined) return;
    this.deletedHere.delete(`${row[2]} ${id}`);
    this.headRecord.heads([[id, row[2], row[1]]]);
  }

  private checkOpen(): void {
    if (this.closed) throw new StoreClosedError();
    // Fail-stop after a failed WAL sync: what the page cache holds is unknown, so neither reads
    // nor writes are served any more (restart the process; the database recovers from its WAL).
    if (this.walSync?.broken) throw this.walSync.error;
    const writer = this.appendThread?.failure;
    if (writer !== undefined) throw writer;
  }

  /**
   * With the writer thread: starts it and resolves once its connection is open (rejects with a
   * StorageError `unavailable` if it cannot open the file). Without one: resolves at once.
   */
  async writerReady(): Promise<void> {
    this.checkOpen();
    await this.appendThread?.ready();
  }

  /** Counts an append of this store in flight for the head watch; returns what to call when it settles. */
  private ownAppend(sessionId: string, planned: number): () => void {
    const own = this.ownInflight.get(sessionId);
    if (own === undefined) this.ownInflight.set(sessionId, { count: 1, planned });
    else {
      own.count++;
      if (planned > own.planned) own.planned = planned;
    }
    return () => {
      const o = this.ownInflight.get(sessionId);
      if (o !== undefined && --o.count === 0) this.ownInflight.delete(sessionId);
    };
  }

  /**
   * What a read answers: at once, or (writer thread, background sync) once every append group
   * the read may have seen is durable: the thread's COMMIT is visible before its sync ends.
   */
  private seen<T>(value: T): T | Promise<T> {
    const wait = this.appendThread?.visible();
    return wait === undefined ? value : wait.then(() => value);
  }
}

/** A feed row as selected (statements.ts readFeed). */
type RawFeedRow = [number, string, string, string, number, number, number, number, string, string, string | null, number];

function decodeFeedRow(r: RawFeedRow): FeedRecord {
  return {
    position: r[0], tenant: r[1], sessionId: r[2], kind: r[3] as FeedChangeKind, createdAt: r[4], nextSeq: r[5], eventCount: r[6],
    surfaceLength: r[7], eventTypes: JSON.parse(r[8]) as string[], labels: JSON.parse(r[9]) as Record<string, string>,
    previousLabels: r[10] === null ? undefined : (JSON.parse(r[10]) as Record<string, string>), time: r[11],
  };
}

// The port methods report a full disk and I/O failures as StorageError (sqlite-errors.ts).
classifyStoreErrors(SqliteSessionStore.prototype, [
  'createSession', 'getSession', 'listSessions', 'deleteSession', 'deletePending', 'append', 'getIdempotent', 'readEvents', 'readEventTexts',
  'readEncodedEventPage', 'getEvents', 'readStructure', 'readSurfaceStructure', 'scanEvents', 'publishSession', 'appendPending', 'getPendingEvents',
  'getTenantUsage', 'updateLabels', 'readFeed', 'feedEnd', 'close',
], sqliteStorageError);
