/**
 * The token count of a rendered provider message (issue #34 item 4): the one estimator
 * (domain/token-estimate.ts) applied to what the message carries, read back from its provider
 * JSON as the estimator's content blocks:
 *
 * - a text part (a string `content`, `text`, `input_text`, Gemini `{text}`) is a `text` block;
 *   Anthropic `thinking` is a `reasoning` block;
 * - a tool call (`tool_calls[i].function`, a `function_call` item, `tool_use`, `functionCall`) is
 *   a `tool-call` block of its name and its arguments as sent (the raw text for OpenAI, the JSON
 *   text of `input` / `args` for Anthropic and Gemini);
 * - a tool result (a `tool` message, a `function_call_output` item, `tool_result`,
 *   `functionResponse`) is a `tool-result` block over its content read the same way (Gemini's
 *   `response.output` / `response.error` text);
 * - anything else (an image part) is an other block: 4 + its JSON length / 4;
 * - plus 4 for the message's role framing.
 *
 * So a rendered message that carries the same blocks as a DSH message has the DSH message's
 * count; merging messages saves their framing, splitting one adds framing, and what a format
 * leaves out (reasoning, empty text) is not counted. For a history of text, calls with compact
 * JSON arguments and text results, the counts over the rendering add up to `surface_tokens` +
 * 4 x (rendered messages - DSH messages) (test/unit/render-tokens.test.ts).
 *
 * Cached per rendered message object (rendered messages are immutable; an incremental
 * rendering keeps the reused ones).
 */
import type { Json, JsonObject } from '../event.js';
import { isJsonObject } from '../json.js';
import { estimateContentTokens, ROLE_OVERHEAD_TOKENS } from '../token-estimate.js';
import type { ProviderFormat } from './formats.js';

type Blocks = Json[];

const str = (v: Json | undefined): string => (typeof v === 'string' ? v : '');

function textBlock(out: Blocks, s: Json | undefined): void {
  if (typeof s === 'string' && s !== '') out.push({ type: 'text', text: s });
}

function callBlock(out: Blocks, name: Json | undefined, args: Json | undefined): void {
  out.push({ type: 'tool-call', name: str(name), arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) });
}

function resultBlock(out: Blocks, content: Blocks): void {
  out.push({ type: 'tool-result', content });
}

/** OpenAI content: a string, or text / input_text parts and image parts. */
function openAiContent(out: Blocks, c: Json | undefined): Blocks {
  if (typeof c === 'string') textBlock(out, c);
  else if (Array.isArray(c)) {
    for (const p of c as Json[]) {
      if (isJsonObject(p) && (p['type'] === 'text' || p['type'] === 'input_text')) textBlock(out, p['text']);
      else out.push(p);
    }
  }
  return out;
}

function openAiChat(m: JsonObject): Blocks {
  if (m['role'] === 'tool') {
    const out: Blocks = [];
    resultBlock(out, openAiContent([], m['content']));
    return out;
  }
  const out = openAiContent([], m['content']);
  const calls = m['tool_calls'];
  if (Array.isArray(calls)) {
    for (const c of calls as Json[]) {
      const f = isJsonObject(c) ? c['function'] : undefined;
      if (isJsonObject(f)) callBlock(out, f['name'], f['arguments']);
    }
  }
  return out;
}

function openAiResponses(m: JsonObject): Blocks {
  const out: Blocks = [];
  if (m['type'] === 'function_call') callBlock(out, m['name'], m['arguments']);
  else if (m['type'] === 'function_call_output') resultBlock(out, openAiContent([], m['output']));
  else openAiContent(out, m['content']);
  return out;
}

function anthropicContent(out: Blocks, c: Json | undefined): Blocks {
  if (typeof c === 'string') textBlock(out, c);
  else if (Array.isArray(c)) {
    for (const b of c as Json[]) {
      if (!isJsonObject(b)) out.push(b);
      else if (b['type'] === 'text') textBlock(out, b['text']);
      else if (b['type'] === 'thinking') out.push({ type: 'reasoning', text: str(b['thinking']) });
      else if (b['type'] === 'tool_use') callBlock(out, b['name'], b['input']);
      else if (b['type'] === 'tool_result') resultBlock(out, anthropicContent([], b['content']));
      else out.push(b);
    }
  }
  return out;
}

function gemini(m: JsonObject): Blocks {
  const out: Blocks = [];
  const parts = m['parts'];
  if (!Array.isArray(parts)) return out;
  for (const p of parts as Json[]) {
    if (!isJsonObject(p)) out.push(p);
    else if (typeof p['text'] === 'string') textBlock(out, p['text']);
    else if (isJsonObject(p['functionCall'])) callBlock(out, p['functionCall']['name'], p['functionCall']['args']);
    else if (isJsonObject(p['functionResponse'])) {
      const r = p['functionResponse']['response'];
      const inner: Blocks = [];
      if (isJsonObject(r)) textBlock(inner, r['output'] ?? r['error']);
      resultBlock(out, inner);
    } else out.push(p);
  }
  return out;
}

/** The estimator's content blocks a rendered message carries (see the module comment). */
export function renderedBlocks(format: ProviderFormat, json: Json): Blocks {
  if (!isJsonObject(json)) return [];
  switch (format) {
    case 'openai-chat':
      return openAiChat(json);
    case 'openai-responses':
      return openAiResponses(json);
    case 'anthropic':
      return anthropicContent([], json['content']);
    case 'gemini':
      return gemini(json);
  }
}

/** The estimated tokens of one rendered provider message (see the module comment). */
export function renderedMessageTokens(format: ProviderFormat, json: Json): number {
  if (!isJsonObject(json)) return ROLE_OVERHEAD_TOKENS;
  return estimateContentTokens(renderedBlocks(format, json)) + ROLE_OVERHEAD_TOKENS;
}
