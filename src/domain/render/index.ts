/**
 * Rendering the model history for a provider (issue #34): one pure renderer per provider, chosen
 * by format. See docs/providers.md for the mapping table.
 */
import type { HistoryEntry, RenderedMessage, RenderOptions } from './history-steps.js';
import { renderAnthropic } from './anthropic.js';
import { renderGemini } from './gemini.js';
import { renderOpenAiChat } from './openai-chat.js';
import { renderOpenAiResponses } from './openai-responses.js';

/** The provider formats (the CLI and docs spell them this way). */
export const PROVIDER_FORMATS = ['openai-chat', 'openai-responses', 'anthropic', 'gemini'] as const;

/** A provider format. */
export type ProviderFormat = (typeof PROVIDER_FORMATS)[number];

/** True iff `s` names a provider format. */
export function isProviderFormat(s: string): s is ProviderFormat {
  return (PROVIDER_FORMATS as readonly string[]).includes(s);
}

/** Renders a model history for `format`. @throws DomainError HISTORY_NOT_RENDERABLE */
export function renderHistory(format: ProviderFormat, entries: readonly HistoryEntry[], opts: RenderOptions = {}): RenderedMessage[] {
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

export { HISTORY_NOT_RENDERABLE, RenderRule, type HistoryEntry, type RenderedMessage, type RenderOptions } from './history-steps.js';
