/**
 * What a committed batch compacted or pruned, for the compaction metrics (issue #41): per
 * compaction (`compaction/summary` + the replacing `user/message`) and per pruned result
 * (`compaction/prune` + the `tool/result` copy), the events taken off the surface and the tokens
 * saved: the shadowed events' estimated tokens minus those of what replaced them (never below 0).
 */
import type { CommittedBatch } from './change-feed.js';
import type { Json, SessionEvent } from '../domain/event.js';
import { isJsonObject } from '../domain/json.js';
import { estimateMessageTokens } from '../domain/token-estimate.js';
import { messageOf } from '../domain/message-view.js';

/** One compaction or pruned result. */
export interface CompactionObservation {
  readonly kind: 'compact' | 'prune';
  readonly shadowedEvents: number;
  readonly tokensSaved: number;
}

const TYPES: ReadonlySet<string> = new Set(['compaction/summary', 'compaction/prune']);

function shadowed(data: Json): { events: number; tokens: number } {
  if (!isJsonObject(data)) return { events: 0, tokens: 0 };
  const seqs = data['shadowedSeqs'];
  const tokens = data['shadowedTokenCount'];
  return { events: Array.isArray(seqs) ? seqs.length : 0, tokens: typeof tokens === 'number' && tokens > 0 ? tokens : 0 };
}

/** The compactions and prunes of `batch` (none for an ordinary batch, after one pass over its types). */
export function compactionObservations(batch: CommittedBatch): CompactionObservation[] {
  const out: CompactionObservation[] = [];
  const events = batch.events;
  for (let i = 0; i < events.length; i++) {
    const e = events[i] as SessionEvent;
    if (!TYPES.has(e.type)) continue;
    const s = shadowed(e.data);
    const kind = e.type === 'compaction/summary' ? 'compact' : 'prune';
    // The replacement: the next surface event of the batch that replaces (the summary message or the pruned copy).
    let replacement: SessionEvent | undefined;
    for (let j = i + 1; j < events.length; j++) {
      const r = events[j] as SessionEvent;
      if (typeof r.surfaceOp === 'object') { replacement = r; break; }
      if (TYPES.has(r.type)) break;
    }
    const replacedBy = replacement === undefined ? 0 : estimateMessageTokens(messageOf(replacement, batch.sessionId));
    out.push({ kind, shadowedEvents: s.events, tokensSaved: Math.max(0, s.tokens - replacedBy) });
  }
  return out;
}
