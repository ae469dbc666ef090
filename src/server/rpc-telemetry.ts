/**
 * Per-RPC telemetry in one server interceptor: the grpc_server_* metrics in the go-grpc-prometheus
 * convention (so stock gRPC dashboards work), one structured log line per RPC, and the span of
 * each call when tracing is on (see tracing.ts).
 *
 * It is the outermost interceptor, so statuses sent by the auth interceptor (UNAUTHENTICATED,
 * TOO_MANY_STREAMS) are counted too. Each call is recorded exactly once: at its status, or at
 * the client's cancel (CANCELLED) when no status was sent. The log line carries the method, the
 * code, the duration, the session id of the first request message and the tenant, never event
 * data: `debug` for a success, `info` for a failure, `warn` for a server fault (INTERNAL,
 * UNKNOWN, DATA_LOSS) and for a unary call slower than `slowMs`.
 */
import { ServerInterceptingCall, status as Code, type Metadata, type ServerInterceptor } from '@grpc/grpc-js';
import { TENANT_KEY } from './auth.js';
import type { Logger } from './logger.js';
import type { Metrics, RpcType } from './metrics.js';

/** A started RPC span (tracing.ts): `run` makes it the active context; `end` is called once. */
export interface RpcSpan {
  run<T>(fn: () => T): T;
  end(code: number, message: string): void;
}

/** Starts a span per RPC (undefined when tracing is off). */
export type RpcTracer = (info: { service: string; method: string; type: RpcType; metadata: Metadata }) => RpcSpan;

/** go-grpc-prometheus's code names (`codes.Code.String()`): OK, Canceled, InvalidArgument, ... */
const CODE_NAMES: readonly string[] = [
  'OK', 'Canceled', 'Unknown', 'InvalidArgument', 'DeadlineExceeded', 'NotFound', 'AlreadyExists', 'PermissionDenied',
  'ResourceExhausted', 'FailedPrecondition', 'Aborted', 'OutOfRange', 'Unimplemented', 'Internal', 'Unavailable', 'DataLoss',
  'Unauthenticated',
];

/** The Prometheus `grpc_code` label of a status code. */
export function codeLabel(code: number): string {
  return CODE_NAMES[code] ?? `Code(${code})`;
}

const SERVER_FAULTS = new Set<number>([Code.INTERNAL, Code.UNKNOWN, Code.DATA_LOSS]);

/** Options of the telemetry interceptor. */
export interface TelemetryOptions {
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** Unary calls slower than this are logged at warn (default 1000 ms). */
  readonly slowMs?: number;
  readonly tracer?: RpcTracer;
}

/** The telemetry interceptor (list it first: it wraps the others). */
export function makeTelemetryInterceptor(opts: TelemetryOptions): ServerInterceptor {
  const { metrics, logger, tracer } = opts;
  const slowMs = opts.slowMs ?? 1000;
  const debug = logger.isLevelEnabled('debug');
  return (method, call) => {
    const path = method.path; // "/palimpsest.v1.SessionService/AppendEvents"
    const slash = path.lastIndexOf('/');
    const service = path.slice(1, slash);
    const name = path.slice(slash + 1);
    const type: RpcType = method.requestStream
      ? (method.responseStream ? 'bidi_stream' : 'client_stream')
      : (method.responseStream ? 'server_stream' : 'unary');
    const started = process.hrtime.bigint();
    metrics.rpcStarted(service, name, type);
    let md: Metadata | undefined;
    let session: string | undefined;
    let span: RpcSpan | undefined;
    let done = false;
    const finish = (code: number, message: string): void => {
      if (done) return;
      done = true;
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.rpcHandled(service, name, type, codeLabel(code), seconds);
      span?.end(code, message);
      const slow = type === 'unary' && seconds * 1000 > slowMs;
      const level = SERVER_FAULTS.has(code) || slow ? 'warn' : code === Code.OK ? 'debug' : 'info';
      if (level === 'debug' && !debug) return;
      const tenant = md?.get(TENANT_KEY)[0];
      logger[level]({
        rpc: name, service, code: Code[code] ?? String(code), ms: Math.round(seconds * 1e6) / 1e3,
        ...(session === undefined ? {} : { session }), ...(typeof tenant === 'string' ? { tenant } : {}), ...(slow ? { slow: true } : {}),
      }, code === Code.OK ? 'rpc' : `rpc failed: ${message}`);
    };
    return new ServerInterceptingCall(call, {
      start: (next) => {
        next({
          // Each step runs in the span's context, so the handler (called from one of them) and
          // the store calls it makes see the span as their parent.
          onReceiveMetadata: (m, nextMd) => {
            md = m;
            if (tracer) span = tracer({ service, method: name, type, metadata: m });
            if (span) span.run(() => nextMd(m));
            else nextMd(m);
          },
          onReceiveMessage: (msg, nextMsg) => {
            if (session === undefined && msg !== null && typeof msg === 'object') {
              const o = msg as { sessionId?: unknown; part?: { $case?: string; value?: { sessionId?: unknown } } };
              const id = typeof o.sessionId === 'string' ? o.sessionId : o.part?.$case === 'options' ? o.part.value?.sessionId : undefined;
              session = typeof id === 'string' && id !== '' ? id : '';
            }
            if (span) span.run(() => nextMsg(msg));
            else nextMsg(msg);
          },
          onReceiveHalfClose: (nextHalfClose) => {
            if (span) span.run(nextHalfClose);
            else nextHalfClose();
          },
          onCancel: () => finish(Code.CANCELLED, 'cancelled by the client'),
        });
      },
      sendStatus: (st, next) => {
        finish(st.code, st.details ?? '');
        next(st);
      },
    });
  };
}
