/**
 * The tool-pairing guard (issue #14): a provider rejects a model history in which a tool result
 * has no preceding assistant tool call (an "orphan"), and a call whose result silently vanished
 * makes the model repeat or hallucinate it. The reference never checks this (dsh-semantics 2.5);
 * sessions with the guard on refuse a batch that would break it.
 *
 * The rule, on the surface right after the whole batch (so a batch may shadow a pair and re-add
 * what it needs):
 *
 * 1. every tool-result block on the surface follows, on the surface, a message holding the
 *    tool-call with its id;
 * 2. no call that stays on the surface loses a result it had on the surface before the batch.
 *
 * Only violations the batch *introduces* are reported (a log that already broke the rule, e.g.
 * an imported one, does not block unrelated later batches). The check is O(surface) for a batch
 * with a replace: it walks the surface before and after, with the pairing facts of each node (a
 * Map lookup per node, no event data read).
 *
 * Appends are checked too (issue #34), against the *open calls* of the surface (OpenCalls: every
 * call id on the surface, and those without a result after them), kept incrementally by the
 * PairingIndex so an append costs O(its events):
 *
 * 3. an appended tool result whose call is not on the surface before it is TOOL_RESULT_ORPHANED;
 * 4. an appended message without tool results (a user message, an assistant message with
 *    content) while a call on the surface still has no result is TOOL_RESULT_MISSING. Results of
 *    the parallel calls of one step may come in any order and in separate batches; an assistant
 *    message with empty content (a usage carrier) produces no message and is not checked.
 */
import { DomainError } from './errors.js';
import type { Json, SessionEvent } from './event.js';
import { isJsonObject } from './json.js';
import { messageOf, STEERING_TYPE, type MessageJson } from './message-view.js';
import type { SurfaceDelta } from './surface-fold.js';

/** Reason of a batch that would split a tool call from its result. */
export const TOOL_PAIRING_BROKEN = 'TOOL_PAIRING_BROKEN';

/** The pairing facts of one surface node: the tool-call ids it holds and the call ids of its tool-result blocks. */
export interface PairingInfo {
  /** Ids of the `tool-call` blocks of the node's message, in content order. */
  readonly calls: readonly string[];
  /** Tool names of `calls`, same order. */
  readonly names: readonly string[];
  /** `toolCallId`s of the node's `tool-result` blocks, in content order. */
  readonly results: readonly string[];
}

/** The info of a node without calls or results. */
export const NO_PAIRING: PairingInfo = Object.freeze({ calls: Object.freeze([]), names: Object.freeze([]), results: Object.freeze([]) });

/** Pairing facts of a projected message (see {@link pairingInfoOfEvent}). */
export function pairingInfoOfMessage(m: MessageJson | undefined): PairingInfo {
  if (m === undefined) return NO_PAIRING;
  const content = m['content'];
  if (!Array.isArray(content)) return NO_PAIRING;
  let calls: string[] | null = null;
  let names: string[] | null = null;
  let results: string[] | null = null;
  for (const b of content as Json[]) {
    if (!isJsonObject(b)) continue;
    if (b['type'] === 'tool-call' && typeof b['id'] === 'string') {
      (calls ??= []).push(b['id']);
      (names ??= []).push(typeof b['name'] === 'string' ? b['name'] : '');
    } else if (b['type'] === 'tool-result' && typeof b['toolCallId'] === 'string') {
      (results ??= []).push(b['toolCallId']);
    }
  }
  if (calls === null && results === null) return NO_PAIRING;
  return { calls: calls ?? [], names: names ?? [], results: results ?? [] };
}

/** Pairing facts of a surface event, through the message view (legacy shapes included). */
export function pairingInfoOfEvent(e: SessionEvent, sessionId: string): PairingInfo {
  return pairingInfoOfMessage(messageOf(e, sessionId));
}

/** Reason of an appended tool result whose call is not on the surface before it. */
export const TOOL_RESULT_ORPHANED = 'TOOL_RESULT_ORPHANED';
/** Reason of a message appended while a tool call on the surface still has no result. */
export const TOOL_RESULT_MISSING = 'TOOL_RESULT_MISSING';

/** The call ids of a surface, for the append rules (see the module comment). */
export interface OpenCalls {
  /** Every call id held by a surface node -> seq of its (first) holder. */
  readonly calls: ReadonlyMap<string, number>;
  /** The call ids on the surface with no result after them -> seq of the holder, in surface order. */
  readonly open: ReadonlyMap<string, number>;
}

/** The open calls of `surface` (one walk; results before their call do not close it). */
export function openCallsOf(surface: readonly number[], info: (seq: number) => PairingInfo): { calls: Map<string, number>; open: Map<string, number> } {
  const calls = new Map<string, number>();
  const open = new Map<string, number>();
  for (const seq of surface) {
    const p = info(seq);
    if (p === NO_PAIRING) continue;
    for (const r of p.results) if (calls.has(r)) open.delete(r);
    for (const c of p.calls) {
      if (calls.has(c)) continue;
      calls.set(c, seq);
      open.set(c, seq);
    }
  }
  return { calls, open };
}

/** Whether an event of `type` with pairing facts `p` and projected message `m` is a message-producing event the open-call rule checks. */
function producesMessage(type: string, m: MessageJson | undefined, p: PairingInfo): boolean {
  if (m === undefined || p.results.length > 0) return false;
  if (type === 'assistant/message') {
    const content = m['content'];
    if (Array.isArray(content) && content.length === 0) return false;
  }
  return type === 'user/message' || type === 'assistant/message' || type === 'tool/result' || type === STEERING_TYPE;
}

/**
 * Checks the appends of a planned batch against the open calls of the surface before it (rules 3
 * and 4 of the module comment). A replace in the batch re-derives the open calls from the surface
 * after it (O(surface), like the replace rule). Pure: `before` is read, never changed.
 *
 * @param surface - the surface before the batch (read only when the batch has a replace)
 * @param info - pairing facts of committed nodes by seq
 * @throws DomainError TOOL_RESULT_ORPHANED / TOOL_RESULT_MISSING at the index of the culprit
 */
export function assertAppendPairing(
  before: OpenCalls,
  surface: () => readonly number[],
  events: readonly SessionEvent[],
  deltas: readonly SurfaceDelta[],
  sessionId: string,
  info: (seq: number) => PairingInfo,
): void {
  // Copy-on-write overlay over `before`: a batch usually adds a call or closes one.
  let base: OpenCalls = before;
  let calls = null as Map<string, number> | null;
  let closed = null as Set<string> | null;
  let opened = null as Map<string, number> | null;
  const own = new Map<number, PairingInfo>();
  const infoAll = (seq: number): PairingInfo => own.get(seq) ?? info(seq);
  for (let i = 0; i < events.length; i++) {
    const d = deltas[i] as SurfaceDelta;
    if (d.kind === 'none') continue;
    const e = events[i] as SessionEvent;
    const m = messageOf(e, sessionId);
    const p = pairingInfoOfMessage(m);
    own.set(e.seq, p);
    if (d.kind === 'replace') {
      base = openCallsOf(surfaceAfter(surface(), deltas.slice(0, i + 1)), infoAll);
      calls = null;
      closed = null;
      opened = null;
      continue;
    }
    for (const r of p.results) {
      if (!(calls?.has(r) ?? false) && !base.calls.has(r)) {
        throw new DomainError(
          TOOL_RESULT_ORPHANED,
          `the tool result for call ${JSON.stringify(r)} has no tool call on the surface before it; append the assistant message holding the call first, or fix the call id`,
          { callId: r },
        ).atIndex(i);
      }
      if (opened?.delete(r) !== true) (closed ??= new Set()).add(r);
    }
    if (producesMessage(e.type, m, p)) {
      let first: [string, number] | undefined;
      for (const entry of base.open) {
        if (closed?.has(entry[0]) !== true) {
          first = entry;
          break;
        }
      }
      if (first === undefined && opened !== null) for (const entry of opened) { first = entry; break; }
      if (first !== undefined) {
        const [callId, callSeq] = first;
        throw new DomainError(
          TOOL_RESULT_MISSING,
          `the tool call ${JSON.stringify(callId)} (in the message at seq ${callSeq}) has no result yet; append its tool/result first (RepairSession writes one for a call interrupted by a crash)`,
          { callId, callSeq: String(callSeq) },
        ).atIndex(i);
      }
    }
    for (const c of p.calls) {
      if ((calls?.has(c) ?? false) || base.calls.has(c)) continue;
      (calls ??= new Map()).set(c, e.seq);
      (opened ??= new Map()).set(c, e.seq);
    }
  }
}

/** One broken pair. */
export interface PairingViolation {
  readonly callId: string;
  /** Seq of the node holding the call (the surface node before the batch, else the last known), or undefined if none is known. */
  readonly callSeq: number | undefined;
  /** Seq of the result node. */
  readonly resultSeq: number;
  /** 'orphan': the result no longer follows its call; 'lost': the call stays but its result left. */
  readonly kind: 'orphan' | 'lost';
}

interface Scan {
  /** callId -> position of the (first) holder of the call. */
  readonly callPos: Map<string, number>;
  /** callId -> seq of the (first) holder of the call. */
  readonly callSeq: Map<string, number>;
  /** callId -> seq of the (first) result node. */
  readonly resultSeq: Map<string, number>;
  /** callId -> seq of the first result without a preceding call. */
  readonly orphans: Map<string, number>;
}

/** Walks the surface recording the facts of the call ids in `only` (every id when null). */
function scan(surface: readonly number[], info: (seq: number) => PairingInfo, only: ReadonlySet<string> | null): Scan {
  const callPos = new Map<string, number>();
  const callSeq = new Map<string, number>();
  const resultSeq = new Map<string, number>();
  const orphans = new Map<string, number>();
  for (let i = 0; i < surface.length; i++) {
    const seq = surface[i] as number;
    const p = info(seq);
    if (p === NO_PAIRING) continue;
    for (const c of p.results) {
      if (only !== null && !only.has(c)) continue;
      if (!resultSeq.has(c)) resultSeq.set(c, seq);
      if (!callPos.has(c) && !orphans.has(c)) orphans.set(c, seq);
    }
    for (const c of p.calls) {
      if (only !== null && !only.has(c)) continue;
      if (!callPos.has(c)) {
        callPos.set(c, i);
        callSeq.set(c, seq);
      }
    }
  }
  return { callPos, callSeq, resultSeq, orphans };
}

/** The surface after `deltas` are applied to `before` (positions from the deltas). */
export function surfaceAfter(before: readonly number[], deltas: readonly SurfaceDelta[]): number[] {
  const out = before.slice();
  for (const d of deltas) {
    if (d.kind === 'append') out.push(d.seq);
    else if (d.kind === 'replace') out.splice(d.index, d.shadowed.length, d.seq);
  }
  return out;
}

/**
 * The violations a batch introduces (see the module comment), first the orphans in surface order,
 * then the lost results.
 *
 * @param before - the surface before the batch
 * @param after - the surface after the batch
 * @param info - pairing facts by seq, for every node of `before` and `after`
 */
export function pairingViolations(before: readonly number[], after: readonly number[], info: (seq: number) => PairingInfo, only: ReadonlySet<string> | null = null): PairingViolation[] {
  const b = scan(before, info, only);
  const a = scan(after, info, only);
  const out: PairingViolation[] = [];
  for (const [callId, resultSeq] of a.orphans) {
    // A call id that was already orphaned before the batch (an imported log, a hand-built one) is
    // not this batch's doing.
    if (b.orphans.has(callId)) continue;
    out.push({ callId, callSeq: b.callSeq.get(callId) ?? a.callSeq.get(callId), resultSeq, kind: 'orphan' });
  }
  for (const [callId, resultSeq] of b.resultSeq) {
    if (a.resultSeq.has(callId)) continue;
    // The call stays on the surface (and was paired before): its result was lost.
    if (a.callPos.has(callId) && b.callPos.has(callId)) out.push({ callId, callSeq: a.callSeq.get(callId), resultSeq, kind: 'lost' });
  }
  return out;
}

/**
 * Throws TOOL_PAIRING_BROKEN (with the index of the batch event that shadowed the call or the
 * result, when one did) if the batch introduces a violation.
 */
export function assertToolPairing(before: readonly number[], deltas: readonly SurfaceDelta[], info: (seq: number) => PairingInfo): void {
  if (!deltas.some((d) => d.kind === 'replace')) return;
  // Only the call ids of nodes that leave or join the surface can break a pair: the walks record
  // those ids only, and a batch whose nodes hold no call and no result (a compaction of plain
  // chat) needs no walk at all.
  const touched = new Set<string>();
  const note = (p: PairingInfo): void => {
    if (p === NO_PAIRING) return;
    for (const c of p.calls) touched.add(c);
    for (const c of p.results) touched.add(c);
  };
  for (const d of deltas) {
    if (d.kind === 'none') continue;
    note(info(d.seq));
    if (d.kind === 'replace') for (const s of d.shadowed) note(info(s));
  }
  if (touched.size === 0) return;
  const after = surfaceAfter(before, deltas);
  const violations = pairingViolations(before, after, info, touched);
  const v = violations[0];
  if (v === undefined) return;
  const culprit = v.kind === 'orphan' && v.callSeq !== undefined ? v.callSeq : v.resultSeq;
  let index = deltas.findIndex((d) => d.kind === 'replace' && d.shadowed.includes(culprit));
  if (index < 0) index = deltas.findIndex((d) => d.kind === 'replace');
  const callSeqText = v.callSeq === undefined ? 'no surface message' : `the message at seq ${v.callSeq}`;
  const message =
    v.kind === 'orphan'
      ? `the batch would leave the tool result at seq ${v.resultSeq} (call ${JSON.stringify(v.callId)}) on the surface without its call (${callSeqText}) before it; extend the replace range to cover the result too, or end it before the call`
      : `the batch would shadow the tool result at seq ${v.resultSeq} of call ${JSON.stringify(v.callId)} while the call (${callSeqText}) stays on the surface; extend the range to cover the call, or keep the result (a tool/result copy is fine)`;
  const metadata: Record<string, string> = { callId: v.callId, resultSeq: String(v.resultSeq), violations: String(violations.length) };
  if (v.callSeq !== undefined) metadata['callSeq'] = String(v.callSeq);
  const err = new DomainError(TOOL_PAIRING_BROKEN, message, metadata);
  throw index >= 0 ? err.atIndex(index) : err;
}

/**
 * The pairing facts of a session's surface nodes, kept per committed plan (like the message
 * projection): hydrate once from the surface events, then `apply` every plan; shadowed nodes are
 * forgotten (they never come back). Nodes without calls or results take no memory.
 */
export class PairingIndex {
  private readonly facts = new Map<number, PairingInfo>();
  private synced = -1;
  /** The open calls of the surface this index reflects; null = derive on the next read (after a replace or a hydrate). */
  private calls: { calls: Map<string, number>; open: Map<string, number> } | null = null;

  constructor(readonly sessionId: string) {}

  /** The engine nextSeq the index reflects (-1 before hydration). */
  get nextSeq(): number {
    return this.synced;
  }

  /** Rebuilds from the surface events (any order). */
  hydrate(surfaceEvents: readonly SessionEvent[], nextSeq: number): void {
    this.facts.clear();
    for (const e of surfaceEvents) this.set(e);
    this.synced = nextSeq;
    this.calls = null;
  }

  /**
   * The open calls of the surface this index reflects (derived with one walk of `surface` after a
   * hydrate or a replace, then kept per appended node).
   *
   * @param surface - the surface this index reflects, in order
   */
  openCalls(surface: () => readonly number[]): OpenCalls {
    return (this.calls ??= openCallsOf(surface(), this.lookup));
  }

  /** Facts of a node (NO_PAIRING for nodes without calls/results or unknown seqs). */
  info(seq: number): PairingInfo {
    return this.facts.get(seq) ?? NO_PAIRING;
  }

  /** `info` as a bound function (for PlanContext.pairing). */
  readonly lookup = (seq: number): PairingInfo => this.info(seq);

  /** Applies a plan made on the state this index reflects; false (and un-hydrated) otherwise. */
  apply(plan: { readonly baseNextSeq: number; readonly events: readonly SessionEvent[]; readonly deltas: readonly SurfaceDelta[] }): boolean {
    if (plan.baseNextSeq !== this.synced) {
      this.facts.clear();
      this.synced = -1;
      this.calls = null;
      return false;
    }
    for (let i = 0; i < plan.deltas.length; i++) {
      const d = plan.deltas[i] as SurfaceDelta;
      if (d.kind === 'none') continue;
      if (d.kind === 'replace') {
        for (const s of d.shadowed) this.facts.delete(s);
        this.calls = null;
      }
      const e = plan.events[i] as SessionEvent;
      this.set(e);
      if (d.kind === 'append' && this.calls !== null) {
        const p = this.info(e.seq);
        for (const r of p.results) if (this.calls.calls.has(r)) this.calls.open.delete(r);
        for (const c of p.calls) {
          if (this.calls.calls.has(c)) continue;
          this.calls.calls.set(c, e.seq);
          this.calls.open.set(c, e.seq);
        }
      }
    }
    const last = plan.events[plan.events.length - 1];
    if (last !== undefined) this.synced = last.seq + 1;
    return true;
  }

  private set(e: SessionEvent): void {
    const p = pairingInfoOfEvent(e, this.sessionId);
    if (p !== NO_PAIRING) this.facts.set(e.seq, p);
  }
}
