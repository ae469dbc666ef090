/**
 * The embedded SQLite implementation of the store port (better-sqlite3: one connection,
 * synchronous calls, so every transaction below runs without an `await` inside).
 *
 * Group commit: `append` calls are queued and flushed together in ONE write transaction, on the
 * next `setImmediate` turn by default (so requests that arrive in the same I/O poll phase share
 * a commit, and its fsync under durability 'full'). Inside the shared transaction a call that
 * fails unexpectedly is rolled back alone (a single INSERT by SQLite's statement rollback, a
 * multi-statement call by its own SAVEPOINT); conflicts, duplicates and unknown sessions are
 * detected before writing anything. Every call's promise settles only after the shared COMMIT
 * returned. Group commit is a private optimisation: each call is a compare-and-set on the stored
 * head and writer token (tracked in JS inside the transaction, which holds the write lock), so the
 * outcome of a call never depends on which calls share its transaction or arrive before it.
 */
import fs from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type {
  AppendOutcome,
  AppendRequest,
  CreateOutcome,
  CreateQuota,
  HeadWatch,
  IdempotencyRecord,
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
import { storedSessionBytes } from '../../app/store-port.js';
import type { Json, SessionEvent, SessionHeader, SurfaceOp } from '../../domain/event.js';
import { jsonTextOf } from '../../domain/json.js';
import { checkPageSize, decodePageToken, encodePageToken } from '../page-token.js';
import { StoreClosedError, StoreOpenError, StoreUsageError, checkAscendingSeqs } from '../store-errors.js';
import { SqliteHeadWatch } from './head-watch.js';
import { decodeSeqs, decodeSeqsHex, decodeSurfaceOp, encodeSeqs, encodeSurfaceOp } from './codec.js';
import { APPLICATION_ID, SCHEMA_SQL, SCHEMA_VERSION } from './schema.js';

/** Options of {@link SqliteSessionStore}. */
export interface SqliteStoreOptions {
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
   * 'microtask' (queueMicrotask, batches only what the current macrotask enqueued).
   */
  readonly groupCommit?: 'immediate' | 'microtask';
  /** Clock for idempotency records and pending-import leases (default Date.now). */
  readonly now?: () => number;
  /** How often a head watch polls `PRAGMA data_version` while sessions are watched, ms (default 150). */
  readonly headWatchPollMs?: number;
}

/** Write counters, for tests and metrics. */
export interface SqliteStoreStats {
  /** Write transactions committed (group commits, creates, deletes, import chunks, publishes). */
  readonly commits: number;
  /** Group-commit transactions (one per flush of the append queue). */
  readonly groupCommits: number;
  /** `append` calls that appended events. */
  readonly appends: number;
  /** Largest number of `append` calls flushed in one transaction. */
  readonly maxGroupSize: number;
  /** Background WAL syncs (fdatasync calls) completed. */
  readonly syncs: number;
}

/** One encoded event row, ready to bind. */
type EventRow = [
  sessionId: string,
  seq: number,
  type: string,
  time: number,
  data: string,
  sourceEventSeqs: Buffer | null,
  surfaceOp: string | null,
  ignorable: 1 | null,
];

/** A raw event row as selected: seq, type, time, data, source_event_seqs, surface_op, ignorable. */
type RawEvent = [number, string, number, string, Buffer | null, string | null, number | null];
/** A raw session row, in SESSION_COLUMNS order. */
type RawSession = [
  string,
  number,
  number,
  string | null,
  string | null,
  number | null,
  string | null,
  number | null,
  string | null,
  string,
  string,
  number,
  number,
  number,
  number,
  number,
  string,
];

/** A session's head while a group transaction runs. */
interface GroupHead {
  next: number;
  writer: string;
  readonly tenant: string;
  count: number;
  bytes: number;
  changed: boolean;
}

/** A tenant's stored bytes while a group transaction runs (read on first need) and what the group adds. */
interface GroupTenant {
  stored: number | undefined;
  added: number;
}

/** A stored idempotency row: request_hash, seqs, surface_length. */
type StoredIdempotent = [string, Buffer, number];

const APPENDED = Object.freeze({ kind: 'appended' } as const);
const CREATED: CreateOutcome = Object.freeze({ kind: 'created' });
const EXISTS: CreateOutcome = Object.freeze({ kind: 'exists' });
const NOT_FOUND: AppendOutcome = Object.freeze({ kind: 'not-found' });

interface QueuedAppend {
  readonly sessionId: string;
  readonly expectedNextSeq: number;
  readonly expectedWriter: string;
  readonly writer: string;
  readonly rows: EventRow[];
  readonly dataBytes: number;
  readonly surfaceLength: number;
  readonly idempotency: IdempotencyRecord | undefined;
  readonly maxBytes: number;
  readonly resolve: (outcome: AppendOutcome) => void;
  readonly reject: (error: unknown) => void;
}

const SESSION_COLUMNS =
  'id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, labels, tenant, strict, next_seq, event_count, data_bytes, pairing_guard, writer';
const EVENT_COLUMNS = 'seq, type, time, data, source_event_seqs, surface_op, ignorable';
/** Rows per structural-scan chunk. */
const STRUCTURE_CHUNK = 4096;
/** Above every safe-integer createdAt: the first page's cursor. */
const FIRST_PAGE_CREATED_AT = Number.MAX_SAFE_INTEGER + 1;

/** The SQLite implementation of {@link SessionStore}. The constructor opens (and if new, initialises) the file. */
export class SqliteSessionStore implements SessionStore {
  /** The database file path. */
  readonly path: string;
  private readonly db: Database.Database;
  private readonly now: () => number;
  private readonly scheduleFlush: () => void;
  private queue: QueuedAppend[] = [];
  private flushScheduled = false;
  private closed = false;
  private counters = { commits: 0, groupCommits: 0, appends: 0, maxGroupSize: 0, syncs: 0 };
  /** Background WAL sync (durability 'full', fullSync 'background'); undefined otherwise. */
  private readonly walSync: WalSync | undefined;
  private readonly headWatchPollMs: number;
  private readonly headWatches = new Set<SqliteHeadWatch>();

  private readonly insertSession: Database.Statement;
  private readonly selectSession: Database.Statement;
  private readonly selectVisible: Database.Statement;
  private readonly selectHead: Database.Statement;
  private readonly selectPendingHead: Database.Statement;
  private readonly selectForDelete: Database.Statement;
  private readonly selectTenant: Database.Statement;
  private readonly selectTenantBytes: Database.Statement;
  private readonly addTenant: Database.Statement;
  private readonly deleteSessionStmt: Database.Statement;
  private readonly publishStmt: Database.Statement;
  private readonly updateCounters: Database.Statement;
  private readonly updatePending: Database.Statement;
  private readonly insertEvent: Database.Statement;
  private readonly selectIdempotent: Database.Statement;
  private readonly insertIdempotent: Database.Statement;
  private readonly readForward: Database.Statement;
  private readonly readBackward: Database.Statement;
  private readonly readForwardTyped: Database.Statement;
  private readonly readBackwardTyped: Database.Statement;
  private readonly selectBySeqs: Database.Statement;
  private readonly selectStructure: Database.Statement;
  /** List statements indexed by (tenant ? 2 : 0) + (labels ? 1 : 0). */
  private readonly listStatements: readonly Database.Statement[];

  private readonly createTxn: Database.Transaction<(record: NewSession, rows: EventRow[], nextSeq: number, dataBytes: number, quota: CreateQuota | undefined) => CreateOutcome>;
  private readonly deleteTxn: Database.Transaction<(id: string) => boolean>;
  private readonly groupTxn: Database.Transaction<(batch: readonly QueuedAppend[], results: (AppendOutcome | { error: unknown })[]) => void>;
  private readonly writeCallTxn: Database.Transaction<(call: QueuedAppend) => void>;
  private readonly structureTxn: Database.Transaction<(sessionId: string, fromSeq: number, limit: number) => StructuralRow[]>;
  private readonly appendPendingTxn: Database.Transaction<(sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions) => PendingChunkOutcome>;

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
    // SQLite puts the WAL next to the real database file (symlinks resolved): sync that file.
    this.walSync = background && wal ? new WalSync(`${fs.realpathSync(this.db.name)}-wal`) : undefined;
    const flush = (): void => this.flush();
    this.scheduleFlush =
      options.groupCommit === 'microtask'
        ? () => queueMicrotask(flush)
        : () => {
            setImmediate(flush);
          };

    this.insertSession = db.prepare(
      `INSERT INTO sessions (${SESSION_COLUMNS}, pending, pending_owner, lease_until)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO NOTHING`,
    );
    this.selectSession = db.prepare(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = ? AND pending = 0`).raw();
    this.selectVisible = db.prepare('SELECT 1 FROM sessions WHERE id = ? AND pending = 0').pluck();
    this.selectHead = db.prepare('SELECT next_seq, writer, tenant FROM sessions WHERE id = ? AND pending = 0').raw();
    this.selectPendingHead = db.prepare('SELECT next_seq, pending_owner, tenant FROM sessions WHERE id = ? AND pending = 1').raw();
    this.selectForDelete = db.prepare('SELECT tenant, data_bytes FROM sessions WHERE id = ?').raw();
    this.selectTenant = db.prepare('SELECT session_count, data_bytes FROM tenants WHERE tenant = ?').raw();
    this.selectTenantBytes = db.prepare('SELECT data_bytes FROM tenants WHERE tenant = ?').pluck();
    this.addTenant = db.prepare(
      `INSERT INTO tenants (tenant, session_count, data_bytes) VALUES (?, ?, ?)
       ON CONFLICT (tenant) DO UPDATE SET session_count = session_count + excluded.session_count, data_bytes = data_bytes + excluded.data_bytes`,
    );
    this.deleteSessionStmt = db.prepare('DELETE FROM sessions WHERE id = ?');
    this.publishStmt = db.prepare('UPDATE sessions SET pending = 0, pending_owner = NULL, lease_until = NULL WHERE id = ? AND pending = 1 AND pending_owner = ?');
    this.updateCounters = db.prepare(
      'UPDATE sessions SET next_seq = ?, event_count = event_count + ?, data_bytes = data_bytes + ?, writer = ? WHERE id = ?',
    );
    this.updatePending = db.prepare(
      'UPDATE sessions SET next_seq = ?, event_count = event_count + ?, data_bytes = data_bytes + ?, lease_until = ? WHERE id = ?',
    );
    this.insertEvent = db.prepare(
      `INSERT INTO events (session_id, ${EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.selectIdempotent = db.prepare('SELECT request_hash, seqs, surface_length FROM idempotency WHERE session_id = ? AND key = ?').raw();
    this.insertIdempotent = db.prepare(
      'INSERT INTO idempotency (session_id, key, request_hash, seqs, surface_length, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    );
    this.readForward = db
      .prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`)
      .raw();
    this.readBackward = db
      .prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq <= ? ORDER BY seq DESC LIMIT ?`)
      .raw();
    this.readForwardTyped = db
      .prepare(
        `SELECT ${EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq >= ?
         AND type IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT ?`,
      )
      .raw();
    this.readBackwardTyped = db
      .prepare(
        `SELECT ${EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq <= ?
         AND type IN (SELECT value FROM json_each(?)) ORDER BY seq DESC LIMIT ?`,
      )
      .raw();
    this.selectBySeqs = db
      .prepare(
        `SELECT ${EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq IN (SELECT value FROM json_each(?)) ORDER BY seq`,
      )
      .raw();
    // One TEXT value per row (see decodeStructureLine): better-sqlite3 materialises a value per
    // column and an array per raw row through the V8 API, which dominates a 1M-row scan; one
    // plucked string per row halves the time and the memory of five raw columns (measured).
    // hex(NULL) is '', hence the explicit '-' for an absent list.
    this.selectStructure = db
      .prepare(
        `SELECT CASE WHEN surface_op IS NULL AND source_event_seqs IS NULL AND ignorable IS NULL
           THEN seq || '\t' || type
           WHEN surface_op = 'append' AND source_event_seqs IS NULL AND ignorable IS NULL
           THEN seq || '+\t' || type
           ELSE seq || ':' || coalesce(surface_op, '') || '\t' || iif(source_event_seqs IS NULL, '-', hex(source_event_seqs)) || '\t' ||
                coalesce(ignorable, '') || '\t' || type
         END
         FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`,
      )
      .pluck();
    const listSql = (tenant: boolean, labels: boolean): string =>
      `SELECT ${SESSION_COLUMNS} FROM sessions AS s
       WHERE s.pending = 0 ${tenant ? 'AND s.tenant = @tenant' : ''}
         AND (s.created_at < @createdAt OR (s.created_at = @createdAt AND s.id < @id))
         ${
           labels
             ? `AND NOT EXISTS (SELECT 1 FROM json_each(@labels) AS w
                  WHERE NOT EXISTS (SELECT 1 FROM json_each(s.labels) AS l WHERE l.key = w.key AND l.value = w.value))`
             : ''
         }
       ORDER BY s.created_at DESC, s.id DESC LIMIT @limit`;
    this.listStatements = [
      db.prepare(listSql(false, false)).raw(),
      db.prepare(listSql(false, true)).raw(),
      db.prepare(listSql(true, false)).raw(),
      db.prepare(listSql(true, true)).raw(),
    ];

    this.createTxn = db.transaction((record: NewSession, rows: EventRow[], nextSeq: number, dataBytes: number, quota: CreateQuota | undefined): CreateOutcome => {
      const h = record.header;
      if (this.selectForDelete.get(h.id) !== undefined) return EXISTS;
      const bytes = storedSessionBytes(h, record.labels) + dataBytes;
      if (quota !== undefined && (quota.maxSessions > 0 || quota.maxBytes > 0)) {
        const counters = this.selectTenant.get(record.tenant) as [number, number] | undefined;
        const sessions = counters?.[0] ?? 0;
        const stored = counters?.[1] ?? 0;
        if (quota.maxSessions > 0 && sessions + 1 > quota.maxSessions) {
          return { kind: 'quota-exceeded', limitName: 'tenant_max_sessions', limit: quota.maxSessions, actual: sessions };
        }
        if (quota.maxBytes > 0 && stored + bytes > quota.maxBytes) {
          return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: quota.maxBytes, actual: stored + bytes };
        }
      }
      const inserted = this.insertSession.run(
        h.id,
        h.version,
        h.createdAt,
        h.cwd ?? null,
        h.parentSession ?? null,
        h.seedLength ?? null,
        h.origin ?? null,
        h.delegationDepth ?? null,
        h.agentPreset ?? null,
        JSON.stringify(record.labels),
        record.tenant,
        record.strict ? 1 : 0,
        nextSeq,
        rows.length,
        bytes,
        record.pairingGuard ? 1 : 0,
        record.writer,
        record.pending === undefined ? 0 : 1,
        record.pending?.owner ?? null,
        record.pending?.leaseUntil ?? null,
      );
      if (inserted.changes === 0) return EXISTS;
      for (const row of rows) this.insertEvent.run(row);
      this.addTenant.run(record.tenant, 1, bytes);
      return CREATED;
    });

    this.deleteTxn = db.transaction((id: string): boolean => {
      const row = this.selectForDelete.get(id) as [string, number] | undefined;
      if (row === undefined) return false;
      this.deleteSessionStmt.run(id);
      this.addTenant.run(row[0], -1, -row[1]);
      return true;
    });

    // A call whose write is more than one statement runs in its own SAVEPOINT (a nested
    // better-sqlite3 transaction), so a failure midway leaves nothing of it behind.
    this.writeCallTxn = db.transaction((call: QueuedAppend): void => this.writeCall(call));

    // Per call, inside the shared transaction: the head comes from JS (read once per session per
    // group; nothing else writes while we hold the write lock), the counters are updated once per
    // session at the end, and a single-statement call (one event, no idempotency key) needs no
    // SAVEPOINT (a failed statement is rolled back by SQLite alone). So a one-event append costs
    // one INSERT instead of SAVEPOINT + SELECT + INSERT + UPDATE + RELEASE.
    this.groupTxn = db.transaction((batch: readonly QueuedAppend[], results: (AppendOutcome | { error: unknown })[]) => {
      const heads = new Map<string, GroupHead>();
      const tenants = new Map<string, GroupTenant>();
      for (let i = 0; i < batch.length; i++) this.groupCall(batch[i]!, i, heads, tenants, results);
      for (const [sessionId, head] of heads) {
        if (head.changed) this.updateCounters.run(head.next, head.count, head.bytes, head.writer, sessionId);
      }
      for (const [tenant, t] of tenants) if (t.added !== 0) this.addTenant.run(tenant, 0, t.added);
    });

    // A (deferred, read-only) transaction so the chunks form one snapshot even if another
    // process writes meanwhile. Keyset chunks of STRUCTURE_CHUNK rows: the intermediate strings
    // die young (cheap scavenges) instead of a million of them being promoted at once; steadier
    // and faster than one .all() (measured).
    this.structureTxn = db.transaction((sessionId: string, fromSeq: number, limit: number): StructuralRow[] => {
      const types = new TypeTable();
      const out: StructuralRow[] = [];
      let next = fromSeq;
      for (;;) {
        const want = Math.min(STRUCTURE_CHUNK, limit - out.length);
        const lines = this.selectStructure.all(sessionId, next, want) as string[];
        for (let i = 0; i < lines.length; i++) out.push(decodeStructureLine(lines[i]!, types));
        if (lines.length < want || out.length >= limit) return out;
        next = out[out.length - 1]!.seq + 1;
      }
    });

    this.appendPendingTxn = db.transaction((sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): PendingChunkOutcome => {
      const pending = this.selectPendingHead.get(sessionId) as [number, string | null, string] | undefined;
      if (pending === undefined) {
        throw new StoreUsageError(`cannot append an import chunk to session ${sessionId}: no such pending session`);
      }
      if (pending[1] !== opts.owner) {
        throw new StoreUsageError(`cannot append an import chunk to session ${sessionId}: the pending session is owned by another importer (${pending[1]})`);
      }
      const head = pending[0];
      checkAscendingSeqs(sessionId, events, head);
      const { rows, dataBytes } = encodeEvents(sessionId, events);
      const maxBytes = opts.quota?.maxBytes ?? 0;
      if (maxBytes > 0 && dataBytes > 0) {
        const stored = (this.selectTenantBytes.get(pending[2]) as number | undefined) ?? 0;
        if (stored + dataBytes > maxBytes) return { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: maxBytes, actual: stored + dataBytes };
      }
      for (const row of rows) this.insertEvent.run(row);
      const last = rows[rows.length - 1];
      this.updatePending.run(last === undefined ? head : last[1] + 1, rows.length, dataBytes, opts.leaseUntil, sessionId);
      if (dataBytes !== 0) this.addTenant.run(pending[2], 0, dataBytes);
      return APPENDED;
    });
  }

  /** Write counters. */
  stats(): SqliteStoreStats {
    return { ...this.counters, syncs: this.walSync?.completed ?? 0 };
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
    checkAscendingSeqs(id, events, 0);
    const { rows, dataBytes } = encodeEvents(id, events);
    const last = events[events.length - 1];
    const outcome = this.createTxn.immediate(record, rows, last === undefined ? 0 : last.seq + 1, dataBytes, quota);
    if (outcome.kind === 'created') {
      this.counters.commits++;
      await this.committed();
    }
    return outcome;
  }

  async getSession(id: string): Promise<SessionRecord | undefined> {
    await this.readable();
    const row = this.selectSession.get(id) as RawSession | undefined;
    return row === undefined ? undefined : decodeSession(row);
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
    const statement = this.listStatements[(hasTenant ? 2 : 0) + (hasLabels ? 1 : 0)]!;
    const params: Record<string, unknown> = { createdAt: after.createdAt, id: after.id, limit: query.pageSize + 1 };
    if (hasTenant) params.tenant = query.tenant;
    if (hasLabels) params.labels = JSON.stringify(query.labels);
    const rows = statement.all(params) as RawSession[];
    const more = rows.length > query.pageSize;
    const sessions = (more ? rows.slice(0, query.pageSize) : rows).map(decodeSession);
    const last = sessions[sessions.length - 1];
    return {
      sessions,
      nextPageToken: more && last !== undefined ? encodePageToken({ createdAt: last.header.createdAt, id: last.header.id }) : '',
    };
  }

  async deleteSession(id: string): Promise<boolean> {
    this.checkOpen();
    const deleted = this.deleteTxn.immediate(id);
    if (deleted) {
      this.counters.commits++;
      await this.committed();
    }
    return deleted;
  }

  /** One queued append inside the group transaction (see groupTxn). */
  private groupCall(
    call: QueuedAppend,
    i: number,
    heads: Map<string, GroupHead>,
    tenants: Map<string, GroupTenant>,
    results: (AppendOutcome | { error: unknown })[],
  ): void {
    let head = heads.get(call.sessionId);
    if (head === undefined) {
      const row = this.selectHead.get(call.sessionId) as [number, string, string] | undefined;
      if (row === undefined) {
        results[i] = NOT_FOUND;
        return;
      }
      head = { next: row[0], writer: row[1], tenant: row[2], count: 0, bytes: 0, changed: false };
      heads.set(call.sessionId, head);
    }
    const key = call.idempotency;
    if (key !== undefined) {
      const stored = this.selectIdempotent.get(call.sessionId, key.key) as StoredIdempotent | undefined;
      if (stored !== undefined) {
        results[i] = { kind: 'duplicate', result: decodeIdempotent(stored) };
        return;
      }
    }
    if (head.next !== call.expectedNextSeq || head.writer !== call.expectedWriter) {
      results[i] = { kind: 'conflict', actualNextSeq: head.next };
      return;
    }
    let tenant: GroupTenant | undefined;
    if (call.dataBytes > 0) {
      tenant = tenants.get(head.tenant);
      if (tenant === undefined) {
        tenant = { stored: undefined, added: 0 };
        tenants.set(head.tenant, tenant);
      }
      if (call.maxBytes > 0) {
        tenant.stored ??= (this.selectTenantBytes.get(head.tenant) as number | undefined) ?? 0;
        const total = tenant.stored + tenant.added + call.dataBytes;
        if (total > call.maxBytes) {
          results[i] = { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: call.maxBytes, actual: total };
          return;
        }
      }
    }
    const rows = call.rows;
    try {
      if (key === undefined) {
        if (rows.length === 1) this.insertEvent.run(rows[0]!);
        else if (rows.length > 1) this.writeCallTxn(call);
      } else {
        this.writeCallTxn(call);
      }
    } catch (error) {
      // An I/O error may have ended the whole transaction: then nothing of the group can be
      // committed, so fail it as a whole (flush rejects every call).
      if (!this.db.inTransaction) throw error;
      results[i] = { error };
      return;
    }
    if (rows.length > 0) {
      head.next = rows[rows.length - 1]![1] + 1;
      head.count += rows.length;
      head.bytes += call.dataBytes;
    }
    if (tenant !== undefined) tenant.added += call.dataBytes;
    head.writer = call.writer;
    head.changed = true;
    results[i] = APPENDED;
  }

  append(sessionId: string, req: AppendRequest): Promise<AppendOutcome> {
    return new Promise<AppendOutcome>((resolve, reject) => {
      this.checkOpen();
      checkAscendingSeqs(sessionId, req.events, req.expectedNextSeq);
      // Encode outside the write transaction: the shared transaction only binds and inserts.
      const { rows, dataBytes } = encodeEvents(sessionId, req.events);
      const idempotency = req.idempotency;
      this.queue.push({
        sessionId,
        expectedNextSeq: req.expectedNextSeq,
        expectedWriter: req.expectedWriter,
        writer: req.writer,
        rows,
        dataBytes,
        surfaceLength: req.surfaceLength,
        idempotency: idempotency === undefined ? undefined : { key: idempotency.key, requestHash: idempotency.requestHash },
        maxBytes: req.quota?.maxBytes ?? 0,
        resolve,
        reject,
      });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        this.scheduleFlush();
      }
    });
  }

  async getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined> {
    await this.readable();
    if (this.selectVisible.get(sessionId) === undefined) return undefined;
    const stored = this.selectIdempotent.get(sessionId, key) as StoredIdempotent | undefined;
    return stored === undefined ? undefined : decodeIdempotent(stored);
  }

  async readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]> {
    await this.readable();
    return this.selectEvents(sessionId, query).map(decodeEvent);
  }

  async readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]> {
    await this.readable();
    return this.selectEvents(sessionId, query).map(decodeEventText);
  }

  private selectEvents(sessionId: string, query: ReadEventsQuery): RawEvent[] {
    if (query.limit <= 0 || this.selectVisible.get(sessionId) === undefined) return [];
    const forward = query.direction === 'forward';
    const types = query.types !== undefined && query.types.length > 0 ? query.types : undefined;
    return (
      types === undefined
        ? (forward ? this.readForward : this.readBackward).all(sessionId, query.fromSeq, query.limit)
        : (forward ? this.readForwardTyped : this.readBackwardTyped).all(sessionId, query.fromSeq, JSON.stringify(types), query.limit)
    ) as RawEvent[];
  }

  async getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    await this.readable();
    if (seqs.length === 0 || this.selectVisible.get(sessionId) === undefined) return [];
    return (this.selectBySeqs.all(sessionId, JSON.stringify(seqs)) as RawEvent[]).map(decodeEvent);
  }

  async readStructure(sessionId: string, fromSeq: number, limit = Number.MAX_SAFE_INTEGER): Promise<StructuralRow[]> {
    await this.readable();
    if (this.selectVisible.get(sessionId) === undefined) return [];
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
    return this.structureTxn(sessionId, fromSeq, limit);
  }

  async *scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]> {
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    let next = fromSeq;
    for (;;) {
      await this.readable();
      // Re-checked per batch: a session deleted mid-scan ends the scan instead of yielding a torn tail.
      if (this.selectVisible.get(sessionId) === undefined) return;
      const rows = this.readForward.all(sessionId, next, batchSize) as RawEvent[];
      if (rows.length === 0) return;
      next = rows[rows.length - 1]![0] + 1;
      yield rows.map(decodeEvent);
      if (rows.length < batchSize) return;
    }
  }

  async publishSession(id: string, owner: string): Promise<void> {
    this.checkOpen();
    if (this.publishStmt.run(id, owner).changes === 0) {
      const pending = this.selectPendingHead.get(id) as [number, string | null, string] | undefined;
      throw new StoreUsageError(
        pending === undefined
          ? `cannot publish session ${id}: no such pending session`
          : `cannot publish session ${id}: the pending session is owned by another importer (${pending[1]})`,
      );
    }
    this.counters.commits++;
    await this.committed();
  }

  async appendPending(sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): Promise<PendingChunkOutcome> {
    this.checkOpen();
    const outcome = this.appendPendingTxn.immediate(sessionId, events, opts);
    if (outcome.kind === 'appended') {
      this.counters.commits++;
      await this.committed();
    }
    return outcome;
  }

  async getTenantUsage(tenant: string): Promise<TenantUsage> {
    await this.readable();
    const row = this.selectTenant.get(tenant) as [number, number] | undefined;
    return { sessions: row?.[0] ?? 0, dataBytes: row?.[1] ?? 0 };
  }

  /**
   * A head watch over this database file: polls `PRAGMA data_version` (which moves only when
   * another connection committed) while sessions are watched, and then reads the watched
   * sessions' heads. Commits of this instance are not reported (the app publishes them itself).
   */
  openHeadWatch(): HeadWatch {
    this.checkOpen();
    const watch = new SqliteHeadWatch(this.db, this.headWatchPollMs, () => this.closed);
    this.headWatches.add(watch);
    return watch;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    for (const w of this.headWatches) await w.close();
    // Settle what the last groups committed before closing (their promises wait for this sync).
    const sync = this.walSync;
    if (sync !== undefined) {
      if (sync.owed) await sync.request().catch(() => undefined);
      sync.close();
    }
    this.db.close();
  }

  /** After a commit outside the group path: resolves once it is durable. */
  private committed(): Promise<void> | undefined {
    const sync = this.walSync;
    if (sync === undefined) return undefined;
    sync.owe();
    return sync.request();
  }

  /** Writes one call's rows and idempotency record (inside the group transaction). */
  private writeCall(call: QueuedAppend): void {
    const rows = call.rows;
    for (let i = 0; i < rows.length; i++) this.insertEvent.run(rows[i]!);
    const key = call.idempotency;
    if (key !== undefined) {
      this.insertIdempotent.run(call.sessionId, key.key, key.requestHash, encodeSeqs(rows.map((row) => row[1])), call.surfaceLength, this.now());
    }
  }

  /** Commits every queued append in one transaction and settles their promises. */
  private flush(): void {
    this.flushScheduled = false;
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    if (this.walSync?.broken) {
      for (const call of batch) call.reject(this.walSync.error);
      return;
    }
    const results: (AppendOutcome | { error: unknown })[] = new Array(batch.length);
    try {
      this.groupTxn.immediate(batch, results);
    } catch (error) {
      // BEGIN or COMMIT failed (disk full, I/O error, lock timeout): nothing of the group is stored.
      for (const call of batch) call.reject(error);
      return;
    }
    const counters = this.counters;
    counters.commits++;
    counters.groupCommits++;
    if (batch.length > counters.maxGroupSize) counters.maxGroupSize = batch.length;
    const sync = this.walSync;
    if (sync === undefined) {
      this.settle(batch, results);
      return;
    }
    // The group is committed but not yet on disk: its calls settle when a sync covering it ends.
    sync.owe();
    sync.request().then(
      () => this.settle(batch, results),
      (error: unknown) => {
        for (const call of batch) call.reject(error);
      },
    );
  }

  private settle(batch: readonly QueuedAppend[], results: readonly (AppendOutcome | { error: unknown })[]): void {
    const counters = this.counters;
    for (let i = 0; i < batch.length; i++) {
      const result = results[i]!;
      if ('error' in result) {
        batch[i]!.reject(result.error);
      } else {
        if (result.kind === 'appended') counters.appends++;
        batch[i]!.resolve(result);
      }
    }
  }

  private checkOpen(): void {
    if (this.closed) throw new StoreClosedError();
    // Fail-stop after a failed WAL sync: what the page cache holds is unknown, so neither reads
    // nor writes are served any more (restart the process; the database recovers from its WAL).
    if (this.walSync?.broken) throw this.walSync.error;
  }
}

/**
 * Background durability for WAL mode under synchronous=NORMAL: SQLite has written (write(2)) every
 * committed frame to the WAL file when COMMIT returns; an fdatasync of that file started after the
 * commit makes it durable (fsync covers the file, whichever descriptor wrote it; fdatasync includes
 * the file size). Checkpoints keep their own syncs (synchronous=NORMAL syncs the WAL before and the
 * database after each checkpoint), so frames a checkpoint moves into the database stay durable.
 *
 * `owe()` after each commit; `request()` resolves once a sync that *started after* every commit
 * owed so far completed. At most one fdatasync runs at a time; commits made while it runs share the
 * next one. A failed fdatasync is fatal for the store (after a failed fsync the page cache state is
 * unknown, retrying proves nothing): that and every later request reject with the error.
 */
class WalSync {
  completed = 0;
  private fd = -1;
  private running = false;
  /** Commits not covered by a started sync. */
  private dirty = false;
  /** Waiters for the sync in flight, and for the next one. */
  private current: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  private next: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  private failed: unknown = undefined;
  private hasFailed = false;

  constructor(private readonly walPath: string) {}

  /** True once an fdatasync failed (the store is fail-stop from then on). */
  get broken(): boolean {
    return this.hasFailed;
  }

  /** The failed sync's error. */
  get error(): unknown {
    return this.failed;
  }

  /** True while some commit is not known durable. */
  get owed(): boolean {
    return this.dirty || this.running;
  }

  owe(): void {
    this.dirty = true;
  }

  request(): Promise<void> {
    if (this.hasFailed) return Promise.reject(this.failed);
    return new Promise<void>((resolve, reject) => {
      // In flight and nothing new owed: the running sync covers every commit so far.
      if (this.running && !this.dirty) this.current.push({ resolve, reject });
      else this.next.push({ resolve, reject });
      if (!this.running) this.start();
    });
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -1;
  }

  private start(): void {
    if (this.next.length === 0) return;
    if (this.fd < 0) {
      try {
        // Read-write: fdatasync on a read-only descriptor fails on some platforms (Windows).
        this.fd = fs.openSync(this.walPath, 'r+');
        // The WAL file may be new: its directory entry must be durable too (once).
        const dir = fs.openSync(dirname(this.walPath), 'r');
        try {
          fs.fsyncSync(dir);
        } finally {
          fs.closeSync(dir);
        }
      } catch (error) {
        this.fail(error);
        return;
      }
    }
    this.running = true;
    this.dirty = false;
    this.current = this.next;
    this.next = [];
    fs.fdatasync(this.fd, (error) => {
      this.running = false;
      const waiters = this.current;
      this.current = [];
      if (error) {
        this.next = [...waiters, ...this.next];
        this.fail(error);
        return;
      }
      this.completed++;
      for (const w of waiters) w.resolve();
      // Commits owed meanwhile: their waiters are in `next`.
      if (this.next.length > 0) this.start();
    });
  }

  private fail(error: unknown): void {
    this.hasFailed = true;
    this.failed = error;
    const waiters = [...this.current, ...this.next];
    this.current = [];
    this.next = [];
    for (const w of waiters) w.reject(error);
  }
}

/** Opens the file, checks it is a Palimpsest database of this schema version, configures the connection. */
function openDatabase(options: SqliteStoreOptions, backgroundSync: boolean, now: () => number): Database.Database {
  const path = options.path;
  let db: Database.Database;
  try {
    db = new Database(path);
  } catch (cause) {
    throw new StoreOpenError('CANNOT_OPEN', path, `cannot open database ${path}: ${(cause as Error).message}`, { cause });
  }
  try {
    db.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000))}`);
    // Inspect before changing anything: a foreign file must be left exactly as it was.
    const isFresh = checkIdentity(db, path);
    db.pragma('journal_mode = WAL');
    // Background sync: SQLite writes WAL frames without fsync; WalSync makes them durable.
    db.pragma(`synchronous = ${options.durability === 'normal' || backgroundSync ? 'NORMAL' : 'FULL'}`);
    db.pragma('foreign_keys = ON');
    if (isFresh) {
      db.transaction(() => {
        // Re-checked under the write lock: another process may have initialised the file meanwhile.
        if (checkIdentity(db, path)) {
          db.exec(SCHEMA_SQL);
          db.pragma(`application_id = ${APPLICATION_ID}`);
          db.pragma(`user_version = ${SCHEMA_VERSION}`);
        }
      }).immediate();
    }
    // A streamed import whose owner's lease passed was abandoned (crash): drop it (cascades) and
    // take it off its tenant's counters. Another live process's import in progress stays.
    const expired = db.prepare('SELECT id, tenant, data_bytes FROM sessions WHERE pending = 1 AND lease_until < ?').raw();
    const drop = db.prepare('DELETE FROM sessions WHERE id = ?');
    const uncount = db.prepare('UPDATE tenants SET session_count = session_count - 1, data_bytes = data_bytes - ? WHERE tenant = ?');
    db.transaction(() => {
      for (const [id, tenant, bytes] of expired.all(now()) as [string, string, number][]) {
        drop.run(id);
        uncount.run(bytes, tenant);
      }
    }).immediate();
    return db;
  } catch (cause) {
    db.close();
    if (cause instanceof StoreOpenError) throw cause;
    const code = (cause as { code?: unknown }).code;
    if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') {
      throw new StoreOpenError('NOT_A_DATABASE', path, `${path} is not a Palimpsest database (not an SQLite file, or corrupt)`, {
        cause,
      });
    }
    throw new StoreOpenError('CANNOT_OPEN', path, `cannot open database ${path}: ${(cause as Error).message}`, { cause });
  }
}

/** True for a fresh empty file; throws StoreOpenError for a foreign or other-version database. */
function checkIdentity(db: Database.Database, path: string): boolean {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  const userVersion = db.pragma('user_version', { simple: true }) as number;
  if (applicationId === APPLICATION_ID) {
    if (userVersion !== SCHEMA_VERSION) {
      throw new StoreOpenError(
        'SCHEMA_VERSION_MISMATCH',
        path,
        `database ${path} has schema version ${userVersion}, this build needs ${SCHEMA_VERSION}; ` +
          'no migration: export with the older build and import',
      );
    }
    return false;
  }
  if (applicationId !== 0) {
    throw new StoreOpenError(
      'FOREIGN_DATABASE',
      path,
      `${path} belongs to another application (application_id 0x${(applicationId >>> 0).toString(16).padStart(8, '0')}, ` +
        `Palimpsest uses 0x${APPLICATION_ID.toString(16)}); refusing to open it`,
    );
  }
  const objects = db.prepare('SELECT count(*) FROM sqlite_schema').pluck().get() as number;
  if (userVersion !== 0 || objects !== 0) {
    throw new StoreOpenError(
      'FOREIGN_DATABASE',
      path,
      `${path} is an SQLite database but not a Palimpsest one (no application_id, user_version ${userVersion}, ` +
        `${objects} schema objects); refusing to open it`,
    );
  }
  return true;
}

function encodeEvents(sessionId: string, events: readonly SessionEvent[]): { rows: EventRow[]; dataBytes: number } {
  const rows = new Array<EventRow>(events.length);
  let dataBytes = 0;
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    // The client's text when the domain kept it (canonical: the same bytes JSON.stringify writes).
    const data = jsonTextOf(e.data) ?? JSON.stringify(e.data);
    dataBytes += Buffer.byteLength(data, 'utf8');
    rows[i] = [
      sessionId,
      e.seq,
      e.type,
      e.time,
      data,
      e.sourceEventSeqs === undefined ? null : encodeSeqs(e.sourceEventSeqs),
      encodeSurfaceOp(e.surfaceOp),
      e.ignorable === true ? 1 : null,
    ];
  }
  return { rows, dataBytes };
}

/**
 * Decodes one structural line: `<seq>\t<type>` when the event has no surface op, no
 * sourceEventSeqs and is not ignorable (the common case), `<seq>+\t<type>` for a plain
 * `append` surface op (the next most common), else
 * `<seq>:<surface_op or ''>\t<hex(source_event_seqs) or '-' for NULL>\t<'1' or ''>\t<type>`.
 * The type comes last so it may contain any character. Type strings are interned per call, so
 * a million rows hold a few dozen type strings rather than a million copies; a row of the same
 * type as the previous one is recognised without slicing or hashing its type.
 */
function decodeStructureLine(line: string, types: TypeTable): StructuralRow {
  let seq = 0;
  let pos = 0;
  let code = line.charCodeAt(0);
  while (code >= 48 && code <= 57) {
    seq = seq * 10 + (code - 48);
    code = line.charCodeAt(++pos);
  }
  if (code === 9) return { seq, type: typeAt(line, pos + 1, types) };
  if (code === 43 /* + */) return { seq, type: typeAt(line, pos + 2, types), surfaceOp: 'append' };
  const opEnd = line.indexOf('\t', pos + 1);
  const seqsEnd = line.indexOf('\t', opEnd + 1);
  const ignorableEnd = line.indexOf('\t', seqsEnd + 1);
  const row: { seq: number; type: string; surfaceOp?: SurfaceOp; sourceEventSeqs?: readonly number[]; ignorable?: true } = {
    seq,
    type: intern(types, line.slice(ignorableEnd + 1)),
  };
  if (opEnd > pos + 1) row.surfaceOp = decodeSurfaceOp(line.slice(pos + 1, opEnd));
  if (line.charCodeAt(opEnd + 1) !== 45 /* '-' */) row.sourceEventSeqs = decodeSeqsHex(line.slice(opEnd + 1, seqsEnd));
  if (ignorableEnd > seqsEnd + 1) row.ignorable = true;
  return row;
}

/** The type from `start` to the end of `line`, interned; runs of one type (chunks) skip the slice and the hash. */
function typeAt(line: string, start: number, types: TypeTable): string {
  const last = types.last;
  return last.length === line.length - start && line.endsWith(last) ? last : intern(types, line.slice(start));
}

function intern(types: TypeTable, type: string): string {
  let known = types.get(type);
  if (known === undefined) {
    types.set(type, type);
    known = type;
  }
  types.last = known;
  return known;
}

/** Interned type strings of one scan, and the last one seen. */
class TypeTable extends Map<string, string> {
  last = '\u0000';
}

function decodeIdempotent(r: StoredIdempotent): IdempotentResult {
  return { seqs: decodeSeqs(r[1]), requestHash: r[0], surfaceLength: r[2] };
}

function decodeEvent(r: RawEvent): SessionEvent {
  const event: {
    type: string;
    seq: number;
    time: number;
    data: Json;
    sourceEventSeqs?: readonly number[];
    surfaceOp?: SurfaceOp;
    ignorable?: true;
  } = { type: r[1], seq: r[0], time: r[2], data: JSON.parse(r[3]) as Json };
  if (r[4] !== null) event.sourceEventSeqs = decodeSeqs(r[4]);
  if (r[5] !== null) event.surfaceOp = decodeSurfaceOp(r[5]);
  if (r[6] !== null) event.ignorable = true;
  return event;
}

function decodeEventText(r: RawEvent): StoredEventText {
  const event: {
    type: string;
    seq: number;
    time: number;
    dataText: string;
    sourceEventSeqs?: readonly number[];
    surfaceOp?: SurfaceOp;
    ignorable?: true;
  } = { type: r[1], seq: r[0], time: r[2], dataText: r[3] };
  if (r[4] !== null) event.sourceEventSeqs = decodeSeqs(r[4]);
  if (r[5] !== null) event.surfaceOp = decodeSurfaceOp(r[5]);
  if (r[6] !== null) event.ignorable = true;
  return event;
}

function decodeSession(r: RawSession): SessionRecord {
  const header: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = { version: r[1], id: r[0], createdAt: r[2] };
  if (r[3] !== null) header.cwd = r[3];
  if (r[4] !== null) header.parentSession = r[4];
  if (r[5] !== null) header.seedLength = r[5];
  if (r[6] !== null) header.origin = r[6] as 'subagent';
  if (r[7] !== null) header.delegationDepth = r[7];
  if (r[8] !== null) header.agentPreset = r[8];
  return {
    header,
    labels: JSON.parse(r[9]) as Record<string, string>,
    tenant: r[10],
    strict: r[11] === 1,
    nextSeq: r[12],
    eventCount: r[13],
    dataBytes: r[14],
    pairingGuard: r[15] === 1,
    writer: r[16],
  };
}
