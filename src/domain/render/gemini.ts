/**
 * The model history as Gemini `contents` (Content[]): `role:"user"` and `role:"model"` contents
 * whose parts are `text`, `inlineData` (base64 with its mime type) or `fileData` (a URL),
 * `functionCall` (the call id kept in `id`, `args` the parsed arguments object) and, in a user
 * content, `functionResponse` (`id`, `name`, `response: {output}` or `{error}` for an error
 * result); an image inside a result follows its functionResponse as an `inlineData` part. Roles
 * alternate: adjacent contents of one role are merged in order. Reasoning is left out (Gemini's
 * thoughts are not sent back as text).
 */
import type { JsonObject } from '../event.js';
import {
  argumentsObject, historySteps, imagePlaceholder, imageSource, notRenderable, RenderRule, seqsOf,
  type Block, type HistoryEntry, type RenderedJson, type RenderOptions,
} from './history-steps.js';

/** Format name used in errors and docs. */
export const GEMINI = 'gemini';

function part(b: Block): JsonObject | undefined {
  if (b['type'] === 'text' && typeof b['text'] === 'string') return b['text'] === '' ? undefined : { text: b['text'] };
  if (b['type'] === 'image') {
    const src = imageSource(b);
    if (src === undefined) return { text: imagePlaceholder(b) };
    if (src.kind === 'base64') return { inlineData: { mimeType: src.mediaType, data: src.data } };
    return src.mediaType === undefined ? { fileData: { fileUri: src.url } } : { fileData: { fileUri: src.url, mimeType: src.mediaType } };
  }
  return undefined;
}

function push(out: { role: string; parts: JsonObject[]; seqs: (number | undefined)[] }[], role: string, parts: JsonObject[], seqs: (number | undefined)[]): void {
  if (parts.length === 0) return;
  const last = out[out.length - 1];
  if (last !== undefined && last.role === role) {
    last.parts.push(...parts);
    last.seqs.push(...seqs);
  } else out.push({ role, parts, seqs });
}

/** Renders `entries` (see the module comment). @throws DomainError HISTORY_NOT_RENDERABLE */
export function renderGemini(entries: readonly HistoryEntry[], opts: RenderOptions = {}): RenderedJson[] {
  const acc: { role: string; parts: JsonObject[]; seqs: (number | undefined)[] }[] = [];
  for (const step of historySteps(entries, GEMINI, opts)) {
    if (step.kind === 'user') {
      push(acc, 'user', step.blocks.map(part).filter((p): p is JsonObject => p !== undefined), [step.seq]);
    } else if (step.kind === 'assistant') {
      const parts: JsonObject[] = [];
      for (const b of step.blocks) {
        if (b['type'] === 'tool-call' && typeof b['id'] === 'string') {
          const args = argumentsObject(b);
          if (args === undefined) throw notRenderable(GEMINI, step.seq, RenderRule.ARGUMENTS_NOT_OBJECT, `the arguments of tool call ${JSON.stringify(b['id'])} are not a JSON object`);
          parts.push({ functionCall: { id: b['id'], name: typeof b['name'] === 'string' ? b['name'] : '', args } });
        } else if (b['type'] !== 'reasoning') {
          const p = part(b);
          if (p !== undefined) parts.push(p);
        }
      }
      push(acc, 'model', parts, [step.seq]);
    } else {
      const parts: JsonObject[] = [];
      for (const r of step.results) {
        const text = r.content.filter((b) => b['type'] === 'text' && typeof b['text'] === 'string').map((b) => b['text'] as string).join('\n');
        parts.push({ functionResponse: { id: r.callId, name: r.name, response: r.isError ? { error: text } : { output: text } } });
        for (const b of r.content) if (b['type'] === 'image') {
          const p = part(b);
          if (p !== undefined) parts.push(p);
        }
      }
      push(acc, 'user', parts, step.results.map((r) => r.seq));
    }
  }
  return acc.map((m) => ({ json: { role: m.role, parts: m.parts }, seqs: seqsOf(m.seqs) }));
}
