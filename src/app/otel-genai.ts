/**
 * A session log as OpenTelemetry GenAI spans (issue #41): a pure mapping from a session's
 * committed events to span records. Nothing here does I/O; the ids are derived from the session id
 * and seqs (SHA-256), so mapping the same events again gives the very same spans: a re-export after
 * a crash repeats span ids instead of inventing new ones.
 *
 * The mapping follows the OpenTelemetry semantic conventions for generative AI at the version
 * pinned in GENAI_SEMCONV_VERSION (otel-genai-conventions.ts) (the last release of open-telemetry/semantic-conventions
 * that holds them; later releases moved them to a separate repository). docs/otel-genai.md has the
 * one mapping table; keep it and this file together.
 *
 * The shape:
 *  - one trace per turn (`turn/start` .. `turn/end`), rooted at an `invoke_agent` span (INTERNAL);
 *    a log without any `turn/start` is one trace for the whole session;
 *  - a `chat {model}` span (CLIENT) per `assistant/message`, from its attempt's first chunk to the
 *    message, with model, provider, usage and finish reason;
 *  - an `execute_tool {name}` span (INTERNAL) per tool call (`tool/call`, or a `tool-call` block of
 *    an assistant message without one), from the call to its `tool/result`; ERROR status when the
 *    result is an error;
 *  - a `compaction` span per `compaction/start` .. `compaction/end` and a `prune` span per
 *    `compaction/prune`: children of the turn's span, or their own trace outside any turn.
 * Message content (`gen_ai.input.messages`, `gen_ai.output.messages`, tool arguments and results)
 * only with `content: true`, as the conventions make them opt-in.
 */
import type { Json, JsonObject, SessionEvent } from '../domain/event.js';
import { canonicalData, isLegacyShape } from '../domain/message-view.js';
import {
  genAiTraceId, genAiSpanId, genAiProviderName, genAiFinishReason, str, int, obj, arr, partsOf, parseArguments, messageOf,
  type AttributeValue, type GenAiSpanKind, type GenAiSpan, type GenAiOptions, type GenAiTrace,
} from './otel-genai-conventions.js';
/** Mutable span under construction. */
interface Draft {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: GenAiSpanKind;
  startMs: number;
  endMs: number;
  attributes: Record<string, AttributeValue>;
  status: { code: 'UNSET' | 'ERROR'; message?: string };
}

function freeze(d: Draft): GenAiSpan {
  const out: GenAiSpan = {
    traceId: d.traceId, spanId: d.spanId, name: d.name, kind: d.kind,
    startMs: d.startMs, endMs: Math.max(d.startMs, d.endMs), attributes: d.attributes, status: d.status,
    ...(d.parentSpanId === undefined ? {} : { parentSpanId: d.parentSpanId }),
  };
  return out;
}

/** Events grouped into the traces they make. */
interface Segment {
  readonly kind: 'turn' | 'session' | 'loose';
  readonly events: SessionEvent[];
}

function segmentsOf(events: readonly SessionEvent[]): Segment[] {
  const hasTurns = events.some((e) => e.type === 'turn/start');
  if (!hasTurns) return events.length === 0 ? [] : [{ kind: 'session', events: [...events] }];
  const out: Segment[] = [];
  let current: Segment | undefined;
  let loose: Segment | undefined;
  for (const e of events) {
    if (e.type === 'turn/start') {
      current = { kind: 'turn', events: [e] };
      out.push(current);
      loose = undefined;
      continue;
    }
    if (current !== undefined) {
      current.events.push(e);
      if (e.type === 'turn/end') current = undefined;
      continue;
    }
    if (loose === undefined) {
      loose = { kind: 'loose', events: [] };
      out.push(loose);
    }
    loose.events.push(e);
  }
  return out;
}

/**
 * Maps a session's events (ascending seq, chunks unpacked) to traces. Events outside any turn of
 * a log that has turns give only their compaction and prune spans (each its own trace).
 */
export function sessionToGenAiTraces(sessionId: string, events: readonly SessionEvent[], options: GenAiOptions = {}): GenAiTrace[] {
  const traces: GenAiTrace[] = [];
  // Legacy unwrapped message shapes (older reference logs) are read through the canonical view.
  const canonical = events.map((e) => (isLegacyShape(e.type, e.data) ? { ...e, data: canonicalData(e, sessionId) } : e));
  for (const seg of segmentsOf(canonical)) {
    if (seg.kind === 'loose') {
      for (const t of looseTraces(sessionId, seg.events, options)) traces.push(t);
      continue;
    }
    traces.push(segmentTrace(sessionId, seg, options));
  }
  return traces;
}

/** All spans of {@link sessionToGenAiTraces}, in trace order. */
export function sessionToGenAiSpans(sessionId: string, events: readonly SessionEvent[], options: GenAiOptions = {}): GenAiSpan[] {
  return sessionToGenAiTraces(sessionId, events, options).flatMap((t) => t.spans);
}

function base(sessionId: string, operation: string | undefined): Record<string, AttributeValue> {
  const a: Record<string, AttributeValue> = {};
  if (operation !== undefined) a['gen_ai.operation.name'] = operation;
  a['gen_ai.conversation.id'] = sessionId;
  return a;
}

function looseTraces(sessionId: string, events: readonly SessionEvent[], options: GenAiOptions): GenAiTrace[] {
  const out: GenAiTrace[] = [];
  const builder = new TraceBuilder(sessionId, events, options, undefined);
  for (const s of builder.compactionSpans()) out.push({ kind: 'compaction', rootSeq: s.seq, lastSeq: s.lastSeq, complete: true, spans: [s.span] });
  return out;
}

function segmentTrace(sessionId: string, seg: Segment, options: GenAiOptions): GenAiTrace {
  const first = seg.events[0] as SessionEvent;
  const last = seg.events[seg.events.length - 1] as SessionEvent;
  const traceId = genAiTraceId(sessionId, first.seq);
  const rootId = genAiSpanId(sessionId, first.seq, 'invoke_agent');
  const b = new TraceBuilder(sessionId, seg.events, options, { traceId, spanId: rootId });
  const chats = b.chatSpans();
  const tools = b.toolSpans();
  const compactions = b.compactionSpans().map((s) => s.span);

  const root: Draft = {
    traceId, spanId: rootId, name: options.agentName ? `invoke_agent ${options.agentName}` : 'invoke_agent', kind: 'INTERNAL',
    startMs: first.time, endMs: seg.events.reduce((m, e) => Math.max(m, e.time), first.time),
    attributes: base(sessionId, 'invoke_agent'), status: { code: 'UNSET' },
  };
  const a = root.attributes;
  const provider = b.provider();
  // Required by the invoke_agent table; `_OTHER` is not defined for it, so the log's own word or 'unknown'.
  a['gen_ai.provider.name'] = provider === undefined ? 'unknown' : genAiProviderName(provider);
  if (options.agentName) a['gen_ai.agent.name'] = options.agentName;
  const model = b.requestModel();
  if (model !== undefined) a['gen_ai.request.model'] = model;
  const usage = sumUsage(chats);
  for (const [k, v] of Object.entries(usage)) a[k] = v;
  const reasons = chats.flatMap((c) => (c.attributes['gen_ai.response.finish_reasons'] as readonly string[] | undefined) ?? []);
  if (reasons.length > 0) a['gen_ai.response.finish_reasons'] = reasons.slice(-1);
  a['palimpsest.seq.start'] = first.seq;
  a['palimpsest.seq.end'] = last.seq;
  if (provider !== undefined) a['palimpsest.provider'] = provider;
  const complete = seg.kind !== 'turn' || last.type === 'turn/end';
  if (seg.kind === 'turn') {
    const turn = int(obj(first.data)?.['turn']);
    if (turn !== undefined) a['palimpsest.turn'] = turn;
    if (!complete) a['palimpsest.turn.open'] = true;
    const reason = obj(obj(last.data)?.['reason']);
    const kind = last.type === 'turn/end' ? str(reason?.['kind']) : undefined;
    if (kind !== undefined) a['palimpsest.turn.end_reason'] = kind;
    if (kind === 'error') {
      const error = obj(reason?.['error']);
      root.status = { code: 'ERROR', ...(str(error?.['message']) === undefined ? {} : { message: str(error?.['message']) as string }) };
      a['error.type'] = str(error?.['code']) ?? '_OTHER';
    }
  }
  if (options.content === true) {
    const inputs = seg.events.filter((e) => e.type === 'user/message').map((e) => ({ role: 'user', parts: partsOf(messageOf(e)?.['content']) }));
    if (inputs.length > 0) a['gen_ai.input.messages'] = inputs;
    const lastChat = chats.at(-1);
    const out = lastChat?.attributes['gen_ai.output.messages'];
    if (out !== undefined) a['gen_ai.output.messages'] = out as Json;
  }
  return { kind: seg.kind === 'turn' ? 'turn' : 'session', rootSeq: first.seq, lastSeq: last.seq, complete, spans: [freeze(root), ...chats.map(freeze), ...tools.map(freeze), ...compactions] };
}

function sumUsage(chats: readonly Draft[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of chats) {
    for (const k of ['gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens', 'gen_ai.usage.cache_read.input_tokens', 'gen_ai.usage.cache_creation.input_tokens']) {
      const v = c.attributes[k];
      if (typeof v === 'number') out[k] = (out[k] ?? 0) + v;
    }
  }
  return out;
}

/** Builds the child spans of one trace (or the loose compaction spans). */
class TraceBuilder {
  readonly #bySeq = new Map<number, SessionEvent>();
  /** The provider/model of the latest request/header or request/context, as the log goes. */
  readonly #config: { seq: number; provider?: string; model?: string }[] = [];

  constructor(
    private readonly sessionId: string,
    private readonly events: readonly SessionEvent[],
    private readonly options: GenAiOptions,
    private readonly parent: { traceId: string; spanId: string } | undefined,
  ) {
    for (const e of events) {
      this.#bySeq.set(e.seq, e);
      const d = obj(e.data);
      if (e.type === 'request/header') {
        const c = obj(obj(d?.['header'])?.['config']);
        this.#config.push({ seq: e.seq, ...(str(c?.['provider']) ? { provider: str(c?.['provider']) } : {}), ...(str(c?.['model']) ? { model: str(c?.['model']) } : {}) });
      } else if (e.type === 'request/context') {
        this.#config.push({ seq: e.seq, ...(str(d?.['provider']) ? { provider: str(d?.['provider']) } : {}), ...(str(d?.['model']) ? { model: str(d?.['model']) } : {}) });
      }
    }
  }

  /** The first provider the trace names (request config, else an assistant message's source). */
  provider(): string | undefined {
    for (const c of this.#config) if (c.provider !== undefined) return c.provider;
    for (const e of this.events) if (e.type === 'assistant/message') {
      const p = str(obj(messageOf(e)?.['source'])?.['provider']);
      if (p !== undefined) return p;
    }
    return undefined;
  }

  /** The model first requested in the trace. */
  requestModel(): string | undefined {
    for (const c of this.#config) if (c.model !== undefined) return c.model;
    for (const e of this.events) if (e.type === 'assistant/message') {
      const m = str(obj(messageOf(e)?.['source'])?.['model']);
      if (m !== undefined) return m;
    }
    return undefined;
  }

  #configAt(seq: number): { provider?: string; model?: string } {
    let out: { provider?: string; model?: string } = {};
    for (const c of this.#config) if (c.seq < seq) out = { ...out, ...c };
    return out;
  }

  chatSpans(): Draft[] {
    if (this.parent === undefined) return [];
    const out: Draft[] = [];
    for (const e of this.events) {
      if (e.type !== 'assistant/message') continue;
      const d = obj(e.data) ?? {};
      const message = messageOf(e);
      const source = obj(message?.['source']);
      const cfg = this.#configAt(e.seq);
      const model = str(source?.['model']) ?? cfg.model;
      const provider = str(source?.['provider']) ?? cfg.provider;
      // The attempt's chunks are the message's sourceEventSeqs (docs/events.md).
      const chunks = (e.sourceEventSeqs ?? []).map((s) => this.#bySeq.get(s)).filter((c): c is SessionEvent => c?.type === 'assistant/chunk');
      // A chunk time of 0 is a log without clocks (some reference logs): not a start.
      const clocked = chunks.filter((c) => c.time > 0 && c.time <= e.time);
      const start = clocked.reduce((m, c) => Math.min(m, c.time), e.time);
      const a = base(this.sessionId, 'chat');
      a['gen_ai.provider.name'] = provider === undefined ? 'unknown' : genAiProviderName(provider);
      if (model !== undefined) a['gen_ai.request.model'] = model;
      if (str(source?.['model']) !== undefined) a['gen_ai.response.model'] = str(source?.['model']) as string;
      if (chunks.length > 0) a['gen_ai.request.stream'] = true;
      let finish: string | undefined;
      let chunkUsage: JsonObject | undefined;
      for (const c of chunks) {
        const chunk = obj(obj(c.data)?.['chunk']);
        if (str(chunk?.['type']) === 'finish') finish = str(obj(chunk?.['reason'])?.['kind']) ?? str(chunk?.['reason']);
        if (str(chunk?.['type']) === 'usage') chunkUsage = obj(chunk?.['usage']);
      }
      if (d['interrupted'] === true && finish === undefined) finish = 'interrupted';
      if (finish !== undefined) a['gen_ai.response.finish_reasons'] = [genAiFinishReason(finish)];
      const usage = obj(d['usage']) ?? chunkUsage;
      const input = int(usage?.['inputTokens']);
      const output = int(usage?.['outputTokens']);
      const cacheRead = int(usage?.['cacheReadTokens']);
      const cacheWrite = int(usage?.['cacheWriteTokens']) ?? int(usage?.['cacheCreationTokens']);
      const reasoning = int(usage?.['reasoningTokens']);
      if (input !== undefined) a['gen_ai.usage.input_tokens'] = input;
      if (output !== undefined) a['gen_ai.usage.output_tokens'] = output;
      if (cacheRead !== undefined) a['gen_ai.usage.cache_read.input_tokens'] = cacheRead;
      if (cacheWrite !== undefined) a['gen_ai.usage.cache_creation.input_tokens'] = cacheWrite;
      if (reasoning !== undefined) a['gen_ai.usage.reasoning.output_tokens'] = reasoning;
      if (provider !== undefined) a['palimpsest.provider'] = provider;
      a['palimpsest.seq'] = e.seq;
      if (chunks.length > 0) a['palimpsest.seq.first_chunk'] = (chunks[0] as SessionEvent).seq;
      const id = str(message?.['id']);
      if (id !== undefined) a['palimpsest.message.id'] = id;
      const status: Draft['status'] = { code: 'UNSET' };
      if (finish === 'error') {
        status.code = 'ERROR';
        a['error.type'] = '_OTHER';
      }
      if (this.options.content === true) {
        a['gen_ai.output.messages'] = [{ role: 'assistant', parts: partsOf(message?.['content']), finish_reason: genAiFinishReason(finish ?? 'stop') }];
      }
      out.push({
        traceId: this.parent.traceId, spanId: genAiSpanId(this.sessionId, e.seq, 'chat'), parentSpanId: this.parent.spanId,
        name: model === undefined ? 'chat' : `chat ${model}`, kind: 'CLIENT', startMs: start, endMs: e.time, attributes: a, status,
      });
    }
    return out;
  }

  toolSpans(): Draft[] {
    if (this.parent === undefined) return [];
    // Calls: tool/call events, plus tool-call blocks of assistant messages that have none.
    const calls = new Map<string, { seq: number; time: number; name: string; args: Json | undefined }>();
    const anonymous: { seq: number; time: number; name: string; args: Json | undefined }[] = [];
    for (const e of this.events) {
      if (e.type !== 'tool/call') continue;
      const d = obj(e.data) ?? {};
      const call = { seq: e.seq, time: e.time, name: str(d['name']) ?? '', args: d['arguments'] };
      const id = str(d['callId']);
      if (id === undefined || calls.has(id)) anonymous.push(call);
      else calls.set(id, call);
    }
    for (const e of this.events) {
      if (e.type !== 'assistant/message') continue;
      for (const b of arr(messageOf(e)?.['content'])) {
        const block = obj(b);
        const id = str(block?.['id']);
        if (str(block?.['type']) !== 'tool-call' || id === undefined || calls.has(id)) continue;
        calls.set(id, { seq: e.seq, time: e.time, name: str(block?.['name']) ?? '', args: block?.['arguments'] });
      }
    }
    const results = new Map<string, SessionEvent>();
    for (const e of this.events) {
      if (e.type !== 'tool/result') continue;
      const m = messageOf(e);
      const id = str(obj(m?.['source'])?.['callId']) ?? str(obj(arr(m?.['content'])[0])?.['toolCallId']) ?? str(obj(e.data)?.['callId']);
      // The first result of a call (later ones are prune copies replacing it).
      if (id !== undefined && !results.has(id)) results.set(id, e);
    }
    const out: Draft[] = [];
    const make = (callId: string | undefined, call: { seq: number; time: number; name: string; args: Json | undefined }): void => {
      const result = callId === undefined ? undefined : results.get(callId);
      const a = base(this.sessionId, 'execute_tool');
      a['gen_ai.tool.name'] = call.name;
      if (callId !== undefined) a['gen_ai.tool.call.id'] = callId;
      a['gen_ai.tool.type'] = 'function';
      a['palimpsest.seq'] = call.seq;
      const status: Draft['status'] = { code: 'UNSET' };
      if (result === undefined) a['palimpsest.tool.result_missing'] = true;
      else {
        a['palimpsest.seq.result'] = result.seq;
        const rd = obj(result.data) ?? {};
        const block = obj(arr(messageOf(result)?.['content']).find((b) => str(obj(b)?.['type']) === 'tool-result'));
        const error = obj(rd['error']);
        if (block?.['isError'] === true || error !== undefined) {
          status.code = 'ERROR';
          const msg = str(error?.['message']);
          if (msg !== undefined) status.message = msg;
          a['error.type'] = str(error?.['code']) ?? str(error?.['name']) ?? '_OTHER';
        }
        if (this.options.content === true && status.code !== 'ERROR') a['gen_ai.tool.call.result'] = block?.['content'] ?? null;
      }
      if (this.options.content === true && call.args !== undefined) a['gen_ai.tool.call.arguments'] = parseArguments(call.args);
      out.push({
        traceId: (this.parent as { traceId: string }).traceId, spanId: genAiSpanId(this.sessionId, call.seq, `execute_tool:${callId ?? ''}`),
        parentSpanId: (this.parent as { spanId: string }).spanId, name: `execute_tool ${call.name}`, kind: 'INTERNAL',
        startMs: call.time, endMs: result?.time ?? call.time, attributes: a, status,
      });
    };
    for (const [id, call] of calls) make(id, call);
    for (const call of anonymous) make(undefined, call);
    out.sort((x, y) => (x.attributes['palimpsest.seq'] as number) - (y.attributes['palimpsest.seq'] as number));
    return out;
  }

  /** Compaction (start..end) and prune spans, each with the seq it is keyed by and its last seq. */
  compactionSpans(): { seq: number; lastSeq: number; span: GenAiSpan }[] {
    const out: { seq: number; lastSeq: number; span: GenAiSpan }[] = [];
    const open = new Map<string, { start: SessionEvent; summary?: SessionEvent }>();
    const emit = (seq: number, lastSeq: number, name: string, startMs: number, endMs: number, a: Record<string, AttributeValue>): void => {
      const traceId = this.parent?.traceId ?? genAiTraceId(this.sessionId, seq);
      out.push({
        seq, lastSeq,
        span: freeze({
          traceId, spanId: genAiSpanId(this.sessionId, seq, name), ...(this.parent ? { parentSpanId: this.parent.spanId } : {}),
          name, kind: 'INTERNAL', startMs, endMs, attributes: a, status: { code: 'UNSET' },
        }),
      });
    };
    const shadowed = (d: JsonObject | undefined, a: Record<string, AttributeValue>): void => {
      const seqs = arr(d?.['shadowedSeqs']);
      a['palimpsest.compaction.shadowed_events'] = seqs.length;
      const tokens = int(d?.['shadowedTokenCount']);
      if (tokens !== undefined) a['palimpsest.compaction.shadowed_tokens'] = tokens;
      const range = obj(d?.['shadowedRange']);
      const s = int(range?.['start']);
      const en = int(range?.['end']);
      if (s !== undefined && en !== undefined) {
        a['palimpsest.compaction.shadowed_range.start'] = s;
        a['palimpsest.compaction.shadowed_range.end'] = en;
      }
    };
    for (const e of this.events) {
      const d = obj(e.data);
      const cid = str(d?.['compactionId']);
      if (e.type === 'compaction/start' && cid !== undefined) open.set(cid, { start: e });
      else if (e.type === 'compaction/summary' && cid !== undefined) {
        const o = open.get(cid);
        if (o !== undefined) o.summary = e;
      } else if (e.type === 'compaction/end' && cid !== undefined) {
        const o = open.get(cid);
        if (o === undefined) continue;
        open.delete(cid);
        const a = base(this.sessionId, undefined);
        a['palimpsest.compaction.id'] = cid;
        a['palimpsest.seq'] = o.start.seq;
        a['palimpsest.seq.end'] = e.seq;
        const sd = o.summary === undefined ? undefined : obj(o.summary.data);
        shadowed(sd, a);
        const provider = str(sd?.['provider']);
        const model = str(sd?.['model']);
        if (provider !== undefined) a['palimpsest.compaction.provider'] = provider;
        if (model !== undefined) a['palimpsest.compaction.model'] = model;
        const usage = obj(sd?.['usage']);
        const input = int(usage?.['inputTokens']);
        const output = int(usage?.['outputTokens']);
        if (input !== undefined) a['palimpsest.compaction.usage.input_tokens'] = input;
        if (output !== undefined) a['palimpsest.compaction.usage.output_tokens'] = output;
        emit(o.start.seq, e.seq, 'compaction', o.start.time, e.time, a);
      } else if (e.type === 'compaction/prune') {
        const a = base(this.sessionId, undefined);
        a['palimpsest.seq'] = e.seq;
        shadowed(d, a);
        emit(e.seq, e.seq, 'prune', e.time, e.time, a);
      }
    }
    return out;
  }
}
