/**
 * Server-side compaction and pruning (issue #14): PlanCompaction, Compact and PruneToolResults
 * (prune-tool-results.ts).
 * The server builds the reference's batches (domain/compaction-plan.ts, domain/prune.ts) from one
 * committed state of the session and appends them through the ordinary append path, conditional on
 * the head that state had, so a moved head is HEAD_MISMATCH like any append, idempotency keys work
 * as for AppendEvents, and the tool-pairing guard always checks these batches (even when the
 * session has it off): a server-built batch never leaves an orphan.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { CandidateEvent, Json, JsonObject, SessionEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { isJsonObject } from '../domain/json.js';
import { estimateMessageTokens } from '../domain/token-estimate.js';
import { balanceDeltaOf, compactionBatch, openToolCalls, planCompaction, refusedCompactionBatch, summaryNotSmallerError, toolPairingBalance, type CompactionBudget, type PlanNode } from '../domain/compaction-plan.js';
import { NO_PAIRING } from '../domain/tool-pairing.js';
import type { MessageJson } from '../domain/message-view.js';
import type { CallContext, DerivedMessage, ModelSnapshot, SessionService } from './session-service.js';
import { requestBodyHash } from './append.js';
import { pairingOf, storedBatch } from './server-batches.js';
import { pruneToolResults, type PruneRequest, type PruneResult } from './prune-tool-results.js';

/** A reason Compact refuses now. */
export interface CompactionBlocker {
  readonly reason: 'COMPACTION_IN_PROGRESS' | 'TOOL_CALLS_OPEN' | 'TOOL_RESULT_UNMATCHED';
  readonly description: string;
  readonly seqs: readonly number[];
  readonly callIds: readonly string[];
}

/** PlanCompaction's answer. */
export interface CompactionPlanView {
  readonly start: number | undefined;
  readonly end: number | undefined;
  readonly shadowedSeqs: readonly number[];
  readonly expectedLastSeq: number;
  readonly shadowedTokenCount: number;
  readonly keptTokenCount: number;
  readonly messages: readonly DerivedMessage[];
  readonly blockers: readonly CompactionBlocker[];
}

/** Compact's request. */
export interface CompactRequest {
  readonly start: number;
  readonly end: number;
  readonly expectedLastSeq: number | undefined;
  /** Content blocks (reference ContentBlock[]). */
  readonly summary: readonly Json[];
  /** Raw summariser output blocks (`rawOutput`), and whether it came from a streamed LLM call. */
  readonly rawOutput?: readonly Json[];
  readonly llmStreamCall?: boolean;
  readonly provider: string;
  readonly model: string;
  readonly usage?: JsonObject;
  readonly maxTokens?: number;
  readonly shadowedTokenCount?: number;
  readonly idempotencyKey?: string;
  /** The command that asked for the compaction (`sourceCommandId` in all its events and the checkpoint source). */
  readonly sourceCommandId?: string;
}

/** Compact's answer. */
export interface CompactResult {
  readonly seqs: readonly number[];
  readonly compactionId: string;
  readonly surfaceLength: number;
  readonly replayed: boolean;
  readonly shadowedTokenCount: number;
  /**
   * Set when the summary was refused as the reference refuses it (not smaller than the range):
   * only compaction/start and compaction/end {error} were written, with this error.
   */
  readonly error?: string;
}

/** A surface node with its message (undefined when it contributes none); one shape for all nodes. */
interface MessageNode extends PlanNode {
  readonly message: MessageJson | undefined;
}

/**
 * The planner's nodes of a hot session, kept incrementally like the message projection: appends
 * only extend the surface (a plan after them builds nodes for the new tail only); a replace (the
 * replace generation moves) rebuilds them once. Keyed by the session's record object, which lives
 * as long as its cached handle. The nodes of one message are computed once (tokens, call ids).
 */
const nodeCaches = new WeakMap<object, { generation: number; nodes: MessageNode[] }>();

function nodeOf(seq: number, m: MessageJson | undefined, type: string | undefined): MessageNode {
  if (m === undefined) return { seq, tokens: 0, pairing: NO_PAIRING, balanceDelta: balanceDeltaOf(type, NO_PAIRING), message: undefined };
  const pairing = pairingOf(m);
  return { seq, tokens: estimateMessageTokens(m), pairing, balanceDelta: balanceDeltaOf(type, pairing), message: m };
}

/** The planner's nodes: every surface node, with its message's tokens and pairing facts. */
function planNodes(snap: ModelSnapshot, tokenCounts?: ReadonlyMap<number, number>): MessageNode[] {
  const surface = snap.surface as number[];
  const msgs = snap.nodeMessages as (MessageJson | undefined)[];
  let cache = nodeCaches.get(snap.record);
  const reusable = cache !== undefined && cache.generation === snap.replaceGeneration && cache.nodes.length <= surface.length
    && (cache.nodes.length === 0 || (cache.nodes[cache.nodes.length - 1] as MessageNode).seq === surface[cache.nodes.length - 1]);
  if (!reusable || cache === undefined) nodeCaches.set(snap.record, (cache = { generation: snap.replaceGeneration, nodes: [] }));
  const nodes = cache.nodes;
  const types = snap.types;
  for (let i = nodes.length; i < surface.length; i++) nodes.push(nodeOf(surface[i] as number, msgs[i], types?.[i]));
  const custom = tokenCounts !== undefined && tokenCounts.size > 0 ? tokenCounts : undefined;
  if (custom === undefined) return nodes.slice();
  return nodes.map((n) => {
    const own = custom.get(n.seq);
    return own === undefined ? n : { ...n, tokens: own };
  });
}

/**
 * The open calls that block a cut at position `cut`: those at a position before it (a call at
 * or after the cut stays on the surface with its round).
 */
function blockingCalls(nodes: readonly PlanNode[], openCalls: readonly { callId: string; seq: number }[], cut: number): { callId: string; seq: number }[] {
  const before = new Set<number>();
  for (let i = 0; i < cut && i < nodes.length; i++) before.add((nodes[i] as PlanNode).seq);
  return openCalls.filter((c) => before.has(c.seq));
}

/** A UUID (v4 layout) derived from `text`, so retried idempotent requests build identical events. */
function derivedUuid(text: string): string {
  const h = createHash('sha256').update(text).digest();
  h[6] = ((h[6] as number) & 0x0f) | 0x40;
  h[8] = ((h[8] as number) & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/** The compaction/prune use cases over a SessionService. */
export class CompactionService {
  constructor(private readonly app: SessionService, private readonly newId: () => string = randomUUID) {}

  /** The newest events the blockers and the compaction's `turn` are decided from. */
  static readonly LOCK_QUERIES = [
    { types: ['compaction/start', 'compaction/end'], limit: 1 },
    { types: ['session/end-seed'], limit: 1 },
    { types: ['turn/start', 'turn/end'], limit: 1 },
  ] as const;

  /**
   * From the newest lock-relevant events (snapshot.recent), as the reference decides it
   * (region.ts inspectCompactionEntryState, assertCompactionInactive): the lock is held iff the
   * latest of all compaction/start and compaction/end events is a start and no session/end-seed
   * came after it (ids are not compared). And the open turn (null between turns).
   */
  async #lockState(ctx: CallContext, id: string, snap: ModelSnapshot): Promise<{ openStart: number | undefined; turn: number | null }> {
    const seqs = (snap.recent ?? []).flat().sort((x, y) => y - x);
    if (seqs.length === 0) return { openStart: undefined, turn: null };
    const events = await this.app.store.getEvents(this.app.storageKey(ctx, id), seqs);
    let latestBracket: SessionEvent | undefined;
    let latestEndSeed = -1;
    let turn: number | null = null;
    let turnKnown = false;
    for (const e of events.sort((x, y) => y.seq - x.seq)) {
      if (latestBracket === undefined && (e.type === 'compaction/start' || e.type === 'compaction/end')) latestBracket = e;
      if (e.type === 'session/end-seed' && e.seq > latestEndSeed) latestEndSeed = e.seq;
      if (!turnKnown && (e.type === 'turn/start' || e.type === 'turn/end')) {
        turnKnown = true;
        turn = e.type === 'turn/start' && isJsonObject(e.data) && typeof e.data['turn'] === 'number' ? e.data['turn'] : null;
      }
    }
    const openStart = latestBracket?.type === 'compaction/start' && latestEndSeed < latestBracket.seq ? latestBracket.seq : undefined;
    return { openStart, turn };
  }

  /**
   * Why Compact refuses: an open compaction (the lock); a tool result without a matching call on
   * the surface (the reference's balance refuses the whole surface); open tool calls, only when
   * they leave no balanced prefix to compact (`openCalls` = the calls that block).
   */
  #blockers(open: number | undefined, unmatchedResultSeq: number | undefined, openCalls: readonly { callId: string; seq: number }[]): CompactionBlocker[] {
    const out: CompactionBlocker[] = [];
    if (open !== undefined) {
      out.push({ reason: 'COMPACTION_IN_PROGRESS', description: `compaction/start at seq ${open} has no compaction/end yet; finish or end that compaction first`, seqs: [open], callIds: [] });
    }
    if (unmatchedResultSeq !== undefined) {
      out.push({
        reason: 'TOOL_RESULT_UNMATCHED',
        description: `tool/result at surface seq ${unmatchedResultSeq} has no matching tool-call (an orphan or a second result of one call; the reference refuses to compact such a surface); shadow or replace that result, then plan again`,
        seqs: [unmatchedResultSeq],
        callIds: [],
      });
    }
    if (openCalls.length > 0) {
      out.push({
        reason: 'TOOL_CALLS_OPEN',
        description: `${openCalls.length} tool call(s) on the surface have no result yet (${openCalls.slice(0, 5).map((c) => c.callId).join(', ')}) and nothing before them can be compacted; append their results (or repair the session), then plan again`,
        seqs: [...new Set(openCalls.map((c) => c.seq))],
        callIds: openCalls.map((c) => c.callId),
      });
    }
    return out;
  }

  /** PlanCompaction (read-only). */
  async plan(ctx: CallContext, id: string, budget: CompactionBudget, tokenCounts?: ReadonlyMap<number, number>): Promise<CompactionPlanView> {
    const snap = await this.app.modelSnapshot(ctx, id, { surface: true, types: true, recent: CompactionService.LOCK_QUERIES });
    const nodes = planNodes(snap, tokenCounts);
    let plan;
    try {
      plan = planCompaction(nodes, budget);
    } catch (e) {
      if (e instanceof RangeError) throw new DomainError('INVALID_ARGUMENT', `up_to_seq: ${e.message}; pass a seq from GetSurface`, { field: 'up_to_seq' });
      throw e;
    }
    const shadowed = (snap.surface as number[]).slice(0, plan.cut);
    // Message nodes are DerivedMessages already ({seq, message}).
    const messages: DerivedMessage[] = [];
    for (let i = 0; i < plan.cut; i++) {
      const n = nodes[i] as MessageNode;
      if (n.message !== undefined) messages.push(n as DerivedMessage);
    }
    return {
      start: shadowed[0],
      end: shadowed[shadowed.length - 1],
      shadowedSeqs: shadowed,
      expectedLastSeq: snap.headSeq ?? -1,
      shadowedTokenCount: plan.shadowedTokens,
      keptTokenCount: plan.keptTokens,
      messages,
      blockers: this.#blockers((await this.#lockState(ctx, id, snap)).openStart, plan.unmatchedResultSeq, plan.cut === 0 ? blockingCalls(nodes, openToolCalls(nodes), plan.budgetCut) : []),
    };
  }

  /** Compact: the four-event batch for a planned range. */
  async compact(ctx: CallContext, id: string, req: CompactRequest): Promise<CompactResult> {
    if (req.expectedLastSeq === undefined) throw new DomainError('INVALID_ARGUMENT', 'expected_last_seq is required: pass the one PlanCompaction returned', { field: 'expected_last_seq' });
    if (req.summary.length === 0) throw new DomainError('INVALID_ARGUMENT', 'the summary is empty; pass summary_text or summary_json', { field: 'summary' });
    if (!req.provider) throw new DomainError('INVALID_ARGUMENT', 'provider is required (the provider that produced the summary)', { field: 'provider' });
    if (!req.model) throw new DomainError('INVALID_ARGUMENT', 'model is required (the model that produced the summary)', { field: 'model' });
    const key = req.idempotencyKey || undefined;
    // The key's record stores this request's hash: a replay with another body is refused.
    const hash = key ? requestBodyHash('Compact', { ...req, idempotencyKey: undefined }) : '';
    if (key) {
      const replay = await this.#replayedCompaction(ctx, id, key, hash);
      if (replay) return replay;
    }
    const snap = await this.app.modelSnapshot(ctx, id, { surface: true, types: true, recent: CompactionService.LOCK_QUERIES });
    const head = snap.headSeq ?? -1;
    if (req.expectedLastSeq !== head) {
      throw new DomainError('HEAD_MISMATCH', `expected_last_seq ${req.expectedLastSeq} does not match the session head ${head}; plan again and retry`, {
        sessionId: id, expected: String(req.expectedLastSeq), actual: String(head),
      });
    }
    const surface = snap.surface as number[];
    const endPos = surface.indexOf(req.end);
    if (surface[0] !== req.start || endPos < 0) {
      throw new DomainError('COMPACTION_RANGE_INVALID',
        `a compaction shadows the surface from its first node (${surface[0] ?? 'none'}) to a surface seq; start ${req.start} .. end ${req.end} is not such a range; use PlanCompaction's start and end`,
        { start: String(req.start), end: String(req.end) });
    }
    const nodes = planNodes(snap);
    const shadowed = surface.slice(0, endPos + 1);
    // The reference's validateSurfaceRegion: the balance over the whole surface must hold, and a
    // range ending inside an open tool round (a call in it without a result) is refused.
    const balance = toolPairingBalance(nodes);
    const unmatched = balance.negativeAt === undefined ? undefined : (nodes[balance.negativeAt] as PlanNode).seq;
    const open = balance.balanced[endPos + 1] === true ? [] : blockingCalls(nodes, openToolCalls(nodes), endPos + 1);
    const lock = await this.#lockState(ctx, id, snap);
    const blockers = this.#blockers(lock.openStart, unmatched, open);
    if (blockers.length > 0) {
      const b = blockers[0] as CompactionBlocker;
      throw new DomainError('COMPACTION_BLOCKED', b.description, { blocker: b.reason, seqs: b.seqs.join(','), ...(b.callIds.length > 0 ? { callIds: b.callIds.slice(0, 20).join(',') } : {}) });
    }
    let tokens = 0;
    for (let i = 0; i <= endPos; i++) tokens += (nodes[i] as PlanNode).tokens;
    const shadowedTokenCount = req.shadowedTokenCount ?? tokens;
    const scope = `${this.app.storageKey(ctx, id)}\0${key ?? ''}`;
    const compactionId = key ? derivedUuid(`compaction:${scope}`) : this.newId();
    // The reference refuses a summary whose framed checkpoint is not cheaper than the range (both
    // by the one estimator), closing the bracket with the error: start + end {error}, no summary.
    const error = summaryNotSmallerError(req.summary, tokens);
    if (error !== undefined) {
      const refusedEvents = refusedCompactionBatch({ compactionId, sourceCommandId: req.sourceCommandId, turn: lock.turn, error });
      const res = await this.app.append(ctx, id, refusedEvents as unknown as CandidateEvent[], { expectedLastSeq: head, idempotencyKey: key, requestHash: hash });
      if (res.replayed && key) {
        const replay = await this.#replayedCompaction(ctx, id, key, hash);
        if (replay) return replay;
      }
      return { seqs: res.seqs, compactionId, surfaceLength: res.surfaceLength, replayed: res.replayed, shadowedTokenCount: 0, error };
    }
    const messageId = key ? derivedUuid(`message:${scope}`) : this.newId();
    const events = compactionBatch({
      compactionId, sourceCommandId: req.sourceCommandId, messageId, turn: lock.turn, firstSeq: head + 1,
      start: req.start, end: req.end, shadowedSeqs: shadowed, shadowedTokenCount,
      summary: req.summary, rawOutput: req.rawOutput, llmStreamCall: req.llmStreamCall, provider: req.provider, model: req.model, maxTokens: req.maxTokens, usage: req.usage,
    });
    const res = await this.app.append(ctx, id, events as unknown as CandidateEvent[], { expectedLastSeq: head, idempotencyKey: key, pairingGuard: true, requestHash: hash });
    if (res.replayed && key) {
      const replay = await this.#replayedCompaction(ctx, id, key, hash);
      if (replay) return replay;
    }
    return { seqs: res.seqs, compactionId, surfaceLength: res.surfaceLength, replayed: res.replayed, shadowedTokenCount };
  }

  async #replayedCompaction(ctx: CallContext, id: string, key: string, hash: string): Promise<CompactResult | undefined> {
    const b = await storedBatch(this.app, ctx, id, key, hash, 'compaction');
    if (!b) return undefined;
    const summary = b.events.find((e) => e.type === 'compaction/summary');
    const d = summary && isJsonObject(summary.data) ? summary.data : undefined;
    const end = b.events.find((e) => e.type === 'compaction/end');
    const endData = end && isJsonObject(end.data) ? end.data : undefined;
    if (d === undefined && endData !== undefined && typeof endData['error'] === 'string') {
      return {
        seqs: b.events.map((e) => e.seq),
        compactionId: typeof endData['compactionId'] === 'string' ? endData['compactionId'] : '',
        surfaceLength: b.surfaceLength,
        replayed: true,
        shadowedTokenCount: 0,
        error: endData['error'],
      };
    }
    if (d === undefined) {
      throw new DomainError('IDEMPOTENCY_KEY_REUSED', `idempotency key ${JSON.stringify(key)} was used for another request (not a compaction); use a new key`, { sessionId: id, idempotencyKey: key });
    }
    return {
      seqs: b.events.map((e) => e.seq),
      compactionId: typeof d['compactionId'] === 'string' ? d['compactionId'] : '',
      surfaceLength: b.surfaceLength,
      replayed: true,
      shadowedTokenCount: typeof d['shadowedTokenCount'] === 'number' ? d['shadowedTokenCount'] : 0,
    };
  }

  /** PruneToolResults (prune-tool-results.ts). */
  prune(ctx: CallContext, id: string, req: PruneRequest): Promise<PruneResult> {
    return pruneToolResults(this.app, ctx, id, req);
  }
}
