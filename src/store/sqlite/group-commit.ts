/**
 * Group commit, a private optimisation of the SQLite store: `append` calls are queued and
 * flushed together in shared write transactions, on the next `setImmediate` turn by default (so
 * requests that arrive in the same I/O poll phase share a commit, and its fsync under durability
 * 'full'). Without a background sync the whole queue is one transaction; with one, a transaction
 * takes calls up to GROUP_ROWS rows and the rest follow on the next turn, so the first calls' sync
 * runs while the next are written. While a background sync runs, calls are held until it ends
 * (or until they reach GROUP_ROWS rows) and then written as one group, which the next sync
 * covers: calls that arrive one by one (as grpc-js hands over unary requests) share a commit
 * instead of each taking a transaction of its own; they could not be acknowledged before that
 * next sync anyway. Inside the shared transaction a call that fails unexpectedly
 * is rolled back alone (a single INSERT by SQLite's statement rollback, a multi-statement call by its own SAVEPOINT);
 * conflicts, duplicates, quota refusals and unknown sessions are detected before writing anything.
 * Every call's promise settles only after the shared COMMIT returned (and, with a background WAL
 * sync, once that commit is durable).
 *
 * Each call is a compare-and-set on the stored head and writer token, tracked in JS inside the
 * transaction (which holds the write lock), and the byte quota is checked against the tenant's
 * stored counter plus what the group added so far: the outcome of a call never depends on which
 * calls share its transaction or on the order they arrived in.
 */
import type Database from 'better-sqlite3';
import type { AppendOutcome, AppendRequest, IdempotencyRecord } from '../../app/store-port.js';
import { encodeSeqs } from './codec.js';
import { decodeIdempotent, type EventRow, type StoredIdempotent } from './row-codec.js';
import { digestOf } from './session-writes.js';
import type { Statements } from './statements.js';
import { prepareSqlChecksums, type SqlChecksums } from './sql-checksums.js';
import type { WalSync } from './wal-sync.js';
import type { BlobWrites } from '../../app/blob-port.js';
import { SqliteBlobs } from './sqlite-blobs.js';

/** The outcome of every appended call (shared: it carries nothing of the call). */
export const APPENDED: AppendOutcome = Object.freeze({ kind: 'appended' });
const NOT_FOUND: AppendOutcome = Object.freeze({ kind: 'not-found' });

/**
 * The rows a group transaction takes (at least one call, whatever its size) when its sync runs in
 * the background: the calls beyond wait for the next turn. The first calls' WAL sync then starts
 * while the next are written, and their answers go back (and their clients' next requests are
 * decoded) while the writer works, instead of every call in flight waiting for one long
 * transaction and one sync. The cost is a commit per ~300 rows instead of per queue: ~8% more
 * writer time per event, for ~12% more durable 100-event appends at 16 in flight (bench/README.md,
 * tenth round). Without a background sync the queue stays one transaction: a COMMIT that syncs
 * inline would sync once per part, and without a sync nothing would overlap.
 */
export const GROUP_ROWS = 300;

/** A session's head while a group transaction runs. */
interface GroupHead {
  next: number;
  writer: string;
  readonly tenant: string;
  readonly createdAt: number;
  /** next_seq when the group read the head: the rows the group writes start there. */
  readonly from: number;
  digest: number;
  /** Surface length after the session's last append in the group (sessions.surface_length, the feed's). */
  surface: number;
  count: number;
  bytes: number;
  changed: boolean;
}

/** A tenant's stored bytes while a group transaction runs (read on first need) and what the group adds. */
interface GroupTenant {
  stored: number | undefined;
  added: number;
}

/** One queued append (encoded outside the transaction). */
export interface QueuedAppend {
  readonly sessionId: string;
  readonly expectedNextSeq: number;
  readonly expectedWriter: string;
  readonly writer: string;
  readonly rows: EventRow[];
  readonly dataBytes: number;
  readonly surfaceLength: number;
  readonly idempotency: IdempotencyRecord | undefined;
  readonly maxBytes: number;
  /** When the call was made (the idempotency record's created_at). */
  readonly at: number;
  /** The blobs the events reference (issue #39), written in the call's SAVEPOINT. */
  readonly blobs?: BlobWrites;
  /**
   * Answer the call. Always called as methods (`call.resolve(...)`): the writer thread's calls
   * share one pair of functions that read the call's id from `this` (append-thread-wire.ts).
   */
  readonly resolve: (outcome: AppendOutcome) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * An append call as queued: `done` (the writer thread's count of the store's own appends in
 * flight) runs when it settles, before its promise does.
 */
export function queuedAppend(
  sessionId: string, req: AppendRequest, rows: EventRow[], dataBytes: number, at: number,
  resolve: (outcome: AppendOutcome) => void, reject: (error: unknown) => void, done: (() => void) | undefined,
): QueuedAppend {
  const idempotency = req.idempotency;
  return {
    sessionId,
    expectedNextSeq: req.expectedNextSeq,
    expectedWriter: req.expectedWriter,
    writer: req.writer,
    rows,
    dataBytes,
    surfaceLength: req.surfaceLength,
    idempotency: idempotency === undefined ? undefined : { key: idempotency.key, requestHash: idempotency.requestHash },
    maxBytes: req.quota?.maxBytes ?? 0,
    at,
    ...(req.blobs === undefined ? {} : { blobs: req.blobs }),
    resolve: done === undefined ? resolve : (outcome) => {
      done();
      resolve(outcome);
    },
    reject: done === undefined ? reject : (error: unknown) => {
      done();
      reject(error);
    },
  };
}

/** The store's write counters (shared with the store). */
export interface WriteCounters {
  commits: number;
  groupCommits: number;
  appends: number;
  maxGroupSize: number;
}

/**
 * Where the store's appends go: a {@link GroupCommit} on the store's own connection, or the
 * writer thread's (append-thread.ts), which runs one on a connection of its own.
 */
export interface AppendQueue {
  /** Queues a call; it settles after the group transaction that commits it (and once durable). */
  enqueue(call: QueuedAppend): void;
  /** Starts writing what is queued now (at close). */
  flush(): void;
}

/**
 * Commit visibility against durability, for readers on other connections (append-thread.ts): a
 * group is numbered by `begin()` before its COMMIT makes it visible, and `durable(n)` says that
 * every group up to n is on disk (or failed). A reader that read while some begun group was not
 * yet durable waits for it before answering.
 */
export interface CommitGate {
  begin(): number;
  /** Groups up to `group` are durable, and with them the feed records up to `feedPosition` (0: no news). */
  durable(group: number, feedPosition?: number): void;
}

/** The append queue of one connection and its group transaction. */
export class GroupCommit implements AppendQueue {
  private queue: QueuedAppend[] = [];
  /** The rows of the queued calls. */
  private queuedRows = 0;
  /** Set while the queue waits for the running sync's end (see flushTurn). */
  private held = false;
  /** The heads the last group transaction moved. */
  private moved: readonly (readonly [string, number, number])[] = [];
  private flushScheduled = false;
  private readonly scheduleFlush: () => void;
  private readonly groupTxn: Database.Transaction<(batch: readonly QueuedAppend[], results: (AppendOutcome | { error: unknown })[]) => void>;
  private readonly writeCallTxn: Database.Transaction<(call: QueuedAppend, tenant: string) => void>;
  private readonly blobs: SqliteBlobs;
  /** The feed's end (max position), read at the end of each group transaction (with a gate only). */
  private readonly feedEnd: Database.Statement | undefined;
  /** The feed's end as the last group transaction left it (0: not read). */
  private groupFeedEnd = 0;
  private readonly sqlChecksums: SqlChecksums | undefined;
  /** Inserts a call's rows: Statements.insertEvents, or SqlChecksums' (checksums by SQLite). */
  private readonly insertRows: (rows: readonly EventRow[]) => void;

  constructor(
    private readonly db: Database.Database,
    private readonly st: Statements,
    private readonly walSync: WalSync | undefined,
    private readonly counters: WriteCounters,
    mode: 'immediate' | 'microtask' | undefined,
    /** Called once each committed group is durable, with the heads it moved (id, created_at, next seq). */
    private readonly onHeads: (heads: readonly (readonly [string, number, number])[]) => void = () => undefined,
    /** Numbers each group for readers on other connections (see CommitGate). */
    private readonly gate?: CommitGate,
    /** True when `db` has the checksum extension loaded: the rows come without checksums, SQLite computes them (sql-checksums.ts). */
    checksumsInSqlite = false,
  ) {
    this.sqlChecksums = checksumsInSqlite ? prepareSqlChecksums(db) : undefined;
    this.insertRows = this.sqlChecksums?.insertEvents ?? st.insertEvents;
    const flush = (): void => this.flushTurn();
    this.scheduleFlush =
      mode === 'microtask'
        ? () => queueMicrotask(flush)
        : () => {
            setImmediate(flush);
          };

    // A call whose write is more than one statement runs in its own SAVEPOINT (a nested
    // better-sqlite3 transaction), so a failure midway leaves nothing of it behind.
    this.writeCallTxn = db.transaction((call: QueuedAppend, tenant: string): void => this.writeCall(call, tenant));
    this.blobs = new SqliteBlobs(db);
    this.feedEnd = gate === undefined ? undefined : db.prepare('SELECT max(position) FROM feed').pluck();

    // Per call, inside the shared transaction: the head comes from JS (read once per session per
    // group; nothing else writes while we hold the write lock), the counters are updated once per
    // session at the end, and a single-statement call (one event, no idempotency key) needs no
    // SAVEPOINT (a failed statement is rolled back by SQLite alone). So a one-event append costs
    // one INSERT instead of SAVEPOINT + SELECT + INSERT + UPDATE + RELEASE.
    this.groupTxn = db.transaction((batch: readonly QueuedAppend[], results: (AppendOutcome | { error: unknown })[]) => {
      const heads = new Map<string, GroupHead>();
      const tenants = new Map<string, GroupTenant>();
      for (let i = 0; i < batch.length; i++) this.groupCall(batch[i]!, i, heads, tenants, results);
      const moved: (readonly [string, number, number])[] = [];
      for (const [sessionId, head] of heads) {
        if (!head.changed) continue;
        if (this.sqlChecksums !== undefined && head.count > 0) head.digest = this.sqlChecksums.digestFrom(sessionId, head.from, head.next, head.count, head.digest);
        this.st.updateCounters.run(head.next, head.count, head.bytes, head.writer, head.digest, head.surface, sessionId);
        if (head.count > 0) moved.push([sessionId, head.createdAt, head.next]);
      }
      this.moved = moved;
      // Inside the transaction: every feed record up to it is committed by this COMMIT or before.
      if (this.feedEnd !== undefined && moved.length > 0) this.groupFeedEnd = (this.feedEnd.get() as number | null) ?? 0;
      for (const [tenant, t] of tenants) if (t.added !== 0) this.st.addTenant.run(tenant, 0, t.added);
    });
  }

  /** Queues a call; it settles after the flush that commits it. */
  enqueue(call: QueuedAppend): void {
    this.queue.push(call);
    this.queuedRows += call.rows.length;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      this.scheduleFlush();
    }
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
      const row = this.st.selectHead.get(call.sessionId) as [number, string, string, number, number, number] | undefined;
      if (row === undefined) {
        results[i] = NOT_FOUND;
        return;
      }
      head = { next: row[0], writer: row[1], tenant: row[2], createdAt: row[3], from: row[0], digest: row[4], surface: row[5], count: 0, bytes: 0, changed: false };
      heads.set(call.sessionId, head);
    }
    const key = call.idempotency;
    if (key !== undefined) {
      const stored = this.st.selectIdempotent.get(call.sessionId, key.key) as StoredIdempotent | undefined;
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
    // Blobs count toward the tenant (once), not the session (issue #39).
    const added = call.dataBytes + (call.blobs === undefined ? 0 : this.blobs.newBytes(head.tenant, call.blobs));
    if (added > 0) {
      tenant = tenants.get(head.tenant);
      if (tenant === undefined) {
        tenant = { stored: undefined, added: 0 };
        tenants.set(head.tenant, tenant);
      }
      if (call.maxBytes > 0) {
        tenant.stored ??= (this.st.selectTenantBytes.get(head.tenant) as number | undefined) ?? 0;
        const total = tenant.stored + tenant.added + added;
        if (total > call.maxBytes) {
          results[i] = { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: call.maxBytes, actual: total };
          return;
        }
      }
    }
    const rows = call.rows;
    try {
      if (key === undefined && call.blobs === undefined) {
        if (rows.length === 1) this.insertRows(rows);
        else if (rows.length > 1) this.writeCallTxn(call, head.tenant);
      } else {
        this.writeCallTxn(call, head.tenant);
      }
    } catch (error) {
      // An I/O error may have ended the whole transaction: then nothing of the group can be
      // committed, so fail it as a whole (flush rejects every call).
      if (!this.db.inTransaction) throw error;
      results[i] = { error };
      return;
    }
    if (rows.length > 0) {
      if (this.sqlChecksums === undefined) head.digest = digestOf(head.digest, rows);
      head.next = rows[rows.length - 1]![1] + 1;
      head.count += rows.length;
      head.bytes += call.dataBytes;
      head.surface = call.surfaceLength;
    }
    if (tenant !== undefined) tenant.added += added;
    head.writer = call.writer;
    head.changed = true;
    results[i] = APPENDED;
  }


  /** Writes one call's rows, blobs and idempotency record (inside the group transaction). */
  private writeCall(call: QueuedAppend, tenant: string): void {
    const rows = call.rows;
    this.insertRows(rows);
    if (call.blobs !== undefined) this.blobs.write(tenant, call.sessionId, rows.map((r) => r[1]), call.blobs);
    const key = call.idempotency;
    if (key !== undefined) {
      this.st.insertIdempotent.run(call.sessionId, key.key, key.requestHash, encodeSeqs(rows.map((row) => row[1])), call.surfaceLength, call.at);
    }
  }


  /** Commits every queued append now (in group transactions of GROUP_ROWS rows with a background sync). */
  flush(): void {
    this.flushScheduled = false;
    while (this.queue.length > 0) this.writeGroup(this.take());
  }

  /**
   * The scheduled flush: one group transaction, the rest on the next turn. While a background
   * sync runs and fewer than GROUP_ROWS rows are queued, the queue is held and written when that
   * sync ends, before the next one starts (WalSync.afterSync): what arrives during a sync becomes
   * one group for the next. Holding delays no answer: a commit made now would wait for that next
   * sync too.
   */
  private flushTurn(): void {
    this.flushScheduled = false;
    if (this.queue.length === 0) return;
    const sync = this.walSync;
    if (sync !== undefined && sync.syncing && !sync.broken && this.queuedRows < GROUP_ROWS) {
      if (!this.held) {
        this.held = true;
        sync.afterSync(() => {
          this.held = false;
          this.flushTurn();
        });
      }
      return;
    }
    const batch = this.take();
    // Scheduled first: the rest is never stranded, whatever writing this part runs into.
    if (this.queue.length > 0) {
      this.flushScheduled = true;
      this.scheduleFlush();
    }
    this.writeGroup(batch);
  }

  /** The calls of the next group transaction, off the queue: all of them, or GROUP_ROWS rows' worth with a background sync. */
  private take(): QueuedAppend[] {
    const queue = this.queue;
    let n = queue.length;
    // A broken sync fails every call at once (writeGroup).
    if (this.walSync !== undefined && !this.walSync.broken) {
      let rows = queue[0]!.rows.length;
      n = 1;
      while (n < queue.length && rows + queue[n]!.rows.length <= GROUP_ROWS) rows += queue[n++]!.rows.length;
    }
    if (n === queue.length) {
      this.queue = [];
      this.queuedRows = 0;
      return queue;
    }
    const taken = queue.slice(0, n);
    this.queue = queue.slice(n);
    for (const call of taken) this.queuedRows -= call.rows.length;
    return taken;
  }

  /** Commits `batch` in one transaction and settles their promises (once durable). */
  private writeGroup(batch: QueuedAppend[]): void {
    if (this.walSync?.broken) {
      for (const call of batch) call.reject(this.walSync.error);
      return;
    }
    const results: (AppendOutcome | { error: unknown })[] = new Array(batch.length);
    const gate = this.gate;
    const group = gate?.begin() ?? 0;
    const sync = this.walSync;
    try {
      this.groupTxn.immediate(batch, results);
    } catch (error) {
      // BEGIN or COMMIT failed (disk full, I/O error, lock timeout): nothing of the group is stored.
      this.moved = [];
      this.groupFeedEnd = 0;
      for (const call of batch) call.reject(error);
      if (gate !== undefined) {
        // Nothing of it to sync, but earlier groups may still be syncing: passed after them.
        if (sync?.owed === true) sync.request().then(() => gate.durable(group), () => undefined);
        else gate.durable(group);
      }
      return;
    }
    const moved = this.moved;
    this.moved = [];
    const feedEnd = this.groupFeedEnd;
    this.groupFeedEnd = 0;
    const counters = this.counters;
    counters.commits++;
    counters.groupCommits++;
    if (batch.length > counters.maxGroupSize) counters.maxGroupSize = batch.length;
    if (sync === undefined) {
      gate?.durable(group, feedEnd);
      if (moved.length > 0) this.onHeads(moved);
      this.settle(batch, results);
      return;
    }
    // The group is committed but not yet on disk: its calls settle when a sync covering it ends.
    sync.owe();
    sync.request().then(
      () => {
        gate?.durable(group, feedEnd);
        // Recorded once durable: a recorded head is never ahead of what a power loss keeps.
        if (moved.length > 0) this.onHeads(moved);
        this.settle(batch, results);
      },
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
}
