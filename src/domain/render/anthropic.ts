/**
 * The model history as Anthropic Messages `messages` (MessageParam[]): text and `image` blocks
 * (base64 with its media type, or a URL source); assistant `tool_use` blocks (id kept exactly,
 * `input` the parsed arguments object); results as `tool_result` blocks at the start of the next
 * user message. Roles alternate: adjacent messages of one role are merged in order (results first,
 * then the user's text, as the API requires). Reasoning goes back as a `thinking` block only with
 * the signature Anthropic issued for it (`signature` on the reasoning block); otherwise it is
 * left out, since the API refuses unsigned thinking. An image in an assistant message becomes a
 * text placeholder (images go in user turns only).
 */
import type { JsonObject } from '../event.js';
import {
  argumentsObject, historySteps, imagePlaceholder, imageSource, notRenderable, RenderRule, seqsOf,
  type Block, type HistoryEntry, type RenderedJson, type RenderOptions,
} from './history-steps.js';

/** Format name used in errors and docs. */
export const ANTHROPIC = 'anthropic';

function contentBlock(b: Block): JsonObject | undefined {
  if (b['type'] === 'text' && typeof b['text'] === 'string') return b['text'] === '' ? undefined : { type: 'text', text: b['text'] };
  if (b['type'] === 'image') {
    const src = imageSource(b);
    if (src === undefined) return { type: 'text', text: imagePlaceholder(b) };
    return { type: 'image', source: src.kind === 'url' ? { type: 'url', url: src.url } : { type: 'base64', media_type: src.mediaType, data: src.data } };
  }
  return undefined;
}

/** Appends a message, merging it into the previous one of the same role. */
function push(out: { role: string; content: JsonObject[]; seqs: (number | undefined)[] }[], role: string, content: JsonObject[], seqs: (number | undefined)[]): void {
  if (content.length === 0) return;
  const last = out[out.length - 1];
  if (last !== undefined && last.role === role) {
    last.content.push(...content);
    last.seqs.push(...seqs);
  } else out.push({ role, content, seqs });
}

/** Renders `entries` (see the module comment). @throws DomainError HISTORY_NOT_RENDERABLE */
export function renderAnthropic(entries: readonly HistoryEntry[], opts: RenderOptions = {}): RenderedJson[] {
  const acc: { role: string; content: JsonObject[]; seqs: (number | undefined)[] }[] = [];
  for (const step of historySteps(entries, ANTHROPIC, opts)) {
    if (step.kind === 'user') {
      push(acc, 'user', step.blocks.map(contentBlock).filter((b): b is JsonObject => b !== undefined), [step.seq]);
    } else if (step.kind === 'assistant') {
      const content: JsonObject[] = [];
      for (const b of step.blocks) {
        if (b['type'] === 'reasoning') {
          if (typeof b['signature'] === 'string' && typeof b['text'] === 'string') content.push({ type: 'thinking', thinking: b['text'], signature: b['signature'] });
        } else if (b['type'] === 'tool-call' && typeof b['id'] === 'string') {
          const input = argumentsObject(b);
          if (input === undefined) throw notRenderable(ANTHROPIC, step.seq, RenderRule.ARGUMENTS_NOT_OBJECT, `the arguments of tool call ${JSON.stringify(b['id'])} are not a JSON object`);
          content.push({ type: 'tool_use', id: b['id'], name: typeof b['name'] === 'string' ? b['name'] : '', input });
        } else if (b['type'] === 'image') {
          // Images go in user turns only.
          content.push({ type: 'text', text: imagePlaceholder(b) });
        } else {
          const c = contentBlock(b);
          if (c !== undefined) content.push(c);
        }
      }
      push(acc, 'assistant', content, [step.seq]);
    } else {
      const content: JsonObject[] = step.results.map((r) => {
        const inner = r.content.map(contentBlock).filter((b): b is JsonObject => b !== undefined);
        const block: JsonObject = { type: 'tool_result', tool_use_id: r.callId, content: inner };
        if (r.isError) block['is_error'] = true;
        return block;
      });
      push(acc, 'user', content, step.results.map((r) => r.seq));
    }
  }
  return acc.map((m) => ({ json: { role: m.role, content: m.content }, seqs: seqsOf(m.seqs) }));
}
