/**
 * The model history as OpenAI Chat Completions `messages` (ChatCompletionMessageParam[]): user
 * messages with text and `image_url` parts; assistant messages with their text as `content` and
 * their calls as `tool_calls` (`type:"function"`, the call id and the raw arguments text kept
 * exactly); one `role:"tool"` message per result, right after its assistant message, in the order
 * the results came. Reasoning is left out (Chat Completions takes none back); an image inside a
 * tool result or an assistant message becomes a text placeholder (only user messages take images).
 */
import type { Json, JsonObject } from '../event.js';
import {
  argumentsText, historySteps, imagePlaceholder, imageSource, seqsOf,
  type Block, type HistoryEntry, type RenderedJson, type RenderOptions,
} from './history-steps.js';

/** Format name used in errors and docs. */
export const OPENAI_CHAT = 'openai-chat';

function userContent(blocks: readonly Block[]): Json {
  const parts: JsonObject[] = [];
  for (const b of blocks) {
    if (b['type'] === 'text' && typeof b['text'] === 'string') {
      if (b['text'] !== '') parts.push({ type: 'text', text: b['text'] });
    }
    else if (b['type'] === 'image') {
      const src = imageSource(b);
      if (src === undefined) parts.push({ type: 'text', text: imagePlaceholder(b) });
      else parts.push({ type: 'image_url', image_url: { url: src.kind === 'url' ? src.url : `data:${src.mediaType};base64,${src.data}` } });
    }
  }
  if (parts.length === 1 && parts[0]!['type'] === 'text') return parts[0]!['text'] as string;
  return parts;
}

/** Text of blocks with images as placeholders (for places that take text only). */
function textWithPlaceholders(blocks: readonly Block[]): string {
  const xs: string[] = [];
  for (const b of blocks) {
    if (b['type'] === 'text' && typeof b['text'] === 'string') {
      if (b['text'] !== '') xs.push(b['text']);
    }
    else if (b['type'] === 'image') xs.push(imagePlaceholder(b));
  }
  return xs.join('\n');
}

/** Renders `entries` (see the module comment). @throws DomainError HISTORY_NOT_RENDERABLE */
export function renderOpenAiChat(entries: readonly HistoryEntry[], opts: RenderOptions = {}): RenderedJson[] {
  const out: RenderedJson[] = [];
  for (const step of historySteps(entries, OPENAI_CHAT, opts)) {
    if (step.kind === 'user') {
      const content = userContent(step.blocks);
      if (content === '' || (Array.isArray(content) && content.length === 0)) continue;
      out.push({ json: { role: 'user', content }, seqs: [step.seq] });
    } else if (step.kind === 'assistant') {
      const calls: JsonObject[] = [];
      for (const b of step.blocks) {
        if (b['type'] === 'tool-call' && typeof b['id'] === 'string') {
          calls.push({ id: b['id'], type: 'function', function: { name: typeof b['name'] === 'string' ? b['name'] : '', arguments: argumentsText(b) } });
        }
      }
      const text = textWithPlaceholders(step.blocks.filter((b) => b['type'] !== 'tool-call' && b['type'] !== 'reasoning'));
      if (text === '' && calls.length === 0) continue;
      const msg: JsonObject = { role: 'assistant', content: text === '' ? null : text };
      if (calls.length > 0) msg['tool_calls'] = calls;
      out.push({ json: msg, seqs: [step.seq] });
    } else {
      for (const r of step.results) {
        out.push({ json: { role: 'tool', tool_call_id: r.callId, content: textWithPlaceholders(r.content) }, seqs: seqsOf([r.seq]) });
      }
    }
  }
  return out;
}


