/**
 * The token figures of one event (issue #37: GetSession's token counts without reading event
 * data): what the event adds to its session's `surfaceTokens` while it is on the surface, and the
 * usage it records (assistant/message). Computed once when the event is written and kept with its
 * row, so a session's counts are sums over structural columns.
 *
 * The figure equals what the surface sum uses (session-tokens.ts): the one estimator
 * (token-estimate.ts) over the message the event contributes to the model history
 * (derive.ts projectMessage). That message is a pure function of the event for the estimate:
 * the only inputs from outside the event (the session id and, for a legacy tool/result
 * replacement, its target's message id) go into the message's `id`, which the estimator does not
 * read. So the figure of an event is the same in every session holding it (a fork's copy, an
 * import) and at every position of the surface.
 */
import type { Json, SessionEvent } from './event.js';
import { projectMessage } from './derive.js';
import { addAssistantUsage, estimateMessageTokens, NO_USAGE, type UsageTotals } from './token-estimate.js';
import { mayHoldRefs } from './blobs.js';

/** One event's token figures: `tokens` 0 when it contributes no message; `usage` only where it records some. */
export interface EventTokenFigures {
  readonly tokens: number;
  /** The usage text (encodeUsage), undefined when the event records none. */
  readonly usage?: string;
}

/** The types that project a message (derive.ts projectMessage, message-view.ts messageOf); any other has no figures. */
export const TOKEN_FIGURE_TYPES: readonly string[] = ['user/message', 'assistant/message', 'tool/result', 'steering/message'];
const MESSAGE_TYPES: ReadonlySet<string> = new Set(TOKEN_FIGURE_TYPES);
const NO_FIGURES: EventTokenFigures = Object.freeze({ tokens: 0 });

/** The session id projection needs; it only reaches message ids, which the estimate ignores. */
const ANY_SESSION = '';

/** The token figures of `event` (see the module comment). */
export function eventTokenFigures(event: Pick<SessionEvent, 'type' | 'seq' | 'data' | 'surfaceOp'>): EventTokenFigures {
  if (!MESSAGE_TYPES.has(event.type)) return NO_FIGURES;
  const tokens = estimateMessageTokens(projectMessage(event as SessionEvent, ANY_SESSION));
  const usage = event.type === 'assistant/message' ? encodeUsage(event.data) : undefined;
  return usage === undefined ? { tokens } : { tokens, usage };
}

/** What a store keeps for an event: an unknown figure (tokens -1), not one of it. */
export const UNKNOWN_FIGURES: EventTokenFigures = Object.freeze({ tokens: -1 });

/**
 * The figures a store keeps for `event` whose data text it stores is `dataText`: UNKNOWN_FIGURES
 * when that text may hold blob references (the estimate needs the blobs' bytes, so a reader
 * estimates that event from its inflated data), else eventTokenFigures.
 */
export function storedTokenFigures(event: Pick<SessionEvent, 'type' | 'seq' | 'data' | 'surfaceOp'>, dataText: string): EventTokenFigures {
  return mayHoldRefs(dataText) ? UNKNOWN_FIGURES : eventTokenFigures(event);
}

/**
 * The usage an assistant/message's data records, as the text "input,output,cacheRead,cacheWrite"
 * (each count as addAssistantUsage reads it, written with String(): parsing it back gives the same
 * numbers), or undefined when the data has no usage object.
 */
export function encodeUsage(data: Json): string | undefined {
  const u = addAssistantUsage(NO_USAGE, data);
  if (u === NO_USAGE) return undefined;
  return `${u.inputTokens},${u.outputTokens},${u.cacheReadTokens},${u.cacheWriteTokens}`;
}

/** `totals` plus a usage text of encodeUsage (the same sums as addAssistantUsage on the data). */
export function addUsageText(totals: UsageTotals, text: string): UsageTotals {
  const p = text.split(',');
  return {
    inputTokens: totals.inputTokens + Number(p[0]),
    outputTokens: totals.outputTokens + Number(p[1]),
    cacheReadTokens: totals.cacheReadTokens + Number(p[2]),
    cacheWriteTokens: totals.cacheWriteTokens + Number(p[3]),
  };
}
