/**
 * Conversions between the typed proto forms of the core vocabulary (content.proto) and the
 * canonical JSON the reference writes. Typed -> JSON is total; JSON -> typed is attempted only for
 * reads that ask for typed data and is returned only when converting back reproduces the JSON
 * exactly (key presence included), so the typed form never loses anything.
 */
import type { Json, JsonObject } from '../domain/event.js';
import { jsonEqual } from '../domain/json.js';
import { MAX_JSON_DEPTH, jsonTextDepth } from '../app/json-depth.js';
import type {
  AssistantMessageData,
  ContentBlock,
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
    if (!kind) return undefined;
    return jsonEqual(typedToJson(kind, 'data') ?? null, data) ? kind : undefined;
  } catch {
    return undefined;
  }
}
