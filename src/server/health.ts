/**
 * grpc.health.v1: SERVING while the server runs, NOT_SERVING once shutdown begins (and, for a
 * state created not serving, until setServing: a replica waiting for its database). Watch streams
 * changes. Known services: "" (the server) and "palimpsest.v1.SessionService".
 */
import { DomainError } from '../domain/errors.js';
import { serverStream, unary, type HandlerTable, type ServerSink } from './rpc/handler-table.js';
import { HealthCheckResponse_ServingStatus as S, type HealthCheckRequest, type HealthCheckResponse } from '../../gen/grpc/health/v1/health.js';

/** Health state shared by Check and Watch. */
export class HealthState {
  #serving: boolean;
  #shutdown = false;
  readonly #watchers = new Set<ServerSink<HealthCheckResponse>>();
  static readonly SERVICES = new Set(['', 'palimpsest.v1.SessionService']);

  constructor(serving = true) {
    this.#serving = serving;
  }

  /** Marks the server not serving (shutdown) and tells watchers. */
  setNotServing(): void {
    this.#shutdown = true;
    this.#serving = false;
    for (const w of this.#watchers) w.write({ status: S.NOT_SERVING });
  }

  /** Marks the server serving (its store opened), unless shutdown began; tells watchers. */
  setServing(): void {
    if (this.#shutdown || this.#serving) return;
    this.#serving = true;
    for (const w of this.#watchers) w.write({ status: S.SERVING });
  }

  #status(service: string): S {
    if (!HealthState.SERVICES.has(service)) return S.SERVICE_UNKNOWN;
    return this.#serving ? S.SERVING : S.NOT_SERVING;
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
        sink.write({ status: this.#status(req.service) });
        this.#watchers.add(sink);
        ctx.onCancel(() => this.#watchers.delete(sink));
      }),
    };
  }

  /** Ends every Watch stream (shutdown). */
  endWatchers(): void {
    for (const w of this.#watchers) w.end();
    this.#watchers.clear();
  }
}
