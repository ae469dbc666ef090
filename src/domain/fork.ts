/**
 * Fork planning (dsh-semantics 5.5): the child session's header and initial events, computed
 * from the source log and an optional boundary. Pure; the app checks existence (`SESSION_NOT_FOUND`,
 * `SESSION_ALREADY_EXISTS`, the latter first), runs the child through the engine in 'import' mode
 * and stores it.
 */
import { DomainError } from './errors.js';
import { SESSION_FORMAT_VERSION, type CandidateEvent, type SessionEvent, type SessionHeader } from './event.js';
import { SessionEngine, type BatchPlan } from './session-engine.js';

/** Reason: the source session does not exist (checked by the app). */
export const SESSION_NOT_FOUND = 'SESSION_NOT_FOUND';
/** Reason: the child id is already taken (checked by the app, before anything else). */
export const SESSION_ALREADY_EXISTS = 'SESSION_ALREADY_EXISTS';
/** Reason: the boundary is not a non-negative safe integer, or not a seq of the source log. */
export const INVALID_BOUNDARY = 'INVALID_BOUNDARY';
/** Reason: the boundary lies inside a turn (the last turn/start|turn/end at or before it is a turn/start). */
export const OPEN_TURN = 'OPEN_TURN';

/** The type of the marker that ends an inherited seed. */
export const END_SEED_TYPE = 'session/end-seed';

/** What a fork needs to know about its source. */
export interface ForkSource {
  readonly header: SessionHeader;
  /** The source log in ascending seq order (read lazily: iteration stops after the boundary). */
  readonly events: Iterable<SessionEvent>;
}

/** Parameters of a fork. */
export interface ForkRequest {
  /** The child's id. */
  readonly childId: string;
  /** The child's creation time (epoch ms). */
  readonly createdAt: number;
  /** Last source seq to inherit (inclusive); absent = the whole log. Unvalidated client input. */
  readonly boundary?: unknown;
}

/** A planned child session. */
export interface ForkPlan {
  /**
   * `{version:0, id, createdAt, cwd? (the source's), parentSession: source id, seedLength,
   * delegationDepth: 0}`. `seedLength` is the number of inherited source events (the durable
   * lineage boundary), not counting the `session/end-seed` marker the child adds.
   */
  readonly header: SessionHeader;
  /**
   * The child's initial log: the inherited prefix (the source's events, unchanged, seqs kept)
   * followed by a `session/end-seed` marker `{data:{}}` at the next seq, unless the prefix already
   * ends with one. An empty prefix gives just the marker at seq 0 (as the reference).
   */
  readonly events: readonly SessionEvent[];
}

/**
 * Plans a fork of `source` at `boundary` (dsh-semantics 5.5).
 *
 * @throws DomainError `INVALID_BOUNDARY` (not a non-negative safe integer; beyond the last seq;
 *   not a seq of the log, e.g. in a gap of an imported log) or `OPEN_TURN`.
 */
export function planFork(source: ForkSource, request: ForkRequest): ForkPlan {
  const { boundary } = request;
  if (boundary !== undefined && (typeof boundary !== 'number' || !Number.isSafeInteger(boundary) || boundary < 0)) {
    throw new DomainError(
      INVALID_BOUNDARY,
      `fork boundary ${describe(boundary)} is not a non-negative safe integer; pass the seq of the last event to inherit`,
      { boundary: describe(boundary) },
    );
  }
  const prefix: SessionEvent[] = [];
  let lastTurnEventType: string | undefined;
  let lastTurnEventSeq: number | undefined;
  let found = false;
  let lastSeq: number | undefined;
  for (const event of source.events) {
    if (boundary !== undefined && event.seq > boundary) {
      lastSeq = event.seq;
      break;
    }
    prefix.push(event);
    lastSeq = event.seq;
    if (event.type === 'turn/start' || event.type === 'turn/end') {
      lastTurnEventType = event.type;
      lastTurnEventSeq = event.seq;
    }
    if (event.seq === boundary) found = true;
  }
  if (boundary !== undefined && !found) {
    const detail =
      lastSeq === undefined
        ? 'the source log is empty'
        : boundary > lastSeq
          ? `it is beyond the last seq ${lastSeq}`
          : 'no event of the source log has that seq';
    throw new DomainError(INVALID_BOUNDARY, `fork boundary ${boundary} is not a seq of the source log: ${detail}`, {
      boundary: String(boundary),
      ...(lastSeq === undefined ? {} : { lastSeq: String(lastSeq) }),
    });
  }
  if (lastTurnEventType === 'turn/start') {
    const at = boundary === undefined ? 'the end of the log' : `seq ${boundary}`;
    throw new DomainError(
      OPEN_TURN,
      `cannot fork at ${at}: the turn started at seq ${lastTurnEventSeq} is still open there; fork at or after its turn/end, or before its turn/start`,
      { boundary: boundary === undefined ? '' : String(boundary), turnStartSeq: String(lastTurnEventSeq) },
    );
  }

  const src = source.header;
  const header: Record<string, unknown> = {
    version: SESSION_FORMAT_VERSION,
    id: request.childId,
    createdAt: request.createdAt,
  };
  if (src.cwd !== undefined) header['cwd'] = src.cwd;
  header['parentSession'] = src.id;
  header['seedLength'] = prefix.length;
  header['delegationDepth'] = 0;

  // As the reference's seed constructor: a seed that does not end with the marker gets one, the
  // empty seed included (its child starts with the marker at seq 0).
  const events = [...prefix];
  const tail = prefix[prefix.length - 1];
  if (tail === undefined || tail.type !== END_SEED_TYPE) {
    events.push({ type: END_SEED_TYPE, seq: tail === undefined ? 0 : tail.seq + 1, time: request.createdAt, data: {} });
  }
  return { header: Object.freeze(header) as unknown as SessionHeader, events };
}

/** A fork plan re-validated by a fresh engine. */
export interface AcceptedFork {
  /** The child's engine, with the child's initial log committed. */
  readonly engine: SessionEngine;
  /** The engine's plan: the normalized, frozen child events to store (in `plan.events`). */
  readonly plan: BatchPlan;
}

/**
 * Runs a planned child through every acceptance rule again, as the reference's seed constructor
 * does: a fresh engine plans the whole child log in 'import' mode (seq gaps inherited from an
 * imported source are allowed) and commits it. Tool/result replacements in the seed can only
 * target events of the same batch, so no lookup into a store is needed.
 *
 * @throws DomainError with the failing event's batch index when the inherited prefix does not
 *   pass (for example a source that strict mode would refuse, when `strict` is on).
 */
export function acceptFork(plan: ForkPlan, options: { readonly strict?: boolean } = {}): AcceptedFork {
  const engine = SessionEngine.create({ strict: options.strict === true });
  const batch = engine.plan(plan.events as unknown as readonly CandidateEvent[], {
    mode: 'import',
    now: () => plan.header.createdAt,
    sessionId: plan.header.id,
    lookup: () => undefined,
    allowSeqGaps: true,
  });
  engine.commit(batch);
  return { engine, plan: batch };
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'number' && Object.is(value, -0)) return '-0';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
