/**
 * The log -> OpenTelemetry GenAI mapping (issue #41) over the 36 recorded reference sessions: each
 * session is mapped, encoded as OTLP/JSON, POSTed to a real OTLP/HTTP receiver started here, and
 * the received span tree is checked against the conventions' tables (semconv 1.41.0: span names,
 * kinds, parent links, required attributes and their types) and against the log itself (one chat
 * span per assistant message of a trace, one execute_tool span per tool call, errors where the
 * tool result is an error).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJsonl } from '../../src/domain/jsonl-reader.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { sessionToGenAiSpans } from '../../src/app/otel-genai.js';
import { GENAI_SCHEMA_URL, GENAI_SEMCONV_VERSION, genAiProviderName, genAiSpanId, genAiTraceId } from '../../src/app/otel-genai-conventions.js';
import { otlpTraceRequest } from '../../src/app/otlp-json.js';
import { postTraces, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';

const DIR = new URL('../fixtures/reference-sessions/', import.meta.url).pathname;
const FILES = readdirSync(DIR).filter((f) => f.endsWith('.jsonl')).sort();

function load(file: string): { id: string; events: SessionEvent[] } {
  const { header, events } = decodeJsonl(readFileSync(join(DIR, file), 'utf8'));
  return { id: header.id, events: events as unknown as SessionEvent[] };
}

const KIND_INTERNAL = 1;
const KIND_CLIENT = 3;
const STATUS_ERROR = 2;

type D = Record<string, unknown>;
const o = (v: unknown): D | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as D) : undefined);

/** What the log says the traces must hold, computed here independently of the mapping. */
function expected(events: readonly SessionEvent[]): { roots: number; chats: number[]; toolCalls: Set<string>; errorCalls: Set<string> } {
  const hasTurns = events.some((e) => e.type === 'turn/start');
  let inTurn = !hasTurns;
  let roots = hasTurns ? 0 : events.length > 0 ? 1 : 0;
  const chats: number[] = [];
  const toolCalls = new Set<string>();
  const errorCalls = new Set<string>();
  for (const e of events) {
    if (e.type === 'turn/start') { inTurn = true; roots++; }
    if (inTurn) {
      const d = o(e.data) ?? {};
      if (e.type === 'assistant/message') {
        chats.push(e.seq);
        for (const b of (o(d['message'])?.['content'] as unknown[] | undefined) ?? []) {
          if (o(b)?.['type'] === 'tool-call') toolCalls.add(String(o(b)?.['id']));
        }
      }
      if (e.type === 'tool/call') toolCalls.add(String(d['callId']));
      if (e.type === 'tool/result') {
        const block = o(((o(d['message'])?.['content'] as unknown[] | undefined) ?? [])[0]);
        if (block?.['isError'] === true) errorCalls.add(String(block['toolCallId']));
        if (d['isError'] === true) errorCalls.add(String(d['callId'])); // the legacy unwrapped shape
      }
    }
    if (e.type === 'turn/end') inTurn = false;
  }
  return { roots, chats, toolCalls, errorCalls };
}

let receiver: OtlpReceiver;
beforeAll(async () => { receiver = await startOtlpReceiver(); });
afterAll(async () => { await receiver.close(); });

/** Sends one session's export through the receiver; returns what it received for that export. */
async function roundTrip(id: string, events: readonly SessionEvent[], content = false): Promise<ReceivedSpan[]> {
  const before = receiver.spans.length;
  const body = JSON.stringify(otlpTraceRequest(sessionToGenAiSpans(id, events, { content })));
  expect(await postTraces(receiver.endpoint, body)).toBe(200);
  return receiver.spans.slice(before);
}

describe(`GenAI spans of the reference sessions (semconv ${GENAI_SEMCONV_VERSION})`, () => {
  it('has all 36 recorded sessions', () => {
    expect(FILES).toHaveLength(36);
  });

  it.each(FILES)('%s: span tree and attributes follow the conventions and the log', async (file) => {
    const { id, events } = load(file);
    const spans = await roundTrip(id, events);
    const want = expected(events);
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    expect(byId.size).toBe(spans.length); // span ids are unique
    for (const s of spans) {
      expect(s.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(s.spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(s.endTimeUnixNano >= s.startTimeUnixNano).toBe(true);
      expect(s.attributes['gen_ai.conversation.id']).toBe(id);
      expect(s.schemaUrl).toBe(GENAI_SCHEMA_URL);
      expect(typeof s.attributes['palimpsest.seq'] === 'number' || typeof s.attributes['palimpsest.seq.start'] === 'number').toBe(true);
      if (s.parentSpanId !== undefined) {
        const parent = byId.get(s.parentSpanId);
        expect(parent?.name.startsWith('invoke_agent')).toBe(true);
        expect(parent?.traceId).toBe(s.traceId);
      }
    }
    const roots = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'invoke_agent');
    expect(roots).toHaveLength(want.roots);
    for (const r of roots) {
      // invoke_agent internal span: name, kind, required attributes.
      expect(r.name).toBe('invoke_agent');
      expect(r.kind).toBe(KIND_INTERNAL);
      expect(r.parentSpanId).toBeUndefined();
      expect(typeof r.attributes['gen_ai.provider.name']).toBe('string');
      expect(new Set(spans.filter((s) => s.traceId === r.traceId && s.parentSpanId === undefined))).toEqual(new Set([r]));
    }
    const chats = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'chat');
    expect(chats.map((c) => c.attributes['palimpsest.seq'])).toEqual(want.chats);
    for (const c of chats) {
      // Inference span: `{operation} {model}`, CLIENT, provider required, usage ints, finish reasons string[].
      expect(c.kind).toBe(KIND_CLIENT);
      expect(c.name).toBe(`chat ${String(c.attributes['gen_ai.request.model'])}`);
      expect(typeof c.attributes['gen_ai.provider.name']).toBe('string');
      expect(byId.get(c.parentSpanId ?? '')?.attributes['gen_ai.operation.name']).toBe('invoke_agent');
      for (const k of ['gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens']) {
        if (k in c.attributes) expect(Number.isInteger(c.attributes[k])).toBe(true);
      }
      const reasons = c.attributes['gen_ai.response.finish_reasons'];
      if (reasons !== undefined) expect((reasons as unknown[]).every((r) => typeof r === 'string')).toBe(true);
      expect(c.attributes['gen_ai.output.messages']).toBeUndefined(); // opt-in: off by default
    }
    const tools = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'execute_tool');
    expect(new Set(tools.map((t) => t.attributes['gen_ai.tool.call.id']))).toEqual(want.toolCalls);
    for (const t of tools) {
      expect(t.kind).toBe(KIND_INTERNAL);
      expect(t.name).toBe(`execute_tool ${String(t.attributes['gen_ai.tool.name'])}`);
      expect(t.attributes['gen_ai.tool.call.arguments']).toBeUndefined();
      const failed = want.errorCalls.has(String(t.attributes['gen_ai.tool.call.id']));
      expect(t.status.code === STATUS_ERROR).toBe(failed);
      if (failed) expect(typeof t.attributes['error.type']).toBe('string');
    }
    for (const s of spans) expect(['invoke_agent', 'chat', 'execute_tool', undefined]).toContain(s.attributes['gen_ai.operation.name']);
  });

  it('cordis-tool-round: one turn trace with four chat spans and three tool spans, ids derived from session and seq', async () => {
    const { id, events } = load('cordis-tool-round.jsonl');
    const spans = await roundTrip(id, events);
    const root = spans.find((s) => s.name === 'invoke_agent') as ReceivedSpan;
    expect(root.traceId).toBe(genAiTraceId(id, 0));
    expect(root.spanId).toBe(genAiSpanId(id, 0, 'invoke_agent'));
    expect(root.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent', 'gen_ai.provider.name': 'deepseek', 'gen_ai.request.model': 'deepseek-v4-flash',
      'palimpsest.provider': 'deepseek-official', 'palimpsest.turn': 1, 'palimpsest.turn.end_reason': 'completed', 'palimpsest.seq.start': 0,
    });
    expect(spans.filter((s) => s.name === 'chat deepseek-v4-flash')).toHaveLength(4);
    expect(spans.filter((s) => s.name.startsWith('execute_tool ')).map((s) => s.name)).toEqual(['execute_tool cordis_inspect', 'execute_tool cordis_mount', 'execute_tool cordis_unmount']);
    const firstChat = spans.find((s) => s.name.startsWith('chat')) as ReceivedSpan;
    expect(firstChat.attributes['gen_ai.response.finish_reasons']).toEqual(['tool_call']);
    // The root's usage is the sum of its chat spans'.
    const sum = spans.filter((s) => s.name.startsWith('chat')).reduce((n, s) => n + (s.attributes['gen_ai.usage.input_tokens'] as number), 0);
    expect(root.attributes['gen_ai.usage.input_tokens']).toBe(sum);
  });

  it('compaction-recovery: the compaction is a child span of its turn with what it shadowed', async () => {
    const { id, events } = load('compaction-recovery.jsonl');
    const spans = await roundTrip(id, events);
    const c = spans.find((s) => s.name === 'compaction') as ReceivedSpan;
    const root = spans.find((s) => s.name === 'invoke_agent') as ReceivedSpan;
    expect(c.parentSpanId).toBe(root.spanId);
    expect(c.attributes).toMatchObject({ 'palimpsest.seq': 19, 'palimpsest.seq.end': 22, 'palimpsest.compaction.shadowed_events': 1 });
  });

  it('mapping is deterministic: the same log gives the same spans (idempotent re-export)', () => {
    for (const file of FILES) {
      const { id, events } = load(file);
      expect(sessionToGenAiSpans(id, events)).toEqual(sessionToGenAiSpans(id, events));
    }
  });

  it('content only when asked: input/output messages and tool arguments/results with --content', async () => {
    const { id, events } = load('cordis-tool-round.jsonl');
    const spans = await roundTrip(id, events, true);
    const chat = spans.find((s) => s.name.startsWith('chat')) as ReceivedSpan;
    const out = chat.attributes['gen_ai.output.messages'] as { role: string; parts: { type: string }[]; finish_reason: string }[];
    expect(out[0]?.role).toBe('assistant');
    expect(out[0]?.finish_reason).toBe('tool_call');
    expect(out[0]?.parts.some((p) => p.type === 'tool_call')).toBe(true);
    const root = spans.find((s) => s.name === 'invoke_agent') as ReceivedSpan;
    const input = root.attributes['gen_ai.input.messages'] as { role: string; parts: { type: string; content: string }[] }[];
    expect(input[0]?.parts[0]?.content).toMatch(/^Use only Cordis tools/);
    const tool = spans.find((s) => s.name === 'execute_tool cordis_inspect') as ReceivedSpan;
    expect(tool.attributes['gen_ai.tool.call.arguments']).toBeDefined();
    expect(tool.attributes['gen_ai.tool.call.result']).toBeDefined();
  });

  it('a tool result that is an error makes an ERROR execute_tool span with error.type', async () => {
    const { id, events } = load('permission-policy-context.jsonl');
    const spans = await roundTrip(id, events);
    const failed = spans.filter((s) => s.name.startsWith('execute_tool') && s.status.code === STATUS_ERROR);
    expect(failed.length).toBeGreaterThan(0);
  });

  it('every attribute is one of its span table (semconv 1.41.0), gen_ai.conversation.id, error.type or palimpsest.*, content included', () => {
    const request = ['gen_ai.request.choice.count', 'gen_ai.request.model', 'gen_ai.request.seed', 'gen_ai.request.frequency_penalty', 'gen_ai.request.max_tokens',
      'gen_ai.request.presence_penalty', 'gen_ai.request.stop_sequences', 'gen_ai.request.temperature', 'gen_ai.request.top_p'];
    const usage = ['gen_ai.usage.cache_creation.input_tokens', 'gen_ai.usage.cache_read.input_tokens', 'gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens'];
    const content = ['gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.system_instructions', 'gen_ai.tool.definitions'];
    // The attribute tables of the invoke agent internal, inference and execute tool spans at v1.41.0.
    const tables: Record<string, readonly string[]> = {
      invoke_agent: ['gen_ai.operation.name', 'gen_ai.provider.name', 'gen_ai.agent.description', 'gen_ai.agent.id', 'gen_ai.agent.name', 'gen_ai.agent.version',
        'gen_ai.conversation.id', 'gen_ai.data_source.id', 'gen_ai.output.type', ...request, 'gen_ai.response.finish_reasons', ...usage, ...content],
      chat: ['gen_ai.operation.name', 'gen_ai.provider.name', 'gen_ai.conversation.id', 'gen_ai.output.type', ...request, 'gen_ai.request.stream', 'gen_ai.request.top_k',
        'gen_ai.response.finish_reasons', 'gen_ai.response.id', 'gen_ai.response.model', 'gen_ai.response.time_to_first_chunk', ...usage, 'gen_ai.usage.reasoning.output_tokens', ...content],
      execute_tool: ['gen_ai.operation.name', 'gen_ai.tool.name', 'gen_ai.tool.call.id', 'gen_ai.tool.description', 'gen_ai.tool.type', 'gen_ai.tool.call.arguments', 'gen_ai.tool.call.result'],
      none: [],
    };
    const seen = new Set<string>();
    for (const file of FILES) {
      const { id, events } = load(file);
      for (const span of sessionToGenAiSpans(id, events, { content: true })) {
        const table = tables[String(span.attributes['gen_ai.operation.name'] ?? 'none')] as readonly string[];
        for (const key of Object.keys(span.attributes)) {
          seen.add(key);
          if (key.startsWith('palimpsest.') || key === 'error.type' || key === 'gen_ai.conversation.id') continue;
          expect(table, `${span.name}: ${key}`).toContain(key);
        }
      }
    }
    // The opt-in content attributes were exercised.
    expect([...seen]).toEqual(expect.arrayContaining(['gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.tool.call.arguments', 'gen_ai.tool.call.result']));
  });

  it('provider ids map to the well-known values, others stay as they are', () => {
    expect(genAiProviderName('deepseek-official')).toBe('deepseek');
    expect(genAiProviderName('openai')).toBe('openai');
    expect(genAiProviderName('gemini')).toBe('gcp.gemini');
    expect(genAiProviderName('fixture')).toBe('fixture');
  });
});
