/**
 * The model history as OpenAI Responses `input` items (ResponseInputItem[]): user messages as
 * `{type:"message", role:"user", content:[input_text | input_image]}`, assistant text as
 * `{type:"message", role:"assistant", content}` (an EasyInputMessage), each tool call as its own
 * `function_call` item (`call_id` kept exactly, `arguments` the raw text) and each result as a
 * `function_call_output` item (a string, or input_text/input_image parts when it holds an
 * image), in the order of the log. Reasoning is left out: Responses takes reasoning items back
 * only with the id and encrypted content it issued, which the log does not hold.
 */
import type { Json, JsonObject } from '../event.js';
import {
  argumentsText, historySteps, imagePlaceholder, imageSource, seqsOf,
  type Block, type HistoryEntry, type RenderedJson, type RenderOptions,
} from './history-steps.js';

/** Format name used in errors and docs. */
export const OPENAI_RESPONSES = 'openai-responses';

function inputParts(blocks: readonly Block[]): JsonObject[] {
  const parts: JsonObject[] = [];
  for (const b of blocks) {
    if (b['type'] === 'text' && typeof b['text'] === 'string') {
      if (b['text'] !== '') parts.push({ type: 'input_text', text: b['text'] });
    }
    else if (b['type'] === 'image') {
      const src = imageSource(b);
      if (src === undefined) parts.push({ type: 'input_text', text: imagePlaceholder(b) });
      else parts.push({ type: 'input_image', detail: 'auto', image_url: src.kind === 'url' ? src.url : `data:${src.mediaType};base64,${src.data}` });
    }
  }
  return parts;
}

/** Renders `entries` (see the module comment). @throws DomainError HISTORY_NOT_RENDERABLE */
export function renderOpenAiResponses(entries: readonly HistoryEntry[], opts: RenderOptions = {}): RenderedJson[] {
  const out: RenderedJson[] = [];
  for (const step of historySteps(entries, OPENAI_RESPONSES, opts)) {
    if (step.kind === 'user') {
      const content = inputParts(step.blocks);
      if (content.length > 0) out.push({ json: { type: 'message', role: 'user', content }, seqs: [step.seq] });
    } else if (step.kind === 'assistant') {
      // Text runs become assistant messages, calls function_call items, in content order.
      let text: string[] = [];
      const flush = (): void => {
        if (text.length > 0) out.push({ json: { type: 'message', role: 'assistant', content: text.join('\n') }, seqs: [step.seq] });
        text = [];
      };
      for (const b of step.blocks) {
        if (b['type'] === 'text' && typeof b['text'] === 'string') {
          if (b['text'] !== '') text.push(b['text']);
        }
        else if (b['type'] === 'image') text.push(imagePlaceholder(b));
        else if (b['type'] === 'tool-call' && typeof b['id'] === 'string') {
          flush();
          out.push({ json: { type: 'function_call', call_id: b['id'], name: typeof b['name'] === 'string' ? b['name'] : '', arguments: argumentsText(b) }, seqs: [step.seq] });
        }
      }
      flush();
    } else {
      for (const r of step.results) {
        const onlyText = r.content.every((b) => b['type'] !== 'image');
        const output: Json = onlyText
          ? r.content.filter((b) => b['type'] === 'text' && typeof b['text'] === 'string').map((b) => b['text'] as string).join('\n')
          : inputParts(r.content);
        out.push({ json: { type: 'function_call_output', call_id: r.callId, output }, seqs: seqsOf([r.seq]) });
      }
    }
  }
  return out;
}
