/**
 * The one token estimator of Palimpsest, the reference's (its token meter's fixed-density
 * heuristic, dsh-semantics "Token estimate"). Used by compaction planning, the compaction and
 * prune batches' `shadowedTokenCount`, and the token counts of GetMessages and Session.
 *
 * Per content block:
 * - `text` / `reasoning`: ceil(text length / 4) + 4;
 * - `tool-call`: ceil(name length / 4) + ceil(arguments length / 4) + 4;
 * - `tool-result`: the estimate of its inner content + 4;
 * - any other block (images included): 4 + ceil(JSON length / 4);
 * and 4 per message for its role framing. Lengths are UTF-16 code units (JavaScript `length`),
 * as the reference measures them. A field of the wrong type counts as empty (the reference
 * would not accept such a message; the estimate stays defined).
 */
import type { Json } from './event.js';
import { isJsonObject } from './json.js';

/** Characters per token of the fixed-density heuristic. */
export const CHARS_PER_TOKEN = 4;
/** Tokens every content block costs for its framing. */
export const BLOCK_OVERHEAD_TOKENS = 4;
/** Tokens every message costs for its role framing. */
export const ROLE_OVERHEAD_TOKENS = 4;

function strLen(v: Json | undefined): number {
  return typeof v === 'string' ? v.length : 0;
}

/** The estimate of a list of content blocks (no message framing). */
export function estimateContentTokens(blocks: readonly Json[]): number {
  let tokens = 0;
  for (const b of blocks) {
    const type = isJsonObject(b) ? b['type'] : undefined;
    if (!isJsonObject(b)) {
      tokens += BLOCK_OVERHEAD_TOKENS + Math.ceil(JSON.stringify(b).length / CHARS_PER_TOKEN);
    } else if (type === 'text' || type === 'reasoning') {
      tokens += Math.ceil(strLen(b['text']) / CHARS_PER_TOKEN) + BLOCK_OVERHEAD_TOKENS;
    } else if (type === 'tool-call') {
      tokens += Math.ceil(strLen(b['name']) / CHARS_PER_TOKEN) + Math.ceil(strLen(b['arguments']) / CHARS_PER_TOKEN) + BLOCK_OVERHEAD_TOKENS;
    } else if (type === 'tool-result') {
      const inner = b['content'];
      tokens += (Array.isArray(inner) ? estimateContentTokens(inner) : 0) + BLOCK_OVERHEAD_TOKENS;
    } else {
      tokens += BLOCK_OVERHEAD_TOKENS + Math.ceil(JSON.stringify(b).length / CHARS_PER_TOKEN);
    }
  }
  return tokens;
}

const estimates = new WeakMap<object, number>();

/**
 * The estimate of one model-visible message: its content blocks plus the role framing. Cached
 * per message object (messages are immutable once on the surface). 0 for `undefined`.
 */
export function estimateMessageTokens(message: Json | undefined): number {
  if (message === undefined || !isJsonObject(message)) return 0;
  let t = estimates.get(message);
  if (t === undefined) {
    const content = message['content'];
    t = (Array.isArray(content) ? estimateContentTokens(content) : 0) + ROLE_OVERHEAD_TOKENS;
    estimates.set(message, t);
  }
  return t;
}

/** Sums of the token usage recorded in assistant messages (the reference's TokenUsage keys). */
export interface UsageTotals {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cacheReadTokens: number;
  readonly cacheWriteTokens: number;
}

/** No usage. */
export const NO_USAGE: UsageTotals = Object.freeze({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });

function count(v: Json | undefined): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0;
}

/**
 * `totals` plus the usage an assistant/message event's data records (`data.usage`:
 * inputTokens, outputTokens, cacheReadTokens?, cacheWriteTokens?; absent or not numbers = 0).
 */
export function addAssistantUsage(totals: UsageTotals, data: Json): UsageTotals {
  const u = isJsonObject(data) ? data['usage'] : undefined;
  if (!isJsonObject(u)) return totals;
  return {
    inputTokens: totals.inputTokens + count(u['inputTokens']),
    outputTokens: totals.outputTokens + count(u['outputTokens']),
    cacheReadTokens: totals.cacheReadTokens + count(u['cacheReadTokens']),
    cacheWriteTokens: totals.cacheWriteTokens + count(u['cacheWriteTokens']),
  };
}
