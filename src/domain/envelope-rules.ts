/**
 * The rules of one candidate that do not depend on the session, defined once and used by every
 * path: the engine runs them inside its transition (dsh-semantics 2.2), and a client that holds a
 * raw reference envelope (the CLI's `append`) runs {@link checkCandidateShape} to refuse what the
 * proto cannot carry with the reason the server would give.
 *
 * - {@link checkSurfaceMarker}: eligibility and the marker (step 2): SURFACE_OP_FORBIDDEN,
 *   SOURCES_FORBIDDEN, SURFACE_OP_REQUIRED, SURFACE_OP_INVALID, REPLACE_OP_INVALID.
 * - {@link checkCitationShape}: the shape of `sourceEventSeqs` (step 5, first half):
 *   SOURCES_NOT_ARRAY, SOURCES_EMPTY, SOURCES_NOT_SEQ, SOURCES_DUPLICATE.
 */
import { DomainError } from './errors.js';
import { SURFACE_TYPES, type CandidateEvent, type Json } from './event.js';
import { MESSAGE_EVENT_TYPES } from './event.js';
import { isJsonObject } from './json.js';
import { Reason } from './reasons.js';
import { normalizeCandidate } from './validate-event.js';

function fail(reason: string, message: string, metadata: Record<string, string> = {}): DomainError {
  return new DomainError(reason, message, metadata);
}

function isSafeSeq(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** What the marker asks for, once eligibility and its shape passed. */
export type SurfaceMarker = { readonly kind: 'none' } | { readonly kind: 'append' } | { readonly kind: 'replace'; readonly start: number; readonly end: number };

/**
 * Eligibility and the marker (dsh-semantics 2.2 step 2). A non-surface type must carry neither
 * `surfaceOp` (whatever its value, `null` included) nor `sourceEventSeqs`; a surface type needs
 * `"append"` or exactly `{op:"replace", start, end}` with non-negative safe integer endpoints
 * (`null`, other strings, numbers, arrays: SURFACE_OP_INVALID; any other object, `{op:"append"}`
 * and `{}` included: REPLACE_OP_INVALID).
 *
 * @param op - the candidate's surfaceOp (unchecked JSON), when `hasSurfaceOp`
 */
export function checkSurfaceMarker(type: string, op: Json | undefined, hasSurfaceOp: boolean, hasSources: boolean): SurfaceMarker {
  // steering/message reaches the engine only from a stored log (import mode), as a user/message.
  if (!MESSAGE_EVENT_TYPES.has(type)) {
    if (hasSurfaceOp) throw fail(Reason.SURFACE_OP_FORBIDDEN, `${type} is not surface-eligible and cannot carry surfaceOp`, { type });
    if (hasSources) throw fail(Reason.SOURCES_FORBIDDEN, `${type} is not surface-eligible and cannot carry sourceEventSeqs`, { type });
    return { kind: 'none' };
  }
  if (!hasSurfaceOp) {
    throw fail(Reason.SURFACE_OP_REQUIRED, `${type} is surface-eligible and requires a surfaceOp marker ("append" or {op:"replace", start, end})`, { type });
  }
  if (op === 'append') return { kind: 'append' };
  if (!isJsonObject(op)) throw fail(Reason.SURFACE_OP_INVALID, `${type} carries an invalid surfaceOp: expected "append" or {op:"replace", start, end}`, { type });
  const keys = Object.keys(op);
  const start = op['start'];
  const end = op['end'];
  if (keys.length !== 3 || !('op' in op) || !('start' in op) || !('end' in op) || op['op'] !== 'replace' || !isSafeSeq(start) || !isSafeSeq(end)) {
    throw fail(Reason.REPLACE_OP_INVALID, `${type} carries an invalid replace surfaceOp: expected exactly {op:"replace", start, end} with non-negative safe integer endpoints`, { type });
  }
  return { kind: 'replace', start, end };
}

/** A citation list that passed {@link checkCitationShape}. */
export interface CitationShape {
  readonly seqs: readonly number[];
  /** True when strictly ascending (then it has no duplicates and only its last element can be too big). */
  readonly ascending: boolean;
  /** The seqs as a set, when it was built (lists that are not ascending). */
  readonly set: ReadonlySet<number> | null;
}

/**
 * The shape of a present `sourceEventSeqs` (dsh-semantics 2.2 step 5, in order): an array, not
 * empty except on assistant/message, of non-negative safe integers (the first offending element
 * is reported, before duplicates), without duplicates.
 */
export function checkCitationShape(type: string, s: Json): CitationShape {
  if (!Array.isArray(s)) throw fail(Reason.SOURCES_NOT_ARRAY, `${type} sourceEventSeqs must be an array when present`, { type });
  if (s.length === 0 && type !== 'assistant/message') {
    throw fail(Reason.SOURCES_EMPTY, `${type} sourceEventSeqs must not be empty except on assistant/message; omit it or cite the source events`, { type });
  }
  let ascending = true;
  let prev = -1;
  for (let i = 0; i < s.length; i++) {
    const v = s[i];
    if (!isSafeSeq(v)) throw fail(Reason.SOURCES_NOT_SEQ, `${type} sourceEventSeqs must densely contain non-negative safe integers; element ${i} is ${JSON.stringify(v)}`, { element: String(i) });
    if (v <= prev) ascending = false;
    prev = v;
  }
  const seqs = s as number[];
  let set: Set<number> | null = null;
  if (!ascending) {
    set = new Set(seqs);
    if (set.size !== seqs.length) {
      const seen = new Set<number>();
      const dup = seqs.find((v) => (seen.has(v) ? true : (seen.add(v), false)));
      throw fail(Reason.SOURCES_DUPLICATE, `${type} sourceEventSeqs must not contain duplicates; ${String(dup)} appears twice`, { seq: String(dup) });
    }
  }
  return { seqs, ascending, set };
}

/**
 * Every rule of one live-append candidate that does not depend on the session, in the engine's
 * order: NOT_JSON, ENVELOPE_INVALID, LEGACY_VOCABULARY, REQUEST_HEADER_SHAPE, MESSAGE_SHAPE, the
 * marker rules and the citation shape (not SEQ_NOT_CONTIGUOUS, the replace range rules,
 * SOURCES_NOT_EARLIER, coverage or the tool-result rewrite). An envelope that fails here fails on
 * the server with the same reason unless a rule that depends on the session fails first (an
 * explicit seq that is not the next one, a replace range not on the surface).
 *
 * @throws DomainError with the reason
 */
export function checkCandidateShape(candidate: CandidateEvent): void {
  const seq = isJsonObject(candidate) && isSafeSeq(candidate['seq']) ? candidate['seq'] : 0;
  const { event, hasSurfaceOp, hasSources } = normalizeCandidate(candidate, { mode: 'append', nextSeq: seq, eventCount: seq, now: () => 0 });
  checkSurfaceMarker(event.type, event.surfaceOp as unknown as Json | undefined, hasSurfaceOp, hasSources);
  if (hasSources && SURFACE_TYPES.has(event.type)) checkCitationShape(event.type, event.sourceEventSeqs as unknown as Json);
}
