/**
 * The OTLP sink of the live GenAI export: the OTLP/HTTP trace exporter the server's own tracing
 * uses (@opentelemetry/exporter-trace-otlp-http, configured by the same OTEL_EXPORTER_OTLP_*
 * variables: endpoint, headers, timeout), fed finished spans built from the log. The spans are
 * handed over as `ReadableSpan`s with the log's times and the derived ids, not recorded through a
 * tracer: a tracer would mint fresh random ids and the current time.
 */
import type { GenAiSpan } from './otel-genai-conventions.js';
import { GENAI_SCHEMA_URL, GENAI_SCOPE_NAME } from './otel-genai-conventions.js';
import type { SpanSink } from './otel-genai-live.js';

type HrTime = [number, number];

function hr(ms: number): HrTime {
  const s = Math.floor(ms / 1000);
  return [s, Math.round((ms - s * 1000) * 1e6)];
}

/** Loads the OTLP exporter (only when the export is on) and wraps it as a {@link SpanSink}. */
export async function otlpSpanSink(env: NodeJS.ProcessEnv, scopeVersion: string): Promise<SpanSink> {
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
  const { resourceFromAttributes } = await import('@opentelemetry/resources');
  const api = await import('@opentelemetry/api');
  const exporter = new OTLPTraceExporter();
  const resource = resourceFromAttributes({ 'service.name': env['OTEL_SERVICE_NAME'] || 'palimpsest' });
  const scope = { name: GENAI_SCOPE_NAME, version: scopeVersion, schemaUrl: GENAI_SCHEMA_URL };
  const kinds = { INTERNAL: api.SpanKind.INTERNAL, CLIENT: api.SpanKind.CLIENT } as const;
  const toReadable = (s: GenAiSpan): import('@opentelemetry/sdk-trace').ReadableSpan => {
    const ctx = { traceId: s.traceId, spanId: s.spanId, traceFlags: api.TraceFlags.SAMPLED };
    const start = hr(s.startMs);
    const end = hr(s.endMs);
    return {
      name: s.name,
      kind: kinds[s.kind],
      spanContext: () => ctx,
      ...(s.parentSpanId === undefined ? {} : { parentSpanContext: { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: api.TraceFlags.SAMPLED } }),
      startTime: start,
      endTime: end,
      duration: hr(s.endMs - s.startMs),
      status: { code: s.status.code === 'ERROR' ? api.SpanStatusCode.ERROR : api.SpanStatusCode.UNSET, ...(s.status.message === undefined ? {} : { message: s.status.message }) },
      // Structured values (the opt-in content) are encoded as OTLP kvlists/arrays by the exporter.
      attributes: s.attributes as import('@opentelemetry/api').Attributes,
      links: [],
      events: [],
      ended: true,
      resource,
      instrumentationScope: scope,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    };
  };
  return {
    export: (spans) => new Promise<void>((resolve, reject) => {
      exporter.export(spans.map(toReadable), (result) => {
        if (result.code === 0) resolve();
        else reject(result.error ?? new Error('the OTLP exporter did not accept the spans'));
      });
    }),
    shutdown: () => exporter.shutdown(),
  };
}
