/**
 * Rendering the model history for a provider (issue #34): one pure renderer per provider, chosen
 * by format. See docs/providers.md for the mapping table.
 */
import type { HistoryEntry, RenderedJson, RenderedMessage, RenderOptions } from './history-steps.js';
import { renderAnthropic } from './anthropic.js';
import { renderGemini } from './gemini.js';
import { renderOpenAiChat } from './openai-chat.js';
import { renderOpenAiResponses } from './openai-responses.js';
import { renderedMessageTokens } from './rendered-tokens.js';
import type { ProviderFormat } from './formats.js';

export { isProviderFormat, PROVIDER_FORMATS, type ProviderFormat } from './formats.js';

/** Renders a model history for `format`, each message with its estimated tokens. @throws DomainError HISTORY_NOT_RENDERABLE */
export function renderHistory(format: ProviderFormat, entries: readonly HistoryEntry[], opts: RenderOptions = {}): RenderedMessage[] {
  return withTokens(format, renderJson(format, entries, opts));
}

function renderJson(format: ProviderFormat, entries: readonly HistoryEntry[], opts: RenderOptions): RenderedJson[] {
  switch (format) {
    case 'openai-chat':
      return renderOpenAiChat(entries, opts);
    case 'openai-responses':
      return renderOpenAiResponses(entries, opts);
    case 'anthropic':
      return renderAnthropic(entries, opts);
    case 'gemini':
      return renderGemini(entries, opts);
  }
}

/** Each rendered message with its estimated tokens (rendered-tokens.ts). */
function withTokens(format: ProviderFormat, xs: RenderedJson[]): RenderedMessage[] {
  const out = new Array<RenderedMessage>(xs.length);
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i]!;
    out[i] = { json: x.json, seqs: x.seqs, tokens: renderedMessageTokens(format, x.json) };
  }
  return out;
}

export { HISTORY_NOT_RENDERABLE, RenderRule, type HistoryEntry, type RenderedJson, type RenderedMessage, type RenderOptions } from './history-steps.js';
export { renderedMessageTokens } from './rendered-tokens.js';
