/**
 * AppendStream: AppendEvents batches on one bidirectional stream, for high-rate writers (the
 * per-call cost of a unary call, HEADERS, trailers, metadata and admission, is paid once).
 *
 * - Each batch runs exactly the unary call's path (`appendBatch`: request bounds, atomicity,
 *   expected_last_seq, idempotency, limits, quota); its answer is the AppendEventsResponse or the
 *   google.rpc.Status the unary call would have ended with. A refused batch fails alone.
 * - Order: a session's batches run and are answered in request order (a chain per session);
 *   batches of different sessions run side by side.
 * - Flow control: at most MAX_IN_FLIGHT batches run per stream, and no request is read while the
 *   response side waits for a drain, so a client that stops reading its responses stops the
 *   server reading its requests (HTTP/2 flow control then holds the client back).
 * - A message that is not an AppendStreamRequest at all (undecodable bytes, invalid UTF-8) ends
 *   the stream with INVALID_ARGUMENT: that is a broken client, not a refused batch.
 * - The stream ends OK once the client half-closes and every batch has been answered; a token
 *   reload that revokes its token ends it (UNAUTHENTICATED / PERMISSION_DENIED), as it ends
 *   subscriptions and exports.
 */
import type { AppendEventsRequest, AppendStreamRequest, AppendStreamResponse } from '../../gen/palimpsest/v1/service.js';
import type { CallContext } from '../app/session-service.js';
import { DomainError } from '../domain/errors.js';
import { checkRequest } from './request-checks.js';
import { bidi, type MethodImpl } from './rpc/handler-table.js';
import { toRpcStatus } from './status-map.js';
import type { RevocableCalls } from './revocable-calls.js';

/** Batches of one stream being appended at once. */
export const MAX_IN_FLIGHT = 256;

/** Bytes of a correlation id. */
export const MAX_CORRELATION_ID_BYTES = 256;

/** How a batch keeps its place in its session's order (AppendOptions.onPlanned / retryAfter). */
export interface BatchOrder {
  readonly onPlanned: () => void;
  readonly retryAfter: Promise<unknown> | undefined;
}

type AppendBatch = (caller: CallContext, r: AppendEventsRequest, order?: BatchOrder) => Promise<{ seqs: readonly number[]; replayed: boolean; surfaceLength: number }>;

/** A session's last batch on the stream: planned (or settled), settled. */
interface Tail {
  readonly planned: Promise<void>;
  readonly settled: Promise<void>;
}

/** A batch waiting for its answer to go out (after those of its session sent before it). */
interface Owed {
  msg: AppendStreamResponse | undefined;
}

/** A session's batches on the stream: the chain's last one, and the answers owed, in request order. */
interface SessionOrder {
  tail: Tail;
  readonly owed: Owed[];
}

/** The AppendStream entry of the handler table, over the unary call's batch path. */
export function appendStreamHandler(appendBatch: AppendBatch, onUnexpected: (err: unknown) => void, revocable?: RevocableCalls): MethodImpl {
  return bidi<AppendStreamRequest, AppendStreamResponse>('append', (ctx, requests, sink) => {
    let inFlight = 0;
    let readerDone = false;
    let ended = false;
    let writable = true;
    let wakeReader: (() => void) | undefined;
    /** Each session with batches in flight (the chains that keep its order). */
    const sessions = new Map<string, SessionOrder>();
    const wake = (): void => {
      const w = wakeReader;
      wakeReader = undefined;
      w?.();
    };
    const finishIfDone = (): void => {
      if (readerDone && inFlight === 0 && !ended) {
        ended = true;
        untrack();
        sink.end();
      }
    };
    const send = (msg: AppendStreamResponse): void => {
      if (ended || ctx.cancelled) return;
      if (!sink.write(msg) && writable) {
        writable = false;
        sink.onDrain(() => {
          writable = true;
          wake();
        });
      }
    };
    /** Sends the session's answers that are due (each after those sent before it), in order. */
    const answer = (session: string, state: SessionOrder): void => {
      const owed = state.owed;
      let sent = 0;
      while (sent < owed.length && owed[sent]!.msg !== undefined) send(owed[sent++]!.msg!);
      if (sent === 0) return;
      owed.splice(0, sent);
      inFlight -= sent;
      if (owed.length === 0 && sessions.get(session) === state) sessions.delete(session);
      wake();
      finishIfDone();
    };
    const run = async (correlationId: string, append: AppendEventsRequest | undefined, order: BatchOrder): Promise<AppendStreamResponse> => {
      try {
        if (Buffer.byteLength(correlationId) > MAX_CORRELATION_ID_BYTES) {
          throw new DomainError('FIELD_TOO_LONG', `correlation_id is ${Buffer.byteLength(correlationId)} bytes; the limit is ${MAX_CORRELATION_ID_BYTES}`, {
            field: 'correlation_id', limitName: 'max_correlation_id_bytes', limit: String(MAX_CORRELATION_ID_BYTES), actual: String(Buffer.byteLength(correlationId)),
          });
        }
        if (append === undefined) throw new DomainError('INVALID_ARGUMENT', 'append is required: the batch, as AppendEvents takes it', { field: 'append' });
        // The bounds the unary call's decoder checks (session id, event types, options).
        const refused = checkRequest('/palimpsest.v1.SessionService/AppendEvents', append);
        if (refused) throw refused;
        const res = await appendBatch(ctx.caller, append, order);
        return { correlationId, result: { $case: 'appended', value: { seqs: [...res.seqs], replayed: res.replayed, surfaceLength: res.surfaceLength } } };
      } catch (e) {
        const echoed = Buffer.byteLength(correlationId) > MAX_CORRELATION_ID_BYTES ? '' : correlationId;
        return { correlationId: echoed, result: { $case: 'error', value: toRpcStatus(e, onUnexpected) } };
      }
    };
    // A client that goes away wakes a reader parked on flow control (it then stops).
    ctx.onCancel(wake);
    // A token file reload that revokes the stream's token ends it (revocable-calls.ts).
    const untrack = revocable?.add({
      credential: ctx.credential, tenant: ctx.caller.tenant, permission: 'append',
      revoke: (err) => {
        if (ended) return;
        ended = true;
        sink.end(err);
        wake();
      },
    }) ?? (() => undefined);
    void (async () => {
      try {
        for await (const req of requests) {
          if (ended) break;
          while ((inFlight >= MAX_IN_FLIGHT || !writable) && !ctx.cancelled && !ended) {
            await new Promise<void>((resolve) => {
              wakeReader = resolve;
            });
          }
          if (ctx.cancelled || ended) break;
          inFlight++;
          const session = req.append?.sessionId ?? '';
          // A session's batches are planned in request order and answered in it: the next starts
          // once the previous one's plan is with the store (or it settled), so the store may
          // group-commit them, and its re-plans (another writer moved the session, or the batch
          // it sits on failed) wait until the previous one settled (AppendOptions.retryAfter).
          // The app does not promise to apply calls in the order they were made (an idempotency
          // lookup or a citation read may delay one), so the order is kept here. Sessions run
          // side by side.
          let state = sessions.get(session);
          const previous = state?.tail;
          const { correlationId, append } = req;
          let markPlanned!: () => void;
          const planned = new Promise<void>((resolve) => {
            markPlanned = resolve;
          });
          const order: BatchOrder = { onPlanned: markPlanned, retryAfter: previous?.settled };
          const result = previous === undefined ? run(correlationId, append, order) : previous.planned.then(() => run(correlationId, append, order));
          const owed: Owed = { msg: undefined };
          // run answers every failure: a rejection is unexpected (reported, and answered as one).
          const settled = result.then((msg) => {
            owed.msg = msg;
          }, (e: unknown) => {
            owed.msg = { correlationId: '', result: { $case: 'error', value: toRpcStatus(e, onUnexpected) } };
          });
          const tail: Tail = { planned, settled };
          if (state === undefined) {
            state = { tail, owed: [owed] };
            sessions.set(session, state);
          } else {
            state.tail = tail;
            state.owed.push(owed);
          }
          const mine = state;
          void settled.then(() => {
            markPlanned();
            answer(session, mine);
          });
        }
        readerDone = true;
        finishIfDone();
      } catch (e) {
        if (ended) return;
        ended = true;
        untrack();
        sink.end(e);
      }
    })();
  });
}
