/**
 * The committed state of one session and the acceptance algorithm (dsh-semantics 2.1 to 2.4, 2.6).
 *
 * `plan()` is pure: it validates a batch against the current state, each candidate against the
 * state left by the previous ones (a batch may cite and replace its own earlier events), and
 * returns the normalized frozen events plus one surface delta per event. Nothing changes until
 * `commit(plan)`, which the app calls after the store has made the events durable. A rejected
 * candidate throws a `DomainError` carrying its batch index and leaves every counter untouched.
 *
 * Per candidate, in this order (the reference's, so the same bad event always gets the same reason):
 *
 * 1. NOT_JSON, ENVELOPE_INVALID, LEGACY_VOCABULARY, REQUEST_HEADER_SHAPE, MESSAGE_SHAPE, then the
 *    seq rule SEQ_NOT_CONTIGUOUS (validate-event.ts). Mode `append`: a given seq must equal
 *    `nextSeq`, an omitted one is assigned, an omitted time is `ctx.now()` (read once per batch).
 *    Mode `import`: seq and time are required and the log must be contiguous from 0, as the
 *    reference seeds; with `allowSeqGaps` seqs need only increase (UI snapshots such as
 *    cordis-tool-round elide events).
 * 2. Eligibility: SURFACE_OP_FORBIDDEN, SOURCES_FORBIDDEN (non-surface types), SURFACE_OP_REQUIRED,
 *    SURFACE_OP_INVALID, REPLACE_OP_INVALID.
 * 3. Append: citations (step 5) with nothing shadowed.
 * 4. Replace: REPLACE_START_NOT_ON_SURFACE, REPLACE_END_NOT_ON_SURFACE, REPLACE_START_AFTER_END
 *    (positions on the surface, not numeric order).
 * 5. Citations: SOURCES_NOT_ARRAY, SOURCES_EMPTY, SOURCES_NOT_SEQ, SOURCES_DUPLICATE,
 *    SOURCES_NOT_EARLIER (cited seqs must be < the event's seq; no "known" check, as upstream),
 *    REPLACE_SOURCES_INCOMPLETE.
 * 6. Tool-result rewrite (2.4): TOOL_RESULT_REPLACE_NOT_SINGLE, TOOL_RESULT_REPLACE_WRONG_TARGET,
 *    TOOL_RESULT_REPLACE_NON_CONTENT.
 * 7. Strict mode only: the `INV_*` invariants (invariants.ts).
 *
 * State is kept in columns (seq-table.ts) and a chunked surface (surface.ts), so an append costs
 * the same at 1M events as at 1k, and a single-node replace is O(block), not O(surface).
 */
import type { StructuralRow } from './event.js';
import { KIND_APPEND, KIND_GENERAL, columnsOfRows, type StructuralColumns } from './structural-columns.js';
import { DomainError } from './errors.js';
import { MESSAGE_EVENT_TYPES } from './event.js';
import type { CandidateEvent, Json, SessionEvent } from './event.js';
import { InvariantTrace } from './invariants.js';
import { Reason } from './reasons.js';
import { SeqTable, TypeInterner } from './seq-table.js';
import { rewriteChangesOnlyContent } from './tool-result-rewrite.js';
import { ChunkedSurface, SurfaceDraft } from './surface.js';
import { foldStoredReplace, type SurfaceDelta } from './surface-fold.js';
import { checkCitationShape, checkSurfaceMarker } from './envelope-rules.js';
import { normalizeCandidate } from './validate-event.js';
import type { ParsedJsonText } from './json.js';
import { assertAppendPairing, assertToolPairing, pairingInfoOfEvent, type OpenCalls, type PairingInfo } from './tool-pairing.js';

/** How a batch is checked: live `append` (seq assigned or equal to nextSeq) or `import` (seqs given, contiguous unless `allowSeqGaps`). */
export type PlanMode = 'append' | 'import';

/** What `plan()` needs from its caller. */
export interface PlanContext {
  readonly mode: PlanMode;
  /** Clock (Unix epoch ms) for events appended without a time: read at most once per plan() (they share it). */
  readonly now: () => number;
  /** Session id (legacy message ids are derived from it). */
  readonly sessionId: string;
  /**
   * A committed event by seq, with its full data. Needed only for tool/result replacements (rule
   * 2.4 compares the data of the target); prefetch `dataDependencies(engine, candidates)` and pass
   * a Map-backed function.
   */
  readonly lookup: (seq: number) => SessionEvent | undefined;
  /**
   * Turns the tool-pairing guard on for this batch (tool-pairing.ts): the pairing facts of every
   * committed surface node by seq. A batch with a replace that would split a call from its result
   * is refused with TOOL_PAIRING_BROKEN. The batch's own events are read from the batch.
   */
  readonly pairing?: (seq: number) => PairingInfo;
  /**
   * With `pairing`: also checks the batch's appends (TOOL_RESULT_ORPHANED, TOOL_RESULT_MISSING;
   * tool-pairing.ts) against the open calls of the committed surface (PairingIndex.openCalls).
   */
  readonly openCalls?: () => OpenCalls;
  /** Mode `import` only: accept seq gaps (seqs need only increase); off = contiguous from 0, as the reference seeds. */
  readonly allowSeqGaps?: boolean;
  /** Mode `import` of a reference file: also refuse what the reference's load path refuses (TURN_SHAPE, legacy-turns.ts). */
  readonly referenceLoad?: boolean;
  /**
   * Per candidate (by index): its data is fresh from the caller's JSON.parse of this text and
   * handed over (NormalizeContext.parsedData); the plan's `dataTexts` then holds the canonical ones.
   */
  readonly parsedData?: readonly (ParsedJsonText | undefined)[];
}

/** What one accepted event did to the surface (defined next to the stored-row fold). */
export type { SurfaceDelta } from './surface-fold.js';

/** The result of a successful `plan()`: apply it with `commit()` once the events are durable. */
export interface BatchPlan {
  /** The engine's nextSeq when the plan was made; commit refuses if it moved. */
  readonly baseNextSeq: number;
  /** The normalized, deep-frozen accepted events (absent keys absent). */
  readonly events: readonly SessionEvent[];
  /** One delta per event. */
  readonly deltas: readonly SurfaceDelta[];
  /** Per event (by index): its data's JSON text when known to be what JSON.stringify writes for it (PlanContext.parsedData). */
  readonly dataTexts?: readonly (string | undefined)[];
}

/** Options of a new engine. */
export interface EngineOptions {
  /** Enables the strict-mode invariants (dsh-semantics 2.6). */
  readonly strict?: boolean;
}

/** Thrown by `loadStructural`/`loadEvents` when stored rows are inconsistent (a corrupt store, not a client error). */
export class StructureCorruptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StructureCorruptError';
  }
}

interface PlanInternals {
  readonly plan: BatchPlan;
  readonly draft: SurfaceDraft;
  readonly trace: InvariantTrace | null;
}

function fail(reason: string, message: string, metadata: Record<string, string> = {}): DomainError {
  return new DomainError(reason, message, metadata);
}

/** The event with `seq` among a batch's planned events (ascending by seq), if there is one. */
function planned(events: readonly SessionEvent[], seq: number): SessionEvent | undefined {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (events[mid]!.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  const e = events[lo];
  return e !== undefined && e.seq === seq ? e : undefined;
}

export function isSafeSeq(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** Committed state of one session; see the module comment. */
export class SessionEngine {
  private readonly table = new SeqTable();
  private readonly types = new TypeInterner();
  private readonly surf = new ChunkedSurface(this.table);
  private generation = 0;
  private trace: InvariantTrace | null;
  private traceStale = false;
  /** tool/result replacement seq -> its start (to prefetch legacy id chains). */
  private readonly toolReplaceStarts = new Map<number, number>();
  private readonly surfaceTypeIds: number[];
  /** The most recent plan's draft: committing it adopts the draft instead of replaying deltas. */
  private lastPlan: PlanInternals | null = null;
  /** Whether strict-mode invariants are checked. */
  readonly strict: boolean;

  private constructor(strict: boolean) {
    this.strict = strict;
    this.trace = strict ? new InvariantTrace() : null;
    this.surfaceTypeIds = [...MESSAGE_EVENT_TYPES].map((t) => this.types.intern(t));
  }

  /** A new, empty engine. */
  static create(opts: EngineOptions = {}): SessionEngine {
    return new SessionEngine(opts.strict === true);
  }

  /** Last seq + 1 (0 when empty): the seq the next appended event gets. */
  get nextSeq(): number {
    return this.table.nextSeq;
  }

  /** Number of events (differs from nextSeq only for imported logs with seq gaps). */
  get eventCount(): number {
    return this.table.count;
  }

  /** Number of replaces committed (only goes up). */
  get replaceGeneration(): number {
    return this.generation;
  }

  /** Number of seqs on the surface. */
  get surfaceLength(): number {
    return this.surf.length;
  }

  /** The surface in order, as a fresh array. */
  surface(): number[] {
    return this.surf.toArray();
  }

  /** The type of the committed event `seq`, or undefined. */
  typeOf(seq: number): string | undefined {
    const id = this.table.typeId(seq);
    return id < 0 ? undefined : this.types.name(id);
  }

  /** True iff `seq` is currently on the surface. */
  isOnSurface(seq: number): boolean {
    return this.table.blockOf(seq) >= 0;
  }

  /**
   * Seqs of the most recent committed events of the given types, newest first, at most `limit`:
   * a scan of the in-memory type column (no data), free when no event of these types was ever
   * committed.
   */
  lastSeqsOfTypes(types: readonly string[], limit: number): number[] {
    const ids = types.map((t) => this.types.peek(t)).filter((id) => id >= 0);
    if (ids.length === 0) return [];
    return this.table.lastOrdinalsOfTypes(ids, limit).map((o) => this.table.seqAt(o));
  }

  /** Start seq of a committed tool/result replacement `seq` (for dataDependencies). */
  toolReplaceStart(seq: number): number | undefined {
    return this.toolReplaceStarts.get(seq);
  }

  /**
   * Validates `candidates` as one atomic batch; pure (the engine is not changed).
   *
   * @throws DomainError for the first failing candidate, `.index` = its batch position
   */
  plan(candidates: readonly CandidateEvent[], ctx: PlanContext): BatchPlan {
    if (this.strict && this.traceStale) {
      throw new Error('strict engine was loaded from structural rows only; load it with loadEvents() to rebuild the invariant trace');
    }
    const draft = new SurfaceDraft(this.surf);
    const trace = this.trace === null || candidates.length === 0 ? this.trace : this.trace.clone();
    const events: SessionEvent[] = [];
    const deltas: SurfaceDelta[] = [];
    const baseNextSeq = this.table.nextSeq;
    // Earlier events of the same batch are visible to later candidates: `events`, ascending by seq.
    const lookup = ctx.lookup;
    const lookupAll = (seq: number): SessionEvent | undefined => (seq < baseNextSeq ? lookup(seq) : planned(events, seq));
    // Events without a time get the batch's one reading of the clock.
    let time: number | undefined;
    const now = (): number => (time ??= ctx.now());
    let nextSeq = baseNextSeq;
    let count = this.table.count;
    const dataTexts: (string | undefined)[] | undefined = ctx.parsedData === undefined ? undefined : new Array<string | undefined>(candidates.length);
    for (let i = 0; i < candidates.length; i++) {
      try {
        const { event, hasSurfaceOp, hasSources, dataText } = normalizeCandidate(candidates[i] as CandidateEvent, {
          mode: ctx.mode,
          nextSeq,
          eventCount: count,
          now,
          allowSeqGaps: ctx.allowSeqGaps,
          referenceLoad: ctx.referenceLoad,
          parsedData: ctx.parsedData?.[i],
        });
        if (dataTexts !== undefined) dataTexts[i] = dataText;
        const delta = this.transition(event, hasSurfaceOp, hasSources, draft, ctx.sessionId, lookupAll, events);
        if (trace !== null) trace.check(event);
        events.push(event);
        deltas.push(delta);
        nextSeq = event.seq + 1;
        count++;
      } catch (e) {
        if (e instanceof DomainError) throw e.atIndex(i);
        throw e;
      }
    }
    if (ctx.pairing !== undefined && deltas.some((d) => d.kind === 'replace')) {
      const committed = ctx.pairing;
      const own = new Map<number, PairingInfo>();
      for (const e of events) own.set(e.seq, pairingInfoOfEvent(e, ctx.sessionId));
      assertToolPairing(this.surf.toArray(), deltas, (seq) => own.get(seq) ?? committed(seq));
    }
    if (ctx.pairing !== undefined && ctx.openCalls !== undefined && deltas.some((d) => d.kind !== 'none')) {
      assertAppendPairing(ctx.openCalls(), () => this.surf.toArray(), events, deltas, ctx.sessionId, ctx.pairing);
    }
    const plan: BatchPlan = dataTexts === undefined ? { baseNextSeq, events, deltas } : { baseNextSeq, events, deltas, dataTexts };
    this.lastPlan = { plan, draft, trace };
    return plan;
  }

  private transition(
    e: SessionEvent,
    hasSurfaceOp: boolean,
    hasSources: boolean,
    draft: SurfaceDraft,
    sessionId: string,
    lookupAll: (seq: number) => SessionEvent | undefined,
    batch: readonly SessionEvent[],
  ): SurfaceDelta {
    const { type, seq } = e;
    // 2. Eligibility and the marker (envelope-rules.ts, shared with clients).
    const marker = checkSurfaceMarker(type, e.surfaceOp as unknown as Json | undefined, hasSurfaceOp, hasSources);
    if (marker.kind === 'none') return { kind: 'none', seq };
    if (marker.kind === 'append') {
      // 3. Append.
      this.checkSources(e, hasSources, []);
      draft.append(seq);
      return { kind: 'append', seq };
    }
    const { start, end } = marker;
    // 4. Replace: range.
    const a = draft.locate(start);
    if (a === undefined) throw fail(Reason.REPLACE_START_NOT_ON_SURFACE, `surface replace: start seq ${start} not found in surface`, { start: String(start) });
    const b = draft.locate(end);
    if (b === undefined) throw fail(Reason.REPLACE_END_NOT_ON_SURFACE, `surface replace: end seq ${end} not found in surface`, { end: String(end) });
    if (draft.compare(a, b) > 0) {
      throw fail(Reason.REPLACE_START_AFTER_END, `surface replace: start seq ${start} (index ${draft.indexOf(a)}) is after end seq ${end} (index ${draft.indexOf(b)})`, {
        start: String(start),
        end: String(end),
      });
    }
    const shadowed = draft.range(a, b);
    // 5. Citations.
    this.checkSources(e, hasSources, shadowed);
    // 6. Tool-result rewrite.
    if (type === 'tool/result') {
      if (shadowed.length !== 1) {
        throw fail(Reason.TOOL_RESULT_REPLACE_NOT_SINGLE, `tool/result surface replacement must rewrite exactly one current node; the range ${start}..${end} covers ${shadowed.length}`);
      }
      const targetType = planned(batch, start)?.type ?? this.typeOf(start);
      if (targetType !== 'tool/result') {
        throw fail(Reason.TOOL_RESULT_REPLACE_WRONG_TARGET, `tool/result surface replacement must target a current tool/result; seq ${start} is ${String(targetType)}`, { start: String(start) });
      }
      const target = lookupAll(start);
      if (target === undefined) throw new Error(`plan() needs the data of seq ${start}: prefetch dataDependencies() and pass them through ctx.lookup`);
      if (!rewriteChangesOnlyContent(e, target, sessionId, lookupAll)) {
        throw fail(Reason.TOOL_RESULT_REPLACE_NON_CONTENT, `tool/result surface replacement of seq ${start} may change only content (the tool-result block's inner content); keep the message id, source, isError, turn, step, error and meta identical`, {
          start: String(start),
        });
      }
    }
    const index = draft.indexOf(a);
    draft.replace(a, b, shadowed, seq);
    return { kind: 'replace', seq, start, end, shadowed: Object.freeze(shadowed), index };
  }

  private checkSources(e: SessionEvent, hasSources: boolean, shadowed: readonly number[]): void {
    const { type, seq } = e;
    if (!hasSources) {
      if (shadowed.length > 0) throw incomplete(type, shadowed);
      return;
    }
    const { seqs, ascending, set } = checkCitationShape(type, e.sourceEventSeqs as unknown as Json);
    // Ascending lists: only the last element can be too big, but the reference reports the first
    // offending one, so find it only when there is one.
    const tooBig = ascending ? seqs.length > 0 && (seqs[seqs.length - 1] as number) >= seq : true;
    for (const v of tooBig ? seqs : []) {
      if (v >= seq) throw fail(Reason.SOURCES_NOT_EARLIER, `${type} sourceEventSeqs must reference earlier events: ${v} >= current seq ${seq}`, { seq: String(v) });
    }
    if (shadowed.length > 0) {
      let missing: number[];
      if (shadowed.length === 1 && seqs.length < 16) {
        missing = seqs.includes(shadowed[0] as number) ? [] : [shadowed[0] as number];
      } else {
        const have = set ?? new Set(seqs);
        missing = shadowed.filter((x) => !have.has(x));
      }
      if (missing.length > 0) throw incomplete(type, missing);
    }
  }

  /**
   * Applies a plan made by this engine (after the store committed its events).
   *
   * @throws Error if the engine moved since the plan (`plan.baseNextSeq !== nextSeq`)
   */
  commit(plan: BatchPlan): void {
    if (plan.baseNextSeq !== this.table.nextSeq) {
      throw new Error(`stale plan: it was made at nextSeq ${plan.baseNextSeq} but the engine is at ${this.table.nextSeq}; re-plan`);
    }
    if (plan.events.length === 0) return;
    const inner = this.lastPlan;
    this.lastPlan = null;
    let draft: SurfaceDraft;
    let trace: InvariantTrace | null;
    if (inner !== null && inner.plan === plan && inner.draft.baseVersion === this.surf.version) {
      draft = inner.draft;
      trace = inner.trace;
    } else {
      draft = this.replayDeltas(plan);
      trace = null;
      if (this.trace !== null) {
        trace = this.trace.clone();
        for (const e of plan.events) trace.apply(e);
      }
    }
    this.table.reserve(plan.events.length);
    for (const e of plan.events) {
      this.table.push(e.seq, this.types.intern(e.type));
      if (e.type === 'tool/result' && e.surfaceOp !== undefined && e.surfaceOp !== 'append') this.toolReplaceStarts.set(e.seq, e.surfaceOp.start);
    }
    this.surf.adopt(draft);
    this.generation += draft.replaces;
    if (trace !== null) this.trace = trace;
  }

  /** Rebuilds a draft from a plan's deltas (when the plan was made by another engine instance). */
  private replayDeltas(plan: BatchPlan): SurfaceDraft {
    const draft = new SurfaceDraft(this.surf);
    for (const d of plan.deltas) {
      if (d.kind === 'append') draft.append(d.seq);
      else if (d.kind === 'replace') {
        const a = draft.locate(d.start);
        const b = draft.locate(d.end);
        if (a === undefined || b === undefined) throw new Error(`plan does not fit this engine: replace ${d.start}..${d.end} not on the surface`);
        draft.replace(a, b, draft.range(a, b), d.seq);
      }
    }
    return draft;
  }

  /**
   * Rebuilds the state from stored structural columns (cold open). Rows are trusted to have been
   * validated when they were appended; only cheap consistency checks run (increasing seqs, surface
   * markers only on surface types, replace endpoints on the surface). A strict engine must use
   * `loadEvents` instead (its trace needs event data).
   *
   * @throws StructureCorruptError on inconsistent rows; the engine is then empty
   */
  loadStructural(rows: readonly StructuralRow[] | StructuralColumns): void {
    this.reset();
    const cols = Array.isArray(rows) ? columnsOfRows(rows as readonly StructuralRow[]) : (rows as StructuralColumns);
    const { seqs, typeIds, kinds, general } = cols;
    const table = this.table;
    const surf = this.surf;
    table.reserve(cols.length);
    const [userId, assistantId, toolId, steeringId] = this.surfaceTypeIds as [number, number, number, number];
    const tids = cols.types.map((t) => this.types.intern(t));
    try {
      for (let i = 0; i < cols.length; i++) {
        const seq = seqs[i]!;
        if (!(Number.isSafeInteger(seq) && seq >= table.nextSeq && (seq >= 0))) {
          throw new StructureCorruptError(`row ${i}: seq ${seq} does not increase (previous next seq ${table.nextSeq})`);
        }
        const tid = tids[typeIds[i]!]!;
        table.push(seq, tid);
        const kind = kinds[i]!;
        const row = kind === KIND_GENERAL ? general.get(i) : undefined;
        const op = kind === KIND_APPEND ? 'append' : row?.surfaceOp;
        if (tid !== userId && tid !== assistantId && tid !== toolId && tid !== steeringId) {
          if (op !== undefined || row?.sourceEventSeqs !== undefined) throw new StructureCorruptError(`row ${i} (seq ${seq}): ${cols.types[typeIds[i]!]} carries surface fields`);
          continue;
        }
        if (op === 'append') surf.append(seq);
        else if (op !== undefined && typeof op === 'object') {
          if (foldStoredReplace(surf, seq, op.start, op.end, false) === undefined) {
            throw new StructureCorruptError(`row ${i} (seq ${seq}): replace ${op.start}..${op.end} is not a surface range`);
          }
          this.generation++;
          if (tid === toolId) this.toolReplaceStarts.set(seq, op.start);
        } else {
          throw new StructureCorruptError(`row ${i} (seq ${seq}): ${cols.types[typeIds[i]!]} lacks a valid surfaceOp`);
        }
      }
    } catch (e) {
      this.reset();
      throw e;
    }
    this.traceStale = this.strict;
  }

  /**
   * Rebuilds the state from full stored events (trusted, as `loadStructural`), including the
   * strict-mode trace.
   */
  loadEvents(events: readonly SessionEvent[]): void {
    this.loadStructural(events);
    if (this.strict) {
      const trace = new InvariantTrace();
      for (const e of events) trace.apply(e);
      this.trace = trace;
      this.traceStale = false;
    }
  }

  private reset(): void {
    this.table.clear();
    this.surf.clear();
    this.generation = 0;
    this.toolReplaceStarts.clear();
    this.trace = this.strict ? new InvariantTrace() : null;
    this.traceStale = false;
  }
}

function incomplete(type: string, missing: readonly number[]): DomainError {
  return fail(
    Reason.REPLACE_SOURCES_INCOMPLETE,
    `${type} replace must include every shadowed surface node in sourceEventSeqs; missing ${missing.slice(0, 20).join(', ')}${missing.length > 20 ? ` and ${missing.length - 20} more` : ''}`,
    { missing: missing.slice(0, 100).join(','), missingCount: String(missing.length) },
  );
}
