/**
 * Compaction planning and the compaction batch, as the reference's compaction-basic plugin writes
 * it (dsh-semantics 1.3 and 2.7).
 *
 * The plan: the range is anchored at the start of the surface and keeps a recent tail sized by a
 * token budget (the most recent nodes whose tokens add up to at most the budget, at least one
 * node), or ends at a given surface seq. The cut is then moved earlier until it separates no tool
 * call from a result of it: every (call, result) pair is an interval of surface positions, and a
 * cut k (nodes [0, k) shadowed) is valid iff no interval has lo < k <= hi. A call with no result
 * on the surface yet (still open) is an interval to the end of the surface, so the cut always
 * stays before it; open calls are reported (the app makes them a blocker: finish the tool round,
 * then compact). One pass, O(nodes).
 *
 * The batch (compaction/start, compaction/summary, the replacing user/message, compaction/end) is
 * built with exactly the reference's keys, key order and framing (fixture compaction-recovery).
 *
 * Token estimates come from the one estimator, src/domain/token-estimate.ts (the reference's).
 */
import type { Json, JsonObject } from './event.js';
import type { PairingInfo } from './tool-pairing.js';


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
}

/** What to keep. */
export type CompactionBudget = { readonly keepTokens: number } | { readonly upToSeq: number };

/** The planner's answer. */
export interface CompactionPlan {
  /** Number of leading surface nodes shadowed (0 = nothing to compact). */
  readonly cut: number;
  /** Where the budget alone would have cut. */
  readonly budgetCut: number;
  readonly shadowedTokens: number;
  readonly keptTokens: number;
  /** Calls on the surface without a result on it yet (the cut always stays before them). */
  readonly openCalls: readonly { readonly callId: string; readonly seq: number }[];
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
  } else {
    const pos = nodes.findIndex((x) => x.seq === budget.upToSeq);
    if (pos < 0) throw new RangeError(`seq ${budget.upToSeq} is not on the surface`);
    k0 = pos + 1;
  }
  // Per call id: the first call position, the first and last result positions.
  const pairs = new Map<string, { call: number; first: number; last: number }>();
  for (let i = 0; i < n; i++) {
    const p = (nodes[i] as PlanNode).pairing;
    if (p.calls.length === 0 && p.results.length === 0) continue;
    for (const c of p.calls) {
      const e = pairs.get(c);
      if (e === undefined) pairs.set(c, { call: i, first: -1, last: -1 });
      else if (e.call < 0) e.call = i;
    }
    for (const c of p.results) {
      const e = pairs.get(c);
      if (e === undefined) pairs.set(c, { call: -1, first: i, last: i });
      else {
        if (e.first < 0) e.first = i;
        e.last = i;
      }
    }
  }
  // reach[lo] = the largest hi of the intervals starting at lo.
  const reach = new Int32Array(n).fill(-1);
  const openCalls: { callId: string; seq: number }[] = [];
  for (const [c, e] of pairs) {
    const i = e.call;
    if (i < 0) continue; // a result without a call on the surface: no pair to keep
    if (e.last < 0) {
      reach[i] = n;
      openCalls.push({ callId: c, seq: (nodes[i] as PlanNode).seq });
      continue;
    }
    const lo = Math.min(i, e.first);
    const hi = Math.max(i, e.last);
    if (hi > (reach[lo] as number)) reach[lo] = hi;
  }
  // Largest valid k <= k0: prefix maxima of reach over lo < k.
  let best = 0;
  let prefix = -1;
  for (let k = 1; k <= k0; k++) {
    const r = reach[k - 1] as number;
    if (r > prefix) prefix = r;
    if (prefix < k) best = k;
  }
  let shadowedTokens = 0;
  let keptTokens = 0;
  for (let i = 0; i < n; i++) {
    if (i < best) shadowedTokens += (nodes[i] as PlanNode).tokens;
    else keptTokens += (nodes[i] as PlanNode).tokens;
  }
  openCalls.sort((a, b) => a.seq - b.seq);
  return { cut: best, budgetCut: k0, shadowedTokens, keptTokens, openCalls };
}

/** What the compaction batch needs. */
export interface CompactionBatchInput {
  readonly compactionId: string;
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
  const summaryData: JsonObject = {
    compactionId: c.compactionId,
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
    { type: 'compaction/start', data: { compactionId: c.compactionId, turn: c.turn } },
    { type: 'compaction/summary', data: summaryData },
    {
      type: 'user/message',
      data: {
        content: [{ type: 'text', text: `${CHECKPOINT_PREAMBLE}\n\n${SUMMARY_OPEN}` }, ...c.summary, { type: 'text', text: SUMMARY_CLOSE }],
        source: { kind: 'plugin', plugin: 'compact', compactionId: c.compactionId },
        role: 'user',
        id: c.messageId,
      },
      sourceEventSeqs: [startSeq, summarySeq, ...c.shadowedSeqs],
      surfaceOp: { op: 'replace', start: c.start, end: c.end },
    },
    { type: 'compaction/end', data: { compactionId: c.compactionId, turn: c.turn } },
  ];
}
