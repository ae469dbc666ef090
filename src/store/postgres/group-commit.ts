/**
 * Append lanes of the PostgreSQL store (group commit): one instance sends its appends of one
 * session in call order, one transaction at a time, and the appends queued meanwhile, of that
 * session and of any other, together in one statement (append_batch / append_many: each call
 * still checked), so concurrent writers cost one commit per group rather than one per append
 * (see AppendLanes.#dispatch).
 */
import type { AppendOutcome, AppendRequest } from '../../app/store-port.js';
import type { BlobWrites } from '../../app/blob-port.js';
import type { HeadNotifier } from './notifier.js';
import type { PgBlobs } from './pg-blobs.js';
import { encodeEvents } from './row-codec.js';
import type { Statements } from './statements.js';

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
  /** The blobs the events reference (issue #39): such an append runs alone, in the blobs' transaction (pg-blobs.ts). */
  readonly blobs?: BlobWrites;
  readonly seqs: readonly number[];
  readonly resolve: (outcome: AppendOutcome) => void;
  readonly reject: (error: unknown) => void;
}

/** A session's appends of this store instance, sent in call order. */
interface Lane {
  readonly queue: QueuedAppend[];
  /** A transaction with appends of the session is in flight. */
  running: boolean;
}

/** An append taken into a transaction. */
interface GroupedAppend {
  readonly sessionId: string;
  readonly call: QueuedAppend;
}

/** Most appends sent in one transaction. */
const MAX_GROUP = 64;

/**
 * Append transactions in flight at once (the pool has 10 connections by default; the rest serve
 * reads). Appends queued meanwhile wait and go together in the next one: a tenant's commits run
 * one at a time anyway (its feed position, schema.ts), so sharing one commit is what scales.
 */
export const MAX_TRANSACTIONS = 4;

const APPENDED = Object.freeze({ kind: 'appended' as const });
const NOT_FOUND = Object.freeze({ kind: 'not-found' as const });

/** The store's write counters (postgres-store.ts stats()). */
export interface WriteCounters {
  commits: number;
  appends: number;
  maxGroupSize: number;
}

/** The per-session append queues of one store instance. */
export class AppendLanes {
  /** Per-session append queues (see #dispatch). */
  readonly #lanes = new Map<string, Lane>();
  /** Sessions with appends queued and none in flight, in arrival order. */
  readonly #ready = new Set<string>();
  /** Append transactions in flight. */
  #transactions = 0;
  readonly #sql: Statements;
  readonly #counters: WriteCounters;
  readonly #notifier: HeadNotifier;
  readonly #now: () => number;
  readonly #blobs: PgBlobs;

  constructor(sql: Statements, counters: WriteCounters, notifier: HeadNotifier, now: () => number, blobs: PgBlobs) {
    this.#blobs = blobs;
    this.#sql = sql;
    this.#counters = counters;
    this.#notifier = notifier;
    this.#now = now;
  }

  /** Sessions with appends queued or in flight. */
  get size(): number {
    return this.#lanes.size;
  }

  /** Queues an append (its seqs checked by the caller) in its session's lane. */
  enqueue(sessionId: string, req: AppendRequest): Promise<AppendOutcome> {
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
      lane.queue.push({
        values, maxBytes: req.quota?.maxBytes ?? 0, ...(req.blobs === undefined ? {} : { blobs: req.blobs }), seqs: req.events.map((e) => e.seq), resolve, reject,
      });
      if (!lane.running) {
        this.#ready.add(sessionId);
        this.#dispatch();
      }
    });
  }

  /**
   * Starts transactions while fewer than MAX_TRANSACTIONS are in flight: each takes the queued
   * appends of every session that has none in flight (up to MAX_GROUP calls), so a session's
   * appends go in call order, one transaction at a time, and the appends of many sessions that
   * arrive while earlier transactions run share one commit. Order matters for speed, not
   * correctness: the app pipelines batches planned on top of batches not yet committed (each
   * naming its predecessor's writer token); sent concurrently on different pool connections, a
   * later batch could reach the row lock first and conflict. Every call still checks head and
   * token under the row lock, so other replicas' writes interleave safely.
   */
  #dispatch(): void {
    while (this.#transactions < MAX_TRANSACTIONS && this.#ready.size > 0) {
      const group: GroupedAppend[] = [];
      for (const sessionId of this.#ready) {
        const lane = this.#lanes.get(sessionId)!;
        // An append carrying blobs goes alone, in the blobs' transaction (pg-blobs.ts): it opens a
        // transaction of its own, or waits in #ready for the next one; the others go up to it.
        if (lane.queue[0]!.blobs !== undefined) {
          if (group.length > 0) continue;
          this.#ready.delete(sessionId);
          lane.running = true;
          group.push({ sessionId, call: lane.queue.shift()! });
          break;
        }
        this.#ready.delete(sessionId);
        lane.running = true;
        const withBlobs = lane.queue.findIndex((c) => c.blobs !== undefined);
        const n = Math.min(MAX_GROUP - group.length, withBlobs < 0 ? lane.queue.length : withBlobs);
        for (const call of lane.queue.splice(0, n)) group.push({ sessionId, call });
        if (group.length >= MAX_GROUP) break;
      }
      if (group.length > this.#counters.maxGroupSize) this.#counters.maxGroupSize = group.length;
      this.#transactions++;
      void this.#send(group);
    }
  }

  async #send(group: readonly GroupedAppend[]): Promise<void> {
    try {
      const outcomes = await this.#appendGroup(group);
      for (let i = 0; i < group.length; i++) group[i]!.call.resolve(this.#appendOutcome(group[i]!.sessionId, outcomes[i]!, group[i]!.call.maxBytes));
    } catch (error) {
      for (const { call } of group) call.reject(error);
    } finally {
      this.#transactions--;
      for (const { sessionId } of group) {
        const lane = this.#lanes.get(sessionId);
        if (lane === undefined || !lane.running) continue;
        lane.running = false;
        if (lane.queue.length > 0) this.#ready.add(sessionId);
        else this.#lanes.delete(sessionId);
      }
      this.#dispatch();
    }
  }

  /**
   * One statement, one transaction for a group of appends (each call with append's checks, a
   * session's in call order): `append` for one call, `append_batch` for calls of one session,
   * `append_many` for several sessions (schema.ts). An unexpected error fails the whole group,
   * nothing of it commits. Returns one row per call, in the group's order.
   */
  async #appendGroup(group: readonly GroupedAppend[]): Promise<AppendRow[]> {
    const { sessionId, call } = group[0]!;
    if (group.length === 1 && call.blobs !== undefined) {
      const text = `SELECT * FROM ${this.#sql.s}.append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`;
      const r = await this.#blobs.write<AppendRow>(text, call.values, 'appended', { sessionId, seqs: call.seqs, blobs: call.blobs, maxBytes: Math.floor(call.maxBytes) });
      return r.quotaActual === undefined ? r.rows : [{ ...r.rows[0]!, outcome: 'quota-exceeded', q_actual: r.quotaActual }];
    }
    if (group.length === 1) {
      return this.#sql.query<AppendRow>(`SELECT * FROM ${this.#sql.s}.append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`, group[0]!.call.values);
    }
    const ids: string[] = [];
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
    let oneSession = true;
    for (const { sessionId, call } of group) {
      const v = call.values;
      const seqs = v[4] as unknown[];
      if (sessionId !== group[0]!.sessionId) oneSession = false;
      ids.push(sessionId);
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
    const rest = [counts, next, expectedWriter, writer, ...columns, bytes, keys, hashes, surface, maxBytes, this.#now()];
    if (oneSession) {
      return this.#sql.query<AppendRow>(
        `SELECT * FROM ${this.#sql.s}.append_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
        [ids[0], ...rest],
      );
    }
    const rows = await this.#sql.query<AppendRow & { call: number }>(
      `SELECT * FROM ${this.#sql.s}.append_many($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
      [ids, ...rest],
    );
    const out: AppendRow[] = new Array<AppendRow>(group.length);
    for (const r of rows) out[r.call - 1] = r;
    return out;
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
}
