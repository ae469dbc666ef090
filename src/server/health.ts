/**
 * grpc.health.v1: SERVING while the server runs, NOT_SERVING once shutdown begins (and, for a
 * state created not serving, until setServing: a replica waiting for its database). Watch streams
 * changes. Known services: "" (the server), "palimpsest.v1.SessionService", and
 * "palimpsest.heads-record" (HEADS_RECORD): NOT_SERVING while the SQLite heads record is unsealed
 * (issue #33 item 5: lost acknowledged commits would go unseen) until an operator re-seals it with
 * `palimpsest verify --db FILE --reseal-heads`; the server itself stays SERVING meanwhile (every
 * session is still served correctly, only unprotected), so a load balancer keeps sending traffic
 * while a probe of that name (or the palimpsest_heads_record_unsealed gauge) shows the state.
 */
import { DomainError } from '../domain/errors.js';
import { serverStream, unary, type HandlerTable, type ServerSink } from './rpc/handler-table.js';
import { HealthCheckResponse_ServingStatus as S, type HealthCheckRequest, type HealthCheckResponse } from '../../gen/grpc/health/v1/health.js';

/** The health service name that reports the SQLite heads record (NOT_SERVING while unsealed). */
const HEADS_RECORD = 'palimpsest.heads-record';

/** A Watch stream: its service and the last status it was sent. */
interface Watcher {
  readonly service: string;
  last: S;
}

/** Health state shared by Check and Watch. */
export class HealthState {
  #serving: boolean;
  #shutdown = false;
  #headsUnsealed: string | undefined;
  readonly #watchers = new Map<ServerSink<HealthCheckResponse>, Watcher>();
  /** The health service name that reports the SQLite heads record (NOT_SERVING while unsealed). */
  static readonly HEADS_RECORD = HEADS_RECORD;
  static readonly SERVICES = new Set(['', 'palimpsest.v1.SessionService', HEADS_RECORD]);

  constructor(serving = true) {
    this.#serving = serving;
  }

  /** Marks the server not serving (shutdown) and tells watchers. */
  setNotServing(): void {
    this.#shutdown = true;
    this.#serving = false;
    this.#notify();
  }

  /** Marks the server serving (its store opened), unless shutdown began; tells watchers. */
  setServing(): void {
    if (this.#shutdown || this.#serving) return;
    this.#serving = true;
    this.#notify();
  }

  /**
   * Why the store's heads record is unsealed (undefined: sealed, or a store that keeps none):
   * HEADS_RECORD answers NOT_SERVING while it is set.
   */
  setHeadsUnsealed(reason: string | undefined): void {
    this.#headsUnsealed = reason;
    this.#notify();
  }

  /** Why the heads record is unsealed, if it is (the palimpsest_heads_record_unsealed gauge). */
  get headsUnsealed(): string | undefined {
    return this.#headsUnsealed;
  }

  #status(service: string): S {
    if (!HealthState.SERVICES.has(service)) return S.SERVICE_UNKNOWN;
    if (!this.#serving) return S.NOT_SERVING;
    if (service === HEADS_RECORD && this.#headsUnsealed !== undefined) return S.NOT_SERVING;
    return S.SERVING;
  }

  /** Sends each watcher its service's status when it changed. */
  #notify(): void {
    for (const [sink, w] of this.#watchers) {
      const status = this.#status(w.service);
      if (status === w.last) continue;
      w.last = status;
      sink.write({ status });
    }
  }

  /** HealthService's handler table (public: no token needed). */
  handlers(): HandlerTable {
    return {
      check: unary<HealthCheckRequest, HealthCheckResponse>('public', async (_ctx, req) => {
        const st = this.#status(req.service);
        if (st === S.SERVICE_UNKNOWN) throw new DomainError('SERVICE_UNKNOWN', `unknown service ${JSON.stringify(req.service)}`, {});
        return { status: st };
      }),
      watch: serverStream<HealthCheckRequest, HealthCheckResponse>('public', (ctx, req, sink) => {
        const status = this.#status(req.service);
        sink.write({ status });
        this.#watchers.set(sink, { service: req.service, last: status });
        ctx.onCancel(() => this.#watchers.delete(sink));
      }),
    };
  }

  /** Ends every Watch stream (shutdown). */
  endWatchers(): void {
    for (const w of this.#watchers.keys()) w.end();
    this.#watchers.clear();
  }
}
