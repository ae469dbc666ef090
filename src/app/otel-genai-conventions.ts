/**
 * The OpenTelemetry GenAI semantic conventions as otel-genai.ts maps a session to them: the pinned
 * version, the span record shapes, the derived ids, provider and finish-reason names, and the
 * message parts of a log message's content (docs/otel-genai.md has the mapping table).
 */
import { createHash } from 'node:crypto';
import type { Json, JsonObject, SessionEvent } from '../domain/event.js';
import { isJsonObject } from '../domain/json.js';

/** The semantic conventions version this mapping follows (schema URL below). */
export const GENAI_SEMCONV_VERSION = '1.41.0';
/** The schema URL of {@link GENAI_SEMCONV_VERSION}. */
export const GENAI_SCHEMA_URL = `https://opentelemetry.io/schemas/${GENAI_SEMCONV_VERSION}`;
/** The instrumentation scope of the exported spans. */
export const GENAI_SCOPE_NAME = 'palimpsest.otel-genai';

/** An attribute value: OTLP AnyValue (structured values for the opt-in content attributes). */
export type AttributeValue = string | number | boolean | readonly string[] | Json;

/** A span kind (OTLP names). */
export type GenAiSpanKind = 'INTERNAL' | 'CLIENT';

/** One exported span. Times are Unix milliseconds (the log's clock). */
export interface GenAiSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly kind: GenAiSpanKind;
  readonly startMs: number;
  readonly endMs: number;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  readonly status: { readonly code: 'UNSET' | 'ERROR'; readonly message?: string };
}

/** Options of {@link sessionToGenAiSpans}. */
export interface GenAiOptions {
  /** Record message content, tool arguments and results (opt-in attributes). Default false. */
  readonly content?: boolean;
  /** `gen_ai.agent.name` (and the `invoke_agent {name}` span name) when the caller knows it. */
  readonly agentName?: string;
}

/** A trace: a root span and its children, for one turn (or a session without turns). */
export interface GenAiTrace {
  /** A turn's trace, a whole session without turns, or a compaction/prune outside any turn. */
  readonly kind: 'turn' | 'session' | 'compaction';
  /** The seq the trace is keyed by (its `turn/start`, or the first event). */
  readonly rootSeq: number;
  /** The last seq the trace covers. */
  readonly lastSeq: number;
  /** True when the turn has its `turn/end` (or the trace is not a turn). */
  readonly complete: boolean;
  readonly spans: readonly GenAiSpan[];
}

function sha256Hex(parts: readonly (string | number)[]): string {
  return createHash('sha256').update(parts.join('\u0000')).digest('hex');
}

/** The trace id of the trace rooted at `rootSeq` (32 hex digits, never all zero in practice). */
export function genAiTraceId(sessionId: string, rootSeq: number): string {
  return sha256Hex(['palimpsest.trace', sessionId, rootSeq]).slice(0, 32);
}

/** The span id of the span made from the event at `seq` (16 hex digits). */
export function genAiSpanId(sessionId: string, seq: number, role: string): string {
  return sha256Hex(['palimpsest.span', sessionId, seq, role]).slice(0, 16);
}

/**
 * `gen_ai.provider.name` for a log's provider id: the conventions' well-known value when one
 * applies (exactly, or as the prefix of an id such as `deepseek-official`), otherwise the id as it
 * is (a custom value, which the conventions allow).
 */
export function genAiProviderName(provider: string): string {
  const p = provider.toLowerCase();
  const known = PROVIDER_ALIASES[p];
  if (known !== undefined) return known;
  for (const [prefix, name] of Object.entries(PROVIDER_ALIASES)) if (p.startsWith(`${prefix}-`)) return name;
  return provider;
}

/** Log provider ids -> well-known `gen_ai.provider.name` values (semconv 1.41.0). */
const PROVIDER_ALIASES: Readonly<Record<string, string>> = {
  anthropic: 'anthropic', 'aws.bedrock': 'aws.bedrock', bedrock: 'aws.bedrock', 'azure.ai.inference': 'azure.ai.inference',
  'azure.ai.openai': 'azure.ai.openai', azure: 'azure.ai.openai', cohere: 'cohere', deepseek: 'deepseek', 'gcp.gemini': 'gcp.gemini',
  gemini: 'gcp.gemini', 'gcp.gen_ai': 'gcp.gen_ai', 'gcp.vertex_ai': 'gcp.vertex_ai', vertex: 'gcp.vertex_ai', groq: 'groq',
  'ibm.watsonx.ai': 'ibm.watsonx.ai', mistral_ai: 'mistral_ai', mistral: 'mistral_ai', openai: 'openai', perplexity: 'perplexity',
  x_ai: 'x_ai', xai: 'x_ai',
};

/** A log finish reason (`{kind}` of a `finish` chunk) as a conventions finish reason. */
export function genAiFinishReason(kind: string): string {
  return FINISH_REASONS[kind] ?? kind;
}

const FINISH_REASONS: Readonly<Record<string, string>> = {
  stop: 'stop', 'tool-calls': 'tool_call', 'tool-call': 'tool_call', length: 'length', 'max-tokens': 'length',
  'content-filter': 'content_filter', error: 'error',
};

export const str = (v: Json | undefined): string | undefined => (typeof v === 'string' ? v : undefined);
export const int = (v: Json | undefined): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined);
export const obj = (v: Json | undefined): JsonObject | undefined => (isJsonObject(v) ? (v as JsonObject) : undefined);
export const arr = (v: Json | undefined): readonly Json[] => (Array.isArray(v) ? v : []);

/** The conventions' message parts for a log message's content blocks. */
export function partsOf(content: Json | undefined): Json[] {
  const parts: Json[] = [];
  for (const b of arr(content)) {
    const block = obj(b);
    if (block === undefined) continue;
    const type = str(block['type']);
    if (type === 'text') parts.push({ type: 'text', content: str(block['text']) ?? '' });
    else if (type === 'reasoning') parts.push({ type: 'reasoning', content: str(block['text']) ?? '' });
    else if (type === 'tool-call') {
      parts.push({ type: 'tool_call', id: str(block['id']) ?? null, name: str(block['name']) ?? '', arguments: parseArguments(block['arguments']) });
    } else if (type === 'tool-result') parts.push({ type: 'tool_call_response', id: str(block['toolCallId']) ?? null, response: block['content'] ?? null });
    else if (type !== undefined) parts.push({ type });
  }
  return parts;
}

/** Tool arguments as an object when the raw string is JSON (the conventions ask for best effort). */
export function parseArguments(raw: Json | undefined): Json {
  if (typeof raw !== 'string') return raw ?? null;
  try {
    return JSON.parse(raw) as Json;
  } catch {
    return raw;
  }
}

/** The message object of a surface event (`data.message`, or `data` itself for user/message). */
export function messageOf(e: SessionEvent): JsonObject | undefined {
  const d = obj(e.data);
  if (d === undefined) return undefined;
  return obj(d['message']) ?? (e.type === 'user/message' ? d : undefined);
}
