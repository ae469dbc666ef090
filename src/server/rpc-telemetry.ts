/**
 * Per-RPC telemetry: the grpc_server_* metrics in the go-grpc-prometheus convention (so stock
 * gRPC dashboards work), one structured log line per RPC, and the span of each call when tracing
 * is on (see tracing.ts). One implementation (`makeRpcTelemetry`) for both ports: the gRPC port
 * feeds it from its server interceptor (grpc/admission-call.ts), the web port from its Connect
 * adapter (web/connect-adapter.ts). A call counts in the same series whichever port served it;
 * the web port's log lines and spans add the protocol (`web_protocol`: connect, grpc-web, grpc).
 *
 * On the gRPC port it wraps admission, so statuses sent by admission (UNAUTHENTICATED,
 * TOO_MANY_STREAMS) are counted too. Each call is recorded exactly once: at its status, or at
 * the client's cancel (CANCELLED) when no status was sent. The log line carries the method, the
 * code, the duration, the session id of the first request message and the tenant, never event
 * data: `debug` for a success, `info` for a failure, `warn` for a server fault (INTERNAL,
 * UNKNOWN, DATA_LOSS) and for a unary call slower than `slowMs`.
 */
import { status as Code, type Metadata } from '@grpc/grpc-js';
import { TENANT_KEY } from './auth.js';
import type { Logger } from './logger.js';
import type { Metrics, RpcType } from './metrics.js';

/** A started RPC span (tracing.ts): `run` makes it the active context; `end` is called once. */
export interface RpcSpan {
  run<T>(fn: () => T): T;
  /** Ends the span with the call's status and what the call named (session id, tenant). */
  end(code: number, message: string, attributes: { readonly [key: string]: string }): void;
}

/** The headers of a call, as the trace context propagator reads them (`traceparent`, `tracestate`). */
export interface HeaderCarrier {
  keys(): string[];
  get(key: string): string | string[] | undefined;
}

/** The web port's protocols (undefined on the gRPC port). */
export type WebProtocol = 'connect' | 'grpc-web' | 'grpc';

/** What identifies an RPC in its metrics, log line and span. */
export interface RpcInfo {
  readonly service: string;
  readonly method: string;
  readonly type: RpcType;
  /** The protocol of a call served on the web port (a `web_protocol` log field and span attribute). */
  readonly webProtocol?: WebProtocol;
}

/** Starts a span per RPC (undefined when tracing is off). */
export type RpcTracer = (info: RpcInfo & { headers: HeaderCarrier }) => RpcSpan;

/** grpc-js metadata as a header carrier. */
export function metadataHeaders(md: Metadata): HeaderCarrier {
  return new MetadataHeaders(md);
}

/**
 * A call's metadata as a HeaderCarrier: one small object with shared methods (no closures), as
 * the record keeps it for the whole call (a long-lived stream holds it; issue #37 sub-mem).
 */
class MetadataHeaders implements HeaderCarrier {
  constructor(private readonly md: Metadata) {}

  keys(): string[] {
    return Object.keys(this.md.getMap());
  }

  get(key: string): string | string[] | undefined {
    const v = this.md.get(key).map(String);
    return v.length === 0 ? undefined : v.length === 1 ? v[0] : v;
  }
}

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

/** Options of the per-RPC telemetry. */
export interface TelemetryOptions {
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** Unary calls slower than this are logged at warn (default 1000 ms). */
  readonly slowMs?: number;
  readonly tracer?: RpcTracer;
}

/** The telemetry of one RPC, fed by its transport; everything is recorded at `finish`. */
export interface RpcRecord {
  /** The call's headers arrived: starts its span (with the `traceparent` in them as its parent). */
  begin(headers: HeaderCarrier): void;
  /** The headers the handler sees: the verified tenant in them (auth.ts) is logged at the end. */
  caller(headers: HeaderCarrier): void;
  /** A request message (the gRPC port's decoded request): the first one's session id is logged. */
  request(msg: unknown): void;
  /** Runs `fn` in the span's context (so the handler's store calls are its children). */
  run<T>(fn: () => T): T;
  /** The call ended with `code`; only the first call counts. */
  finish(code: number, message: string): void;
}

/** Per-RPC telemetry, one implementation for every port: the gRPC port's interceptor and the web port's Connect adapter. */
export interface RpcTelemetry {
  /** An RPC started (counted in grpc_server_started_total now). */
  start(info: RpcInfo): RpcRecord;
}

/** The service, method and type of a method path ("/palimpsest.v1.SessionService/AppendEvents"). */
export function rpcInfo(path: string, requestStream: boolean, responseStream: boolean): RpcInfo {
  // One frozen object per method, shared by its calls (nothing per call; a stream keeps it for its life).
  const key = requestStream ? (responseStream ? 3 : 2) : (responseStream ? 1 : 0);
  let byShape = infos.get(path);
  if (byShape === undefined) {
    byShape = [];
    if (infos.size < MAX_INFOS) infos.set(path, byShape);
  }
  return (byShape[key] ??= Object.freeze(newRpcInfo(path, requestStream, responseStream)));
}

/** rpcInfo's memo by method path (paths are the service's methods; bounded all the same). */
const infos = new Map<string, RpcInfo[]>();
const MAX_INFOS = 1024;

function newRpcInfo(path: string, requestStream: boolean, responseStream: boolean): RpcInfo {
  const slash = path.lastIndexOf('/');
  const type: RpcType = requestStream
    ? (responseStream ? 'bidi_stream' : 'client_stream')
    : (responseStream ? 'server_stream' : 'unary');
  return { service: path.slice(1, slash), method: path.slice(slash + 1), type };
}

/** What every RPC record of one server shares. */
interface TelemetryConfig {
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly tracer: RpcTracer | undefined;
  readonly slowMs: number;
  readonly debug: boolean;
}

/**
 * One RPC's record: a class, so that a call holds one small object for its telemetry (methods on
 * the prototype) rather than a closure per method; an idle stream keeps it until it ends.
 */
class Record implements RpcRecord {
  readonly #started = process.hrtime.bigint();
  #caller: HeaderCarrier | undefined;
  #session: string | undefined;
  #span: RpcSpan | undefined;
  #done = false;

  constructor(private readonly config: TelemetryConfig, private readonly info: RpcInfo) {
    config.metrics.rpcStarted(info.service, info.method, info.type);
  }

  begin(headers: HeaderCarrier): void {
    const tracer = this.config.tracer;
    if (tracer && this.#span === undefined && !this.#done) this.#span = tracer({ ...this.info, headers });
  }

  caller(headers: HeaderCarrier): void {
    this.#caller = headers;
  }

  request(msg: unknown): void {
    if (this.#session !== undefined || msg === null || typeof msg !== 'object') return;
    const o = msg as { sessionId?: unknown; part?: { $case?: string; value?: { sessionId?: unknown } } };
    const id = typeof o.sessionId === 'string' ? o.sessionId : o.part?.$case === 'options' ? o.part.value?.sessionId : undefined;
    this.#session = typeof id === 'string' && id !== '' ? id : '';
  }

  run<T>(fn: () => T): T {
    const span = this.#span;
    return span ? span.run(fn) : fn();
  }

  finish(code: number, message: string): void {
    if (this.#done) return;
    this.#done = true;
    const { metrics, logger, slowMs, debug } = this.config;
    const { service, method: name, type, webProtocol } = this.info;
    const seconds = Number(process.hrtime.bigint() - this.#started) / 1e9;
    metrics.rpcHandled(service, name, type, codeLabel(code), seconds);
    const tenantValue = this.#caller?.get(TENANT_KEY);
    const tenant = typeof tenantValue === 'string' ? tenantValue : undefined;
    const session = this.#session;
    if (this.#span) {
      const attributes: { [key: string]: string } = {};
      // The GenAI conventions' conversation id too, so a GenAI backend groups the server's spans
      // with the exported session (docs/otel-genai.md).
      if (session) {
        attributes['palimpsest.session.id'] = session;
        attributes['gen_ai.conversation.id'] = session;
      }
      if (tenant) attributes['palimpsest.tenant'] = tenant;
      this.#span.end(code, message, attributes);
    }
    const slow = type === 'unary' && seconds * 1000 > slowMs;
    // A client that cancels (a closed viewer tab, Ctrl-C on `watch`) is routine: debug, like OK.
    const level = SERVER_FAULTS.has(code) || slow ? 'warn' : code === Code.OK || code === Code.CANCELLED ? 'debug' : 'info';
    if (level === 'debug' && !debug) return;
    logger[level]({
      // `rpc_service`: the logger's own `service` key is the process's ("palimpsest").
      rpc: name, rpc_service: service, code: Code[code] ?? String(code), ms: Math.round(seconds * 1e6) / 1e3,
      ...(session === undefined ? {} : { session }), ...(tenant === undefined ? {} : { tenant }), ...(slow ? { slow: true } : {}),
      ...(webProtocol === undefined ? {} : { web_protocol: webProtocol }),
    }, code === Code.OK ? 'rpc' : `rpc failed: ${message}`);
  }
}

/** The per-RPC telemetry of a server (metrics, log line, span). */
export function makeRpcTelemetry(opts: TelemetryOptions): RpcTelemetry {
  const config: TelemetryConfig = {
    metrics: opts.metrics, logger: opts.logger, tracer: opts.tracer, slowMs: opts.slowMs ?? 1000, debug: opts.logger.isLevelEnabled('debug'),
  };
  return { start: (info) => new Record(config, info) };
}
