/**
 * OpenTelemetry traces: a SERVER span per RPC on either port (the W3C `traceparent` a client
 * sends is its parent) and a child span per store call made while serving it. Off by default;
 * on with the standard environment variables: OTEL_TRACES_EXPORTER (`otlp`, `console`, comma-separated;
 * `none` = off) or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT /
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, read by the OTLP exporter with the other OTEL_EXPORTER_OTLP_*
 * settings); OTEL_SERVICE_NAME names the service (default "palimpsest"), OTEL_SDK_DISABLED=true
 * turns everything off. The SDK is loaded only when traces are on (like prom-client), so a
 * server without them pays nothing at start-up.
 */
import type * as Api from '@opentelemetry/api';
import type { HeaderCarrier, RpcSpan, RpcTracer } from './rpc-telemetry.js';

/** Whether the OTEL_* environment asks for traces. */
export function tracesRequested(env: NodeJS.ProcessEnv): boolean {
  if ((env['OTEL_SDK_DISABLED'] ?? '').toLowerCase() === 'true') return false;
  const exporters = (env['OTEL_TRACES_EXPORTER'] ?? '').trim();
  if (exporters !== '') return exporters.split(',').some((e) => e.trim() !== 'none');
  return Boolean(env['OTEL_EXPORTER_OTLP_ENDPOINT'] || env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']);
}

/** Traces for one server: the per-RPC tracer of the telemetry interceptor and a store wrapper. */
export interface Tracing {
  readonly rpc: RpcTracer;
  /** `store` with a span around each method call made inside a traced RPC. */
  traceStore<T extends object>(store: T): T;
  /** Flushes and stops the exporters (a provider passed in by the caller is left running). */
  shutdown(): Promise<void>;
}

/** Raised for an OTEL_TRACES_EXPORTER value this server does not know. */
export class TracingConfigError extends Error {}

/**
 * Loads the SDK and builds the tracing of a server, or undefined when traces are off. A
 * `provider` (tests: an in-memory exporter) is used as given, whatever the environment says.
 */
export async function loadTracing(env: NodeJS.ProcessEnv, provider?: Api.TracerProvider): Promise<Tracing | undefined> {
  if (provider === undefined && !tracesRequested(env)) return undefined;
  const api = await import('@opentelemetry/api');
  const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks');
  const { W3CTraceContextPropagator } = await import('@opentelemetry/core');
  // Spans of store calls find the RPC span through the async context.
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  let own: { shutdown(): Promise<void> } | undefined;
  if (provider === undefined) {
    const sdk = await import('@opentelemetry/sdk-trace');
    const { resourceFromAttributes } = await import('@opentelemetry/resources');
    const processors: import('@opentelemetry/sdk-trace').SpanProcessor[] = [];
    for (const name of (env['OTEL_TRACES_EXPORTER'] || 'otlp').split(',').map((s) => s.trim())) {
      if (name === 'none' || name === '') continue;
      if (name === 'otlp') {
        const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
        processors.push(new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter() }));
      } else if (name === 'console') {
        processors.push(new sdk.SimpleSpanProcessor({ exporter: new sdk.ConsoleSpanExporter() }));
      } else {
        throw new TracingConfigError(`OTEL_TRACES_EXPORTER: unknown exporter ${JSON.stringify(name)} (this server supports otlp, console, none)`);
      }
    }
    const p = new sdk.TracerProvider({
      resource: resourceFromAttributes({ 'service.name': env['OTEL_SERVICE_NAME'] || 'palimpsest' }),
      spanProcessors: processors,
    });
    own = p;
    provider = p;
  }
  const tracer = provider.getTracer('palimpsest');
  const propagator = new W3CTraceContextPropagator();
  const getter: Api.TextMapGetter<HeaderCarrier> = { keys: (h) => h.keys(), get: (h, key) => h.get(key) };

  // The same span on both ports; a web port call also says its protocol.
  const rpc: RpcTracer = ({ service, method, type, webProtocol, headers }): RpcSpan => {
    const parent = propagator.extract(api.ROOT_CONTEXT, headers, getter);
    const span = tracer.startSpan(`${service}/${method}`, {
      kind: api.SpanKind.SERVER,
      attributes: {
        'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method, 'rpc.grpc.type': type,
        ...(webProtocol === undefined ? {} : { 'palimpsest.web_protocol': webProtocol }),
      },
    }, parent);
    const ctx = api.trace.setSpan(parent, span);
    return {
      run: (fn) => api.context.with(ctx, fn),
      end(code, message, attributes) {
        span.setAttribute('rpc.grpc.status_code', code);
        span.setAttributes(attributes);
        if (code !== 0) span.setStatus({ code: api.SpanStatusCode.ERROR, message });
        span.end();
      },
    };
  };

  const traceStore = <T extends object>(store: T): T => new Proxy(store, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function' || typeof prop !== 'string' || prop === 'constructor') return value;
      const fn = value as (...args: unknown[]) => unknown;
      return function traced(...args: unknown[]): unknown {
        // Only inside a traced RPC: background work (cache eviction, flush timers) stays quiet.
        if (api.trace.getSpan(api.context.active()) === undefined) return fn.apply(target, args);
        return tracer.startActiveSpan(`store.${prop}`, (span) => {
          const fail = (e: unknown): never => {
            span.recordException(e as Error);
            span.setStatus({ code: api.SpanStatusCode.ERROR });
            span.end();
            throw e;
          };
          try {
            const r = fn.apply(target, args);
            if (r instanceof Promise) return r.then((x: unknown) => { span.end(); return x; }, fail);
            span.end();
            return r;
          } catch (e) {
            return fail(e);
          }
        });
      };
    },
  });

  return { rpc, traceStore, shutdown: async () => { await own?.shutdown(); } };
}
