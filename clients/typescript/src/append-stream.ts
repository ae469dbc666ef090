/**
 * AppendWriter: AppendEvents batches pipelined over one AppendStream (for high-rate writers: the
 * per-call cost of a unary call is paid once per stream). Each `append` resolves with its seqs or
 * rejects with the PalimpsestError the unary `append` would have thrown; a refused batch fails
 * alone and the stream goes on. A session's batches are answered in the order they were written.
 */
import { randomUUID } from 'node:crypto';
import type { ClientDuplexStream, StatusObject } from '@grpc/grpc-js';
import type { EventInput } from './gen/palimpsest/v1/event.js';
import type { AppendStreamRequest, AppendStreamResponse } from './gen/palimpsest/v1/service.js';
import { withDerivedIds } from './events.js';
import { PalimpsestError, statusToPalimpsestError, toPalimpsestError } from './errors.js';

/** Options of one batch, as the unary `append` takes them. */
export interface AppendOptions {
  readonly expectedLastSeq?: number;
  readonly idempotencyKey?: string;
}

interface Pending {
  resolve(seqs: number[]): void;
  reject(e: unknown): void;
}

/** A writer on one AppendStream; made by `PalimpsestClient.appendStream()`. */
export class AppendWriter {
  private readonly pending = new Map<string, Pending>();
  private nextId = 0;
  private failure: unknown;
  private closed = false;
  private writable = true;
  private readonly finished: Promise<void>;

  constructor(private readonly call: ClientDuplexStream<AppendStreamRequest, AppendStreamResponse>) {
    let finish!: () => void;
    this.finished = new Promise((resolve) => {
      finish = resolve;
    });
    call.on('data', (res: AppendStreamResponse) => this.answer(res));
    call.on('error', (e: unknown) => {
      this.fail(toPalimpsestError(e));
      finish();
    });
    // grpc-js emits 'status' as soon as the trailers arrive, possibly before the answers buffered
    // in the readable side are delivered: the stream is over once both are in.
    let status: StatusObject | undefined;
    let readEnded = false;
    const settle = (): void => {
      if (status === undefined || !readEnded) return;
      // An OK end with batches unanswered is a broken stream all the same.
      if (this.pending.size > 0) this.fail(new PalimpsestError('UNKNOWN', `the stream ended (${status.details || 'OK'}) before answering ${this.pending.size} batch(es)`));
      finish();
    };
    call.on('status', (s: StatusObject) => {
      status = s;
      settle();
    });
    call.on('end', () => {
      readEnded = true;
      settle();
    });
  }

  /** Batches written and not answered yet. */
  get outstanding(): number {
    return this.pending.size;
  }

  /**
   * Writes `events` as one atomic batch; resolves with their seqs. The same options, idempotency
   * key and derived message ids as the unary `append`; a refused batch rejects with the same
   * PalimpsestError (e.g. FAILED_PRECONDITION / HEAD_MISMATCH) and later batches still run.
   */
  append(sessionId: string, events: readonly EventInput[], opts: AppendOptions = {}): Promise<number[]> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.closed) return Promise.reject(new PalimpsestError('FAILED_PRECONDITION', 'the writer is closed; open another with appendStream()'));
    const idempotencyKey = opts.idempotencyKey || `ts-${randomUUID()}`;
    const correlationId = String(this.nextId++);
    const answered = new Promise<number[]>((resolve, reject) => {
      this.pending.set(correlationId, { resolve, reject });
    });
    this.writable = this.call.write({
      correlationId,
      append: { sessionId, events: withDerivedIds(idempotencyKey, events), expectedLastSeq: opts.expectedLastSeq, idempotencyKey },
    });
    return answered;
  }

  /**
   * Resolves once the stream takes more batches without buffering them in memory (after a write
   * the transport could not send yet): a writer far ahead of the server awaits it between batches.
   */
  ready(): Promise<void> {
    if (this.writable || this.failure !== undefined || this.closed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.call.off('drain', done);
        this.call.off('status', done);
        this.call.off('error', done);
        this.writable = true;
        resolve();
      };
      this.call.on('drain', done);
      this.call.on('status', done);
      this.call.on('error', done);
    });
  }

  /** Half-closes the stream and waits until every outstanding batch is answered and it ends. */
  async close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      if (this.failure === undefined) this.call.end();
    }
    await this.finished;
  }

  /** Ends the stream now; outstanding batches reject with CANCELLED. */
  cancel(): void {
    this.closed = true;
    this.call.cancel();
  }

  private answer(res: AppendStreamResponse): void {
    const p = this.pending.get(res.correlationId);
    if (!p) return;
    this.pending.delete(res.correlationId);
    if (res.result?.$case === 'appended') p.resolve(res.result.value.seqs);
    else if (res.result?.$case === 'error') p.reject(statusToPalimpsestError(res.result.value));
    else p.reject(new PalimpsestError('UNKNOWN', 'the server answered a batch with neither seqs nor an error'));
  }

  private fail(err: unknown): void {
    if (this.failure === undefined) this.failure = err;
    for (const p of this.pending.values()) p.reject(this.failure);
    this.pending.clear();
  }
}
