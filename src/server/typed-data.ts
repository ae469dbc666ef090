/**
 * Conversions between the typed proto forms of the core vocabulary (content.proto) and the
 * canonical JSON the reference writes. Typed -> JSON is total; JSON -> typed is attempted only for
 * reads that ask for typed data and is returned only when converting back reproduces the JSON
 * exactly (key presence included), so the typed form never loses anything.
 */
import type { Json, JsonObject } from '../domain/event.js';
import { jsonEqual } from '../domain/json.js';
import { MAX_JSON_DEPTH, jsonTextDepth } from '../domain/json-depth.js';
import type {
  AssistantChunkData,
  AssistantMessageData,
  CompactionEndData,
  CompactionPruneData,
  CompactionStartData,
  CompactionSummaryData,
  ContentBlock,
  StreamChunk,
  ToolCallData,
  TurnEndData,
  Message,
  MessageSource,
  TokenUsage,
  ToolResultData,
} from '../../gen/palimpsest/v1/content.js';
import type { EventData } from '../../gen/palimpsest/v1/event.js';

/** Raised when a typed form's embedded JSON text is not JSON. */
export class TypedDataError extends Error {
  constructor(readonly field: string, message: string, readonly tooDeep = false) {
    super(message);
  }
}

function parseEmbedded(text: string, field: string): Json {
  if (jsonTextDepth(text) > MAX_JSON_DEPTH) throw new TypedDataError(field, `${field} nests deeper than ${MAX_JSON_DEPTH} levels`, true);
  try {
    return JSON.parse(text) as Json;
  } catch {
    throw new TypedDataError(field, `${field} is not valid JSON text`);
  }
}

function blockToJson(b: ContentBlock, field: string): Json {
  const v = b.block;
  switch (v?.$case) {
    case 'text':
      return { type: 'text', text: v.value.text };
    case 'reasoning':
      return { type: 'reasoning', text: v.value.text };
    case 'image':
      return { type: 'image', attachment: parseEmbedded(v.value.attachmentJson, `${field}.image.attachment_json`) };
    case 'toolCall':
      return { type: 'tool-call', id: v.value.id, name: v.value.name, arguments: v.value.arguments };
    case 'toolResult': {
      const out: JsonObject = {
        type: 'tool-result',
        toolCallId: v.value.toolCallId,
        content: v.value.content.map((c, i) => blockToJson(c, `${field}.tool_result.content[${i}]`)),
      };
      if (v.value.isError !== undefined) out.isError = v.value.isError;
      return out;
    }
    default:
      throw new TypedDataError(field, `${field} has no block set`);
  }
}

function sourceToJson(s: MessageSource | undefined, field: string): Json {
  const v = s?.kind;
  switch (v?.$case) {
    case 'user':
      return { kind: 'user' };
    case 'plugin': {
      const extra = v.value.fieldsJson === '' ? {} : parseEmbedded(v.value.fieldsJson, `${field}.plugin.fields_json`);
      if (extra === null || typeof extra !== 'object' || Array.isArray(extra)) {
        throw new TypedDataError(`${field}.plugin.fields_json`, `${field}.plugin.fields_json must be a JSON object`);
      }
      return { kind: 'plugin', plugin: v.value.plugin, ...extra };
    }
    case 'model': {
      const out: JsonObject = { kind: 'model', provider: v.value.provider, model: v.value.model };
      if (v.value.replayStateJson !== undefined) out.replayState = parseEmbedded(v.value.replayStateJson, `${field}.model.replay_state_json`);
      return out;
    }
    case 'tool':
      return { kind: 'tool', callId: v.value.callId };
    default:
      throw new TypedDataError(field, `${field} has no kind set`);
  }
}

/** A typed Message as the reference's JSON message object. */
export function messageToJson(m: Message | undefined, field: string): JsonObject {
  if (!m) throw new TypedDataError(field, `${field} is required`);
  return {
    id: m.id,
    role: m.role,
    content: m.content.map((b, i) => blockToJson(b, `${field}.content[${i}]`)),
    source: sourceToJson(m.source, `${field}.source`),
  };
}

/** TokenUsage as the reference JSON. */
export function usageToJson(u: TokenUsage): JsonObject {
  const out: JsonObject = { inputTokens: u.inputTokens, outputTokens: u.outputTokens };
  if (u.cacheReadTokens !== undefined) out.cacheReadTokens = u.cacheReadTokens;
  if (u.cacheWriteTokens !== undefined) out.cacheWriteTokens = u.cacheWriteTokens;
  if (u.reasoningTokens !== undefined) out.reasoningTokens = u.reasoningTokens;
  return out;
}

function assistantToJson(d: AssistantMessageData, field: string): JsonObject {
  const out: JsonObject = { turn: d.turn, step: d.step, message: messageToJson(d.message, `${field}.message`) };
  if (d.usage) out.usage = usageToJson(d.usage);
  if (d.interrupted) out.interrupted = true;
  return out;
}

function toolResultToJson(d: ToolResultData, field: string): JsonObject {
  const out: JsonObject = { turn: d.turn, step: d.step, message: messageToJson(d.message, `${field}.message`) };
  if (d.error) out.error = { name: d.error.name, code: d.error.code };
  if (d.metaJson !== undefined) out.meta = parseEmbedded(d.metaJson, `${field}.meta_json`);
  return out;
}

function objectText(text: string, field: string): JsonObject {
  if (text === '') return {};
  const v = parseEmbedded(text, field);
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new TypedDataError(field, `${field} must be a JSON object`);
  return v;
}

function turnEndToJson(d: TurnEndData, field: string): JsonObject {
  if (!d.reason) throw new TypedDataError(`${field}.reason`, `${field}.reason is required`);
  return { turn: d.turn, reason: { kind: d.reason.kind, ...objectText(d.reason.fieldsJson, `${field}.reason.fields_json`) } };
}

function chunkToJson(c: StreamChunk | undefined, field: string): JsonObject {
  const v = c?.chunk;
  switch (v?.$case) {
    case 'blockStart':
      return { type: 'block-start', index: v.value.index, blockType: v.value.blockType };
    case 'textDelta':
      return { type: 'text-delta', index: v.value.index, text: v.value.text };
    case 'reasoningDelta':
      return { type: 'reasoning-delta', index: v.value.index, text: v.value.text };
    case 'toolCallDelta': {
      const out: JsonObject = { type: 'tool-call-delta', index: v.value.index, id: v.value.id };
      if (v.value.name !== undefined) out.name = v.value.name;
      out.argumentsDelta = v.value.argumentsDelta;
      return out;
    }
    case 'blockEnd':
      if (!v.value.block) throw new TypedDataError(`${field}.block_end.block`, `${field}.block_end.block is required`);
      return { type: 'block-end', index: v.value.index, block: blockToJson(v.value.block, `${field}.block_end.block`) };
    case 'usage':
      return { type: 'usage', usage: usageToJson(v.value) };
    case 'finish': {
      const out: JsonObject = { type: 'finish', reason: parseEmbedded(v.value.reasonJson, `${field}.finish.reason_json`) };
      if (v.value.replayStateJson !== undefined) out.replayState = parseEmbedded(v.value.replayStateJson, `${field}.finish.replay_state_json`);
      return out;
    }
    default:
      throw new TypedDataError(field, `${field} has no chunk set`);
  }
}

function chunkDataToJson(d: AssistantChunkData, field: string): JsonObject {
  return { turn: d.turn, step: d.step, chunk: chunkToJson(d.chunk, `${field}.chunk`) };
}

function toolCallToJson(d: ToolCallData): JsonObject {
  return { turn: d.turn, step: d.step, callId: d.callId, name: d.name, arguments: d.arguments };
}

function compactionStartToJson(d: CompactionStartData | CompactionEndData): JsonObject {
  const out: JsonObject = { compactionId: d.compactionId };
  if (d.sourceCommandId !== undefined) out.sourceCommandId = d.sourceCommandId;
  out.turn = d.turn ?? null;
  if ('error' in d && d.error !== undefined) out.error = d.error;
  return out;
}

function rangeToJson(r: { start: number; end: number } | undefined, field: string): JsonObject {
  if (!r) throw new TypedDataError(field, `${field} is required`);
  return { start: r.start, end: r.end };
}

function compactionSummaryToJson(d: CompactionSummaryData, field: string): JsonObject {
  const out: JsonObject = { compactionId: d.compactionId };
  if (d.sourceCommandId !== undefined) out.sourceCommandId = d.sourceCommandId;
  out.summary = d.summary.map((b, i) => blockToJson(b, `${field}.summary[${i}]`));
  if (d.rawOutput) out.rawOutput = d.rawOutput.blocks.map((b, i) => blockToJson(b, `${field}.raw_output[${i}]`));
  if (d.llmStreamCall) out.llmStreamCall = true;
  out.shadowedRange = rangeToJson(d.shadowedRange, `${field}.shadowed_range`);
  out.shadowedSeqs = [...d.shadowedSeqs];
  out.shadowedTokenCount = d.shadowedTokenCount;
  out.provider = d.provider;
  out.model = d.model;
  if (d.maxTokens !== undefined) out.maxTokens = d.maxTokens;
  if (d.usage) out.usage = usageToJson(d.usage);
  return out;
}

function compactionPruneToJson(d: CompactionPruneData, field: string): JsonObject {
  return { shadowedRange: rangeToJson(d.shadowedRange, `${field}.shadowed_range`), shadowedSeqs: [...d.shadowedSeqs], shadowedTokenCount: d.shadowedTokenCount };
}

/**
 * The JSON value of an EventData, or `undefined` when the data is unset. Throws TypedDataError
 * for malformed embedded JSON; `json` text that does not parse is reported by the caller as NOT_JSON.
 */
export function typedToJson(data: EventData['kind'], field: string): Json | undefined {
  switch (data?.$case) {
    case 'userMessage':
      return messageToJson(data.value, `${field}.user_message`);
    case 'assistantMessage':
      return assistantToJson(data.value, `${field}.assistant_message`);
    case 'toolResult':
      return toolResultToJson(data.value, `${field}.tool_result`);
    case 'turnStart':
      return { turn: data.value.turn };
    case 'turnEnd':
      return turnEndToJson(data.value, `${field}.turn_end`);
    case 'stepStart':
    case 'stepEnd':
      return { turn: data.value.turn, step: data.value.step };
    case 'assistantChunk':
      return chunkDataToJson(data.value, `${field}.assistant_chunk`);
    case 'toolCall':
      return toolCallToJson(data.value);
    case 'compactionStart':
      return compactionStartToJson(data.value);
    case 'compactionSummary':
      return compactionSummaryToJson(data.value, `${field}.compaction_summary`);
    case 'compactionEnd':
      return compactionStartToJson(data.value);
    case 'compactionPrune':
      return compactionPruneToJson(data.value, `${field}.compaction_prune`);
    default:
      return undefined;
  }
}

// ---- JSON -> typed (reads) -------------------------------------------------------------

function isObj(v: Json | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
function str(v: Json | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
function uint(v: Json | undefined): number | undefined {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined;
}

function blockFromJson(v: Json): ContentBlock | undefined {
  if (!isObj(v)) return undefined;
  switch (v.type) {
    case 'text':
      return str(v.text) === undefined ? undefined : { block: { $case: 'text', value: { text: v.text as string } } };
    case 'reasoning':
      return str(v.text) === undefined ? undefined : { block: { $case: 'reasoning', value: { text: v.text as string } } };
    case 'image':
      return v.attachment === undefined ? undefined : { block: { $case: 'image', value: { attachmentJson: JSON.stringify(v.attachment) } } };
    case 'tool-call': {
      const id = str(v.id), name = str(v.name), args = str(v.arguments);
      return id === undefined || name === undefined || args === undefined ? undefined : { block: { $case: 'toolCall', value: { id, name, arguments: args } } };
    }
    case 'tool-result': {
      const id = str(v.toolCallId);
      if (id === undefined || !Array.isArray(v.content)) return undefined;
      const content: ContentBlock[] = [];
      for (const c of v.content) {
        const b = blockFromJson(c);
        if (!b) return undefined;
        content.push(b);
      }
      const isError = typeof v.isError === 'boolean' ? v.isError : undefined;
      return { block: { $case: 'toolResult', value: { toolCallId: id, content, isError } } };
    }
    default:
      return undefined;
  }
}

function sourceFromJson(v: Json | undefined): MessageSource | undefined {
  if (!isObj(v)) return undefined;
  switch (v.kind) {
    case 'user':
      return { kind: { $case: 'user', value: {} } };
    case 'plugin': {
      const plugin = str(v.plugin);
      if (plugin === undefined) return undefined;
      const { kind: _k, plugin: _p, ...rest } = v;
      return { kind: { $case: 'plugin', value: { plugin, fieldsJson: Object.keys(rest).length ? JSON.stringify(rest) : '' } } };
    }
    case 'model': {
      const provider = str(v.provider), model = str(v.model);
      if (provider === undefined || model === undefined) return undefined;
      return { kind: { $case: 'model', value: { provider, model, replayStateJson: v.replayState === undefined ? undefined : JSON.stringify(v.replayState) } } };
    }
    case 'tool': {
      const callId = str(v.callId);
      return callId === undefined ? undefined : { kind: { $case: 'tool', value: { callId } } };
    }
    default:
      return undefined;
  }
}

/** A JSON message object as a typed Message, when that is exact; otherwise undefined. */
export function messageFromJson(v: Json | undefined): Message | undefined {
  if (!isObj(v)) return undefined;
  const id = str(v.id), role = str(v.role);
  if (id === undefined || role === undefined || !Array.isArray(v.content)) return undefined;
  const content: ContentBlock[] = [];
  for (const c of v.content) {
    const b = blockFromJson(c);
    if (!b) return undefined;
    content.push(b);
  }
  const source = sourceFromJson(v.source);
  if (!source) return undefined;
  const m: Message = { id, role, content, source };
  try {
    return jsonEqual(messageToJson(m, 'message'), v) ? m : undefined;
  } catch {
    return undefined;
  }
}

function usageFromJson(v: Json | undefined): TokenUsage | undefined {
  if (!isObj(v)) return undefined;
  const input = uint(v.inputTokens), output = uint(v.outputTokens);
  if (input === undefined || output === undefined) return undefined;
  return { inputTokens: input, outputTokens: output, cacheReadTokens: uint(v.cacheReadTokens), cacheWriteTokens: uint(v.cacheWriteTokens), reasoningTokens: uint(v.reasoningTokens) };
}

/** The typed form of an event's data when it reproduces the JSON exactly; otherwise undefined. */
export function typedFromJson(type: string, data: Json): EventData['kind'] {
  try {
    let kind: EventData['kind'];
    if (type === 'user/message') {
      const m = messageFromJson(data);
      kind = m ? { $case: 'userMessage', value: m } : undefined;
    } else if (type === 'assistant/message' && isObj(data)) {
      const turn = uint(data.turn), step = uint(data.step), message = messageFromJson(data.message);
      if (turn === undefined || step === undefined || !message) return undefined;
      kind = { $case: 'assistantMessage', value: { turn, step, message, usage: usageFromJson(data.usage), interrupted: data.interrupted === true } };
    } else if (type === 'tool/result' && isObj(data)) {
      const turn = uint(data.turn), step = uint(data.step), message = messageFromJson(data.message);
      if (turn === undefined || step === undefined || !message) return undefined;
      const err = isObj(data.error) && str(data.error.name) !== undefined && str(data.error.code) !== undefined
        ? { name: data.error.name as string, code: data.error.code as string } : undefined;
      kind = { $case: 'toolResult', value: { turn, step, message, error: err, metaJson: data.meta === undefined ? undefined : JSON.stringify(data.meta) } };
    }
    else if (isObj(data)) kind = vocabularyFromJson(type, data);
    if (!kind) return undefined;
    return jsonEqual(typedToJson(kind, 'data') ?? null, data) ? kind : undefined;
  } catch {
    return undefined;
  }
}

function seqList(v: Json | undefined): number[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const out: number[] = [];
  for (const x of v) {
    const n = uint(x);
    if (n === undefined) return undefined;
    out.push(n);
  }
  return out;
}

function blocksFromJson(v: Json | undefined): ContentBlock[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const out: ContentBlock[] = [];
  for (const x of v) {
    const b = blockFromJson(x);
    if (!b) return undefined;
    out.push(b);
  }
  return out;
}

function rangeFromJson(v: Json | undefined): { start: number; end: number } | undefined {
  if (!isObj(v)) return undefined;
  const start = uint(v.start), end = uint(v.end);
  return start === undefined || end === undefined ? undefined : { start, end };
}

function chunkFromJson(v: Json | undefined): StreamChunk | undefined {
  if (!isObj(v)) return undefined;
  const index = uint(v.index);
  switch (v.type) {
    case 'block-start': {
      const blockType = str(v.blockType);
      return index === undefined || blockType === undefined ? undefined : { chunk: { $case: 'blockStart', value: { index, blockType } } };
    }
    case 'text-delta':
    case 'reasoning-delta': {
      const text = str(v.text);
      if (index === undefined || text === undefined) return undefined;
      return { chunk: v.type === 'text-delta' ? { $case: 'textDelta', value: { index, text } } : { $case: 'reasoningDelta', value: { index, text } } };
    }
    case 'tool-call-delta': {
      const id = str(v.id), argumentsDelta = str(v.argumentsDelta);
      if (index === undefined || id === undefined || argumentsDelta === undefined) return undefined;
      return { chunk: { $case: 'toolCallDelta', value: { index, id, name: str(v.name), argumentsDelta } } };
    }
    case 'block-end': {
      const block = v.block === undefined ? undefined : blockFromJson(v.block);
      return index === undefined || !block ? undefined : { chunk: { $case: 'blockEnd', value: { index, block } } };
    }
    case 'usage': {
      const usage = usageFromJson(v.usage);
      return usage ? { chunk: { $case: 'usage', value: usage } } : undefined;
    }
    case 'finish':
      return v.reason === undefined ? undefined : { chunk: { $case: 'finish', value: { reasonJson: JSON.stringify(v.reason), replayStateJson: v.replayState === undefined ? undefined : JSON.stringify(v.replayState) } } };
    default:
      return undefined;
  }
}

/** Typed forms of turn/*, step/*, assistant/chunk, tool/call and compaction/* data (exactness is checked by the caller). */
function vocabularyFromJson(type: string, d: JsonObject): EventData['kind'] {
  const turn = uint(d.turn), step = uint(d.step);
  switch (type) {
    case 'turn/start':
      return turn === undefined ? undefined : { $case: 'turnStart', value: { turn } };
    case 'turn/end': {
      if (turn === undefined || !isObj(d.reason) || str(d.reason.kind) === undefined) return undefined;
      const { kind, ...rest } = d.reason;
      return { $case: 'turnEnd', value: { turn, reason: { kind: kind as string, fieldsJson: Object.keys(rest).length ? JSON.stringify(rest) : '' } } };
    }
    case 'step/start':
    case 'step/end':
      if (turn === undefined || step === undefined) return undefined;
      return type === 'step/start' ? { $case: 'stepStart', value: { turn, step } } : { $case: 'stepEnd', value: { turn, step } };
    case 'assistant/chunk': {
      const chunk = chunkFromJson(d.chunk);
      return turn === undefined || step === undefined || !chunk ? undefined : { $case: 'assistantChunk', value: { turn, step, chunk } };
    }
    case 'tool/call': {
      const callId = str(d.callId), name = str(d.name), args = str(d.arguments);
      if (turn === undefined || step === undefined || callId === undefined || name === undefined || args === undefined) return undefined;
      return { $case: 'toolCall', value: { turn, step, callId, name, arguments: args } };
    }
    case 'compaction/start':
    case 'compaction/end': {
      const compactionId = str(d.compactionId);
      if (compactionId === undefined || (d.turn !== null && turn === undefined)) return undefined;
      const base = { compactionId, sourceCommandId: str(d.sourceCommandId), turn: d.turn === null ? undefined : turn };
      return type === 'compaction/start' ? { $case: 'compactionStart', value: base } : { $case: 'compactionEnd', value: { ...base, error: str(d.error) } };
    }
    case 'compaction/summary': {
      const compactionId = str(d.compactionId), summary = blocksFromJson(d.summary), shadowedRange = rangeFromJson(d.shadowedRange);
      const shadowedSeqs = seqList(d.shadowedSeqs), shadowedTokenCount = uint(d.shadowedTokenCount), provider = str(d.provider), model = str(d.model);
      const rawOutput = d.rawOutput === undefined ? undefined : blocksFromJson(d.rawOutput);
      if (compactionId === undefined || !summary || !shadowedRange || !shadowedSeqs || shadowedTokenCount === undefined || provider === undefined || model === undefined) return undefined;
      if (d.rawOutput !== undefined && !rawOutput) return undefined;
      return {
        $case: 'compactionSummary',
        value: {
          compactionId, sourceCommandId: str(d.sourceCommandId), summary, rawOutput: rawOutput ? { blocks: rawOutput } : undefined,
          llmStreamCall: d.llmStreamCall === true, shadowedRange, shadowedSeqs, shadowedTokenCount, provider, model,
          maxTokens: uint(d.maxTokens), usage: usageFromJson(d.usage),
        },
      };
    }
    case 'compaction/prune': {
      const shadowedRange = rangeFromJson(d.shadowedRange), shadowedSeqs = seqList(d.shadowedSeqs), shadowedTokenCount = uint(d.shadowedTokenCount);
      if (!shadowedRange || !shadowedSeqs || shadowedTokenCount === undefined) return undefined;
      return { $case: 'compactionPrune', value: { shadowedRange, shadowedSeqs, shadowedTokenCount } };
    }
    default:
      return undefined;
  }
}
