/**
 * Append lanes of the PostgreSQL store: one instance sends its appends of one session in call
 * order, one transaction at a time, and the ones queued meanwhile together in one statement
 * (append_batch: each call still checked), so a pipelined writer costs one commit per group
 * rather than one per batch (see AppendLanes.#runLane).
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
  running: boolean;
}

/** Most appends of one session sent in one transaction. */
const MAX_GROUP = 64;

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
  /** Per-session append queues (see #runLane). */
  readonly #lanes = new Map<string, Lane>();
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
        // An append carrying blobs goes alone (its own transaction); the others up to it together.
        const withBlobs = lane.queue.findIndex((c) => c.blobs !== undefined);
        const group = lane.queue.splice(0, withBlobs === 0 ? 1 : Math.min(MAX_GROUP, withBlobs < 0 ? MAX_GROUP : withBlobs));
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
  async #appendGroup(sessionId: string, group: readonly QueuedAppend[]): Promise<AppendRow[]> {
    const text = `SELECT * FROM ${this.#sql.s}.append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`;
    const only = group[0]!;
    if (only.blobs !== undefined) {
      const r = await this.#blobs.write<AppendRow>(text, only.values, 'appended', { sessionId, seqs: only.seqs, blobs: only.blobs, maxBytes: Math.floor(only.maxBytes) });
      return r.quotaActual === undefined ? r.rows : [{ ...r.rows[0]!, outcome: 'quota-exceeded', q_actual: r.quotaActual }];
    }
    if (group.length === 1) {
      return this.#sql.query<AppendRow>(`SELECT * FROM ${this.#sql.s}.append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`, group[0]!.values);
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
    return this.#sql.query<AppendRow>(
      `SELECT * FROM ${this.#sql.s}.append_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
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
}
