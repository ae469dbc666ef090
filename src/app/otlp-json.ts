/**
 * OTLP/JSON encoding of GenAI span records (the `ExportTraceServiceRequest` of
 * opentelemetry-proto, JSON form as OTLP/HTTP sends it): trace and span ids as hex, 64-bit
 * integers and nanosecond times as decimal strings, enums as integers.
 */
import type { Json } from '../domain/event.js';
import { GENAI_SCHEMA_URL, GENAI_SCOPE_NAME, type AttributeValue, type GenAiSpan } from './otel-genai-conventions.js';

/** OTLP AnyValue, JSON form. */
export type OtlpAnyValue =
  | { stringValue: string }
  | { boolValue: boolean }
  | { intValue: string }
  | { doubleValue: number }
  | { arrayValue: { values: OtlpAnyValue[] } }
  | { kvlistValue: { values: OtlpKeyValue[] } }
  | Record<string, never>;

/** OTLP KeyValue, JSON form. */
export interface OtlpKeyValue {
  key: string;
  value: OtlpAnyValue;
}

/** OTLP Span.SpanKind values. */
export const OTLP_SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const;
/** OTLP Status.StatusCode values. */
export const OTLP_STATUS_CODE = { UNSET: 0, OK: 1, ERROR: 2 } as const;

/** Encodes one attribute value (objects become kvlists: the structured form the conventions prefer). */
export function otlpAnyValue(v: AttributeValue | Json): OtlpAnyValue {
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  // An AnyValue with no field set is the empty value (JSON null).
  if (v === null) return {};
  if (Array.isArray(v)) return { arrayValue: { values: (v as readonly Json[]).map(otlpAnyValue) } };
  return { kvlistValue: { values: Object.entries(v as Record<string, Json>).map(([key, value]) => ({ key, value: otlpAnyValue(value) })) } };
}

/** Attributes as OTLP KeyValues. */
export function otlpAttributes(attributes: Readonly<Record<string, AttributeValue>>): OtlpKeyValue[] {
  return Object.entries(attributes).map(([key, value]) => ({ key, value: otlpAnyValue(value) }));
}

/** Unix milliseconds as OTLP nanoseconds (decimal string; exact for integer ms). */
export function msToUnixNano(ms: number): string {
  const whole = Math.floor(ms);
  const frac = Math.round((ms - whole) * 1e6);
  return (BigInt(whole) * 1_000_000n + BigInt(frac)).toString();
}

/** One span in OTLP/JSON. */
export function otlpSpan(s: GenAiSpan): Record<string, unknown> {
  return {
    traceId: s.traceId,
    spanId: s.spanId,
    ...(s.parentSpanId === undefined ? {} : { parentSpanId: s.parentSpanId }),
    name: s.name,
    kind: OTLP_SPAN_KIND[s.kind],
    startTimeUnixNano: msToUnixNano(s.startMs),
    endTimeUnixNano: msToUnixNano(s.endMs),
    attributes: otlpAttributes(s.attributes),
    status: { code: OTLP_STATUS_CODE[s.status.code], ...(s.status.message === undefined ? {} : { message: s.status.message }) },
  };
}

/** Resource and scope of an export. */
export interface OtlpExportOptions {
  /** `service.name` of the resource (default `palimpsest`). */
  readonly serviceName?: string;
  /** The instrumentation scope version (the Palimpsest version). */
  readonly scopeVersion?: string;
}

/** An `ExportTraceServiceRequest` holding `spans` (one resource, one scope with the semconv schema URL). */
export function otlpTraceRequest(spans: readonly GenAiSpan[], options: OtlpExportOptions = {}): { resourceSpans: unknown[] } {
  return {
    resourceSpans: [{
      resource: { attributes: otlpAttributes({ 'service.name': options.serviceName ?? 'palimpsest' }) },
      scopeSpans: [{
        scope: { name: GENAI_SCOPE_NAME, ...(options.scopeVersion === undefined ? {} : { version: options.scopeVersion }) },
        schemaUrl: GENAI_SCHEMA_URL,
        spans: spans.map(otlpSpan),
      }],
      schemaUrl: GENAI_SCHEMA_URL,
    }],
  };
}
