/**
 * Handler-table entries of PlanCompaction, Compact and PruneToolResults (issue #14): decode, call the
 * compaction use cases (src/app/compaction.ts), encode. Registered by makeHandlers (handlers.ts),
 * which hands in its session id check.
 */
import { CompactionService } from '../app/compaction.js';
import type { CallContext, SessionService } from '../app/session-service.js';
import { DomainError } from '../domain/errors.js';
import type { Json } from '../domain/event.js';
import { messageJsonText } from '../domain/derive.js';
import {
  PruneToolResultsRequest_Marker,
  type CompactRequest, type CompactResponse, type PlanCompactionRequest, type PlanCompactionResponse, type PruneToolResultsRequest, type PruneToolResultsResponse,
} from '../../gen/palimpsest/v1/service.js';
import { unary, type HandlerTable } from './rpc/handler-table.js';
import { estimateMessageTokens } from '../domain/token-estimate.js';
import { sessionTokens } from '../app/session-tokens.js';
import type { Session } from '../../gen/palimpsest/v1/session.js';
import { usageToJson } from './typed-data.js';

function blocksOf(text: string, field: string): Json[] {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new DomainError('INVALID_ARGUMENT', `${field} is not JSON; pass a JSON array of content blocks`, { field });
  }
  if (!Array.isArray(v) || !v.every((b) => typeof b === 'object' && b !== null && !Array.isArray(b) && typeof (b as { type?: unknown }).type === 'string')) {
    throw new DomainError('INVALID_ARGUMENT', `${field} must be a JSON array of content blocks ({"type": ...})`, { field });
  }
  return v as Json[];
}

function summaryOf(s: CompactRequest['summary']): Json[] {
  if (s?.$case === 'summaryText') return s.value === '' ? [] : [{ type: 'text', text: s.value }];
  if (s?.$case === 'summaryJson') return blocksOf(s.value, 'summary_json');
  return [];
}

/** `session` with its token counts (GetSession; issue #34 item 4). */
export async function withSessionTokens(app: SessionService, ctx: CallContext, id: string, session: Session): Promise<Session> {
  const t = await sessionTokens(app, ctx, id);
  return { ...session, surfaceTokens: t.surfaceTokens, usage: { ...t.usage, reasoningTokens: undefined } };
}

/** The three handlers, merged into the SessionService handler object. */
export function compactionHandlers(app: SessionService, requireId: (id: string) => string): HandlerTable {
  const svc = new CompactionService(app);
  return {
    planCompaction: unary<PlanCompactionRequest, PlanCompactionResponse>('read', async (ctx, r) => {
      const b = r.budget;
      if (b === undefined) throw new DomainError('INVALID_ARGUMENT', 'a budget is required: retain_tokens, keep_tokens or up_to_seq', { field: 'budget' });
      const counts = new Map<number, number>();
      for (const [k, v] of Object.entries(r.tokenCounts)) counts.set(Number(k), v);
      const plan = await svc.plan(ctx.caller, requireId(r.sessionId), b.$case === 'keepTokens' ? { keepTokens: b.value } : b.$case === 'retainTokens' ? { retainTokens: b.value } : { upToSeq: b.value }, counts);
      return {
        start: plan.start,
        end: plan.end,
        shadowedSeqs: [...plan.shadowedSeqs],
        expectedLastSeq: plan.expectedLastSeq,
        shadowedTokenCount: plan.shadowedTokenCount,
        keptTokenCount: plan.keptTokenCount,
        messages: r.omitMessages ? [] : plan.messages.map((m) => ({ seq: m.seq, messageJson: messageJsonText(m.message), message: undefined, tokens: estimateMessageTokens(m.message) })),
        blockers: plan.blockers.map((x) => ({ reason: x.reason, description: x.description, seqs: [...x.seqs], callIds: [...x.callIds] })),
      };
    }),
    compact: unary<CompactRequest, CompactResponse>('append', async (ctx, r) => {
      const res = await svc.compact(ctx.caller, requireId(r.sessionId), {
        start: r.start, end: r.end, expectedLastSeq: r.expectedLastSeq, summary: summaryOf(r.summary),
        provider: r.provider, model: r.model, usage: r.usage ? usageToJson(r.usage) : undefined, maxTokens: r.maxTokens,
        shadowedTokenCount: r.shadowedTokenCount, idempotencyKey: r.idempotencyKey,
        rawOutput: r.rawOutputJson ? blocksOf(r.rawOutputJson, 'raw_output_json') : undefined, llmStreamCall: r.llmStreamCall,
        sourceCommandId: r.sourceCommandId || undefined,
      });
      return { seqs: [...res.seqs], compactionId: res.compactionId, surfaceLength: res.surfaceLength, replayed: res.replayed, shadowedTokenCount: res.shadowedTokenCount, error: res.error };
    }),
    pruneToolResults: unary<PruneToolResultsRequest, PruneToolResultsResponse>('append', async (ctx, r) => {
      const res = await svc.prune(ctx.caller, requireId(r.sessionId), {
        seqs: r.seqs, minBytes: r.minBytes, keepRecent: r.keepRecent, excludeTools: r.excludeTools,
        headChars: r.headChars, tailChars: r.tailChars, expectedLastSeq: r.expectedLastSeq, idempotencyKey: r.idempotencyKey,
        minChars: r.minChars, marker: r.marker === PruneToolResultsRequest_Marker.MARKER_WITH_COUNT ? 'with-count' : 'reference', minSavingChars: r.minSavingChars,
      });
      return { pruned: res.pruned.map((p) => ({ ...p })), bytesSaved: res.bytesSaved, skipped: [...res.skipped], surfaceLength: res.surfaceLength, replayed: res.replayed };
    }),
  };
}
