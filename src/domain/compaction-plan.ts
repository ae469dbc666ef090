/**
 * Compaction planning and the compaction batch, as the reference's compaction-basic plugin writes
 * it (dsh-semantics 1.3 and 2.7).
 *
 * The plan (the reference's selectCompactableRange): the range is anchored at the start of the
 * surface and keeps a recent tail sized by a token budget (`retainTokens`, the reference's: the
 * shortest tail of at least N tokens; `keepTokens`, Palimpsest's: the longest tail of at most N;
 * both keep at least one node), or ends at a given surface seq. The cut is then moved earlier
 * until it is balanced under the reference's count-based tool-pairing balance (tool calls of the
 * messages before the cut minus their tool results is 0), so a tool round in progress stays
 * after the range and the balanced prefix before it is compacted. A surface on which that count
 * goes negative (a tool result with no matching call: an orphan or a duplicate) is not compacted
 * at all (`unmatchedResultSeq`; the app makes it a blocker), as the reference refuses it.
 * Calls without a result on the surface are found by `openToolCalls`, apart: by call id, a set of
 * every result on the surface, which only a plan that compacts nothing needs. One pass, O(nodes).
 *
 * The batch (compaction/start, compaction/summary, the replacing user/message, compaction/end) is
 * built with exactly the reference's keys, key order and framing (fixture compaction-recovery).
 *
 * Token estimates come from the one estimator, src/domain/token-estimate.ts (the reference's).
 */
import type { Json, JsonObject } from './event.js';
import type { PairingInfo } from './tool-pairing.js';
import { estimateMessageTokens } from './token-estimate.js';


/** The reference's framing of a compaction summary (compaction-basic). */
export const CHECKPOINT_PREAMBLE =
  'This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint.';
/** Opening tag of the framed summary (follows the preamble after a blank line, in the same block). */
export const SUMMARY_OPEN = '<compacted-summary>';
/** Closing tag of the framed summary (its own text block). */
export const SUMMARY_CLOSE = '</compacted-summary>';

/** One surface node as the planner sees it. */
export interface PlanNode {
  readonly seq: number;
  readonly tokens: number;
  readonly pairing: PairingInfo;
  /**
   * The node's change of the reference's in-progress tool-call count, by event type (an
   * assistant/message: its tool calls; a tool/result: -1; anything else: 0). Absent: from
   * `pairing` (calls minus results).
   */
  readonly balanceDelta?: number;
}

/** The reference's balance delta of a surface node of event type `type` (tool-pairing.ts eventDelta). */
export function balanceDeltaOf(type: string | undefined, pairing: PairingInfo): number {
  if (type === 'assistant/message') return pairing.calls.length;
  if (type === 'tool/result') return -1;
  return 0;
}

/**
 * What to keep. `retainTokens` is the reference's budget (selectCompactableRange): the shortest
 * recent tail whose tokens add up to at least N (at least one node). `keepTokens` is
 * Palimpsest's own: the longest recent tail of at most N tokens (at least one node).
 * `upToSeq` shadows up to a given surface seq.
 */
export type CompactionBudget = { readonly keepTokens: number } | { readonly retainTokens: number } | { readonly upToSeq: number };

/** The planner's answer. */
export interface CompactionPlan {
  /** Number of leading surface nodes shadowed (0 = nothing to compact). */
  readonly cut: number;
  /** Where the budget alone would have cut. */
  readonly budgetCut: number;
  readonly shadowedTokens: number;
  readonly keptTokens: number;
  /**
   * The first surface node at which the reference's count-based balance goes negative (a
   * tool/result with no matching tool-call: an orphan or a duplicate), or undefined. When set
   * the cut is 0: the reference refuses to compact such a surface.
   */
  readonly unmatchedResultSeq: number | undefined;
}

/**
 * The reference's tool-pairing balance (compaction tool-pairing.ts): a running count of the
 * tool calls of assistant messages minus one per tool result, in surface order. `balanced[k]` is
 * true iff the cut before node k (k = n: after the tail) has no call in progress. Returns the
 * position where the count first goes negative, if any (a result without a matching call).
 */
export function toolPairingBalance(nodes: readonly PlanNode[]): { balanced: boolean[]; negativeAt: number | undefined } {
  const balanced: boolean[] = [true];
  let count = 0;
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i] as PlanNode;
    count += node.balanceDelta ?? node.pairing.calls.length - node.pairing.results.length;
    if (count < 0) return { balanced, negativeAt: i };
    balanced.push(count === 0);
  }
  return { balanced, negativeAt: undefined };
}

/**
 * Plans a compaction over `nodes` (the surface in order); see the module comment.
 *
 * @throws RangeError when `upToSeq` is not on the surface
 */
export function planCompaction(nodes: readonly PlanNode[], budget: CompactionBudget): CompactionPlan {
  const n = nodes.length;
  let k0: number;
  if ('keepTokens' in budget) {
    let kept = 0;
    let count = 0;
    for (let i = n - 1; i >= 0; i--) {
      const cost = (nodes[i] as PlanNode).tokens;
      if (count > 0 && kept + cost > budget.keepTokens) break;
      kept += cost;
      count++;
    }
    k0 = n - count;
  } else if ('retainTokens' in budget) {
    // The reference: accumulate from the tail, taking a node before checking, until >= N.
    let accumulated = 0;
    k0 = n;
    for (let i = n - 1; i >= 0; i--) {
      accumulated += (nodes[i] as PlanNode).tokens;
      k0 = i;
      if (accumulated >= budget.retainTokens) break;
    }
  } else {
    const pos = nodes.findIndex((x) => x.seq === budget.upToSeq);
    if (pos < 0) throw new RangeError(`seq ${budget.upToSeq} is not on the surface`);
    k0 = pos + 1;
  }
  const { balanced, negativeAt } = toolPairingBalance(nodes);
  // Largest balanced cut k <= k0 (the reference moves the cut earlier until it is balanced).
  let best = 0;
  if (negativeAt === undefined) {
    for (let k = Math.min(k0, n); k > 0; k--) {
      if (balanced[k] === true) {
        best = k;
        break;
      }
    }
  }
  let shadowedTokens = 0;
  let keptTokens = 0;
  for (let i = 0; i < n; i++) {
    if (i < best) shadowedTokens += (nodes[i] as PlanNode).tokens;
    else keptTokens += (nodes[i] as PlanNode).tokens;
  }
  return {
    cut: best,
    budgetCut: k0,
    shadowedTokens,
    keptTokens,
    unmatchedResultSeq: negativeAt === undefined ? undefined : (nodes[negativeAt] as PlanNode).seq,
  };
}

/**
 * The calls on the surface without a result on it (by call id), in surface order: what blocks a
 * cut before them. Apart from planCompaction (a set of every result id of the surface: on a
 * 100,000-node surface most of a plan's time), for the plans that need it.
 */
export function openToolCalls(nodes: readonly PlanNode[]): { callId: string; seq: number }[] {
  const answered = new Set<string>();
  for (const x of nodes) for (const c of x.pairing.results) answered.add(c);
  const open: { callId: string; seq: number }[] = [];
  for (const x of nodes) for (const c of x.pairing.calls) if (!answered.has(c)) open.push({ callId: c, seq: x.seq });
  return open;
}

/** What the compaction batch needs. */
export interface CompactionBatchInput {
  readonly compactionId: string;
  /** The command that asked for the compaction (`sourceCommandId`), if any. */
  readonly sourceCommandId?: string;
  /** The id of the replacing user/message. */
  readonly messageId: string;
  /** The open turn (null between turns, as a standalone manual compaction). */
  readonly turn: number | null;
  /** Seq the batch's first event gets (head + 1). */
  readonly firstSeq: number;
  readonly start: number;
  readonly end: number;
  /** Shadowed seqs in surface order. */
  readonly shadowedSeqs: readonly number[];
  readonly shadowedTokenCount: number;
  /** The summary content blocks. */
  readonly summary: readonly Json[];
  /** The summariser's raw output blocks (`rawOutput`), if recorded. */
  readonly rawOutput?: readonly Json[];
  /** `llmStreamCall: true` (the summary came from a streamed LLM call; needs rawOutput). */
  readonly llmStreamCall?: boolean;
  readonly provider: string;
  readonly model: string;
  readonly maxTokens?: number;
  readonly usage?: JsonObject;
}

/** A candidate event of a server-built batch (reference envelope). */
export interface BuiltEvent {
  readonly type: string;
  readonly data: Json;
  readonly surfaceOp?: Json;
  readonly sourceEventSeqs?: number[];
}

/** The four events of a compaction, exactly as compaction-basic writes them. */
export function compactionBatch(c: CompactionBatchInput): BuiltEvent[] {
  const startSeq = c.firstSeq;
  const summarySeq = c.firstSeq + 1;
  const cmd: JsonObject = c.sourceCommandId === undefined ? {} : { sourceCommandId: c.sourceCommandId };
  const lifecycle: JsonObject = { compactionId: c.compactionId, ...cmd, turn: c.turn };
  const summaryData: JsonObject = {
    compactionId: c.compactionId,
    ...cmd,
    summary: [...c.summary],
  };
  if (c.rawOutput !== undefined) summaryData['rawOutput'] = [...c.rawOutput];
  if (c.rawOutput !== undefined && c.llmStreamCall === true) summaryData['llmStreamCall'] = true;
  Object.assign(summaryData, {
    shadowedRange: { start: c.start, end: c.end },
    shadowedSeqs: [...c.shadowedSeqs],
    shadowedTokenCount: c.shadowedTokenCount,
    provider: c.provider,
    model: c.model,
  });
  if (c.maxTokens !== undefined) summaryData['maxTokens'] = c.maxTokens;
  if (c.usage !== undefined) summaryData['usage'] = c.usage;
  return [
    { type: 'compaction/start', data: lifecycle },
    { type: 'compaction/summary', data: summaryData },
    {
      type: 'user/message',
      data: {
        content: frameSummary(c.summary),
        source: { kind: 'plugin', plugin: 'compact', compactionId: c.compactionId, ...cmd },
        role: 'user',
        id: c.messageId,
      },
      sourceEventSeqs: [startSeq, summarySeq, ...c.shadowedSeqs],
      surfaceOp: { op: 'replace', start: c.start, end: c.end },
    },
    { type: 'compaction/end', data: { ...lifecycle } },
  ];
}

/** The reference's framing of summary blocks into the checkpoint's content (summarizer.ts frameSummary). */
export function frameSummary(summary: readonly Json[]): Json[] {
  return [{ type: 'text', text: `${CHECKPOINT_PREAMBLE}\n\n${SUMMARY_OPEN}` }, ...summary, { type: 'text', text: SUMMARY_CLOSE }];
}

/**
 * The reference's "summary not smaller" check (region.ts summarizeCompaction): the framed
 * checkpoint's estimate must be below the shadowed range's. Returns the reference's error text
 * when it is not, else undefined.
 */
export function summaryNotSmallerError(summary: readonly Json[], shadowedTokenCount: number): string | undefined {
  const framed = estimateMessageTokens({ role: 'user', content: frameSummary(summary) });
  if (framed < shadowedTokenCount) return undefined;
  return `summary is not smaller than the shadowed content (${framed} estimated framed tokens >= ${shadowedTokenCount})`;
}

/** The two events of a compaction the reference closes without a summary (`compaction/end {error}`). */
export function refusedCompactionBatch(c: { readonly compactionId: string; readonly sourceCommandId?: string; readonly turn: number | null; readonly error: string }): BuiltEvent[] {
  const cmd: JsonObject = c.sourceCommandId === undefined ? {} : { sourceCommandId: c.sourceCommandId };
  return [
    { type: 'compaction/start', data: { compactionId: c.compactionId, ...cmd, turn: c.turn } },
    { type: 'compaction/end', data: { compactionId: c.compactionId, ...cmd, turn: c.turn, error: c.error } },
  ];
}
