/**
 * grpc.health.v1: SERVING while the server runs, NOT_SERVING once shutdown begins (and, for a
 * state created not serving, until setServing: a replica waiting for its database). Watch streams
 * changes. Known services: "" (the server) and "palimpsest.v1.SessionService".
 */
import { status as Code, type sendUnaryData, type ServerUnaryCall, type ServerWritableStream, type UntypedHandleCall } from '@grpc/grpc-js';
import { HealthCheckResponse_ServingStatus as S, type HealthCheckRequest, type HealthCheckResponse } from '../../gen/grpc/health/v1/health.js';

/** Health state shared by Check and Watch. */
export class HealthState {
  #serving: boolean;
  #shutdown = false;
  readonly #watchers = new Set<ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>();
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

  /** Handlers for HealthService. */
  handlers(): Record<string, UntypedHandleCall> {
    return {
      check: (call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, cb: sendUnaryData<HealthCheckResponse>) => {
        const st = this.#status(call.request.service);
        if (st === S.SERVICE_UNKNOWN) {
          cb({ code: Code.NOT_FOUND, details: `unknown service ${JSON.stringify(call.request.service)}` });
          return;
        }
        cb(null, { status: st });
      },
      watch: (call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        call.write({ status: this.#status(call.request.service) });
        this.#watchers.add(call);
        const done = (): void => {
          this.#watchers.delete(call);
        };
        call.on('cancelled', done);
        call.on('close', done);
        call.on('error', done);
      },
    };
  }

  /** Ends every Watch stream (shutdown). */
  endWatchers(): void {
    for (const w of this.#watchers) w.end();
    this.#watchers.clear();
  }
}
