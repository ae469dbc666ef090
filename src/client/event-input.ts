/**
 * Client-side conversion of reference JSON envelopes
 * (`{"type","data","surfaceOp"?,"sourceEventSeqs"?,"ignorable"?,"seq"?,"time"?}`, one per line) to
 * EventInput protos, with one precedence for every path:
 *
 * - **Data is sent as read.** The `data` member goes out as its own source text in the `json`
 *   form, never re-serialized, so the server judges exactly what the client wrote (`1e400` and
 *   `-0` are NOT_JSON there, as on import and in the reference; a JSON.parse + JSON.stringify round
 *   trip would have stored `null` and `0`).
 * - **Everything the proto can carry is sent**, and the server's validator is the judge. A marker
 *   on a log-only type is refused there whatever its value, so an unrepresentable one (say
 *   `"surfaceOp": null`, or `"sourceEventSeqs": "x"`) is sent as a representable stand-in
 *   (`append`, `[]`) that the server refuses with the same reason, in the same order.
 * - **What the proto cannot carry** (a bad marker or citation list on a surface type, `ignorable`
 *   other than `true`, unknown keys, a non-string type, a bad seq or time, `-0` anywhere) is judged
 *   here by the domain's own stateless rules (`checkCandidateShape`, envelope-rules.ts), over the
 *   whole batch in order, so the first failing event and its reason are the server's. The one
 *   difference left: a rule that depends on the session and fails on the server before the
 *   client-side one (an explicit seq that is not the next one, a replace range not on the surface,
 *   in that event or an earlier one of the batch) is not seen here.
 */
import { DomainError } from '../domain/errors.js';
import { MESSAGE_EVENT_TYPES } from '../domain/event.js';
import { checkCandidateShape } from '../domain/envelope-rules.js';
import { isLosslessJson } from '../domain/json.js';
import { memberTexts } from '../domain/json-member-text.js';
import { ENVELOPE_KEYS } from '../domain/validate-event.js';
import type { CandidateEvent } from '../domain/event.js';
import type { EventInput, SourceEventSeqs } from '../../gen/palimpsest/v1/event.js';

/** Reason of a line that is not JSON text at all (the import path's reason for the same fault). */
export const JSONL_INVALID = 'JSONL_INVALID';

/** A non-negative safe integer that is not -0 (the proto's uint64 cannot tell -0 from 0). */
function isSeq(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && !Object.is(v, -0);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

const UNREPRESENTABLE = Symbol('unrepresentable');

function surfaceOpOf(op: unknown, logOnly: boolean): EventInput['surfaceOp'] | typeof UNREPRESENTABLE {
  if (op === undefined) return undefined;
  if (op === 'append') return { $case: 'append', value: {} };
  if (isObject(op) && Object.keys(op).length === 3 && op['op'] === 'replace' && isSeq(op['start']) && isSeq(op['end'])) {
    return { $case: 'replace', value: { start: op['start'], end: op['end'] } };
  }
  // Any marker on a log-only type is SURFACE_OP_FORBIDDEN: a stand-in gets the same verdict.
  return logOnly && isLosslessJson(op) ? { $case: 'append', value: {} } : UNREPRESENTABLE;
}

function sourcesOf(s: unknown, logOnly: boolean): SourceEventSeqs | undefined | typeof UNREPRESENTABLE {
  if (s === undefined) return undefined;
  if (Array.isArray(s) && s.every(isSeq)) return { seqs: s.slice() };
  return logOnly && isLosslessJson(s) ? { seqs: [] } : UNREPRESENTABLE;
}

/**
 * The EventInput carrying `value`, or undefined when the proto cannot carry it.
 *
 * @param dataText - the source text of `value.data` (sent as is); default its JSON.stringify
 */
function toEventInput(value: unknown, dataText: string | undefined): EventInput | undefined {
  if (!isObject(value)) return undefined;
  if (Object.keys(value).some((k) => !ENVELOPE_KEYS.has(k))) return undefined;
  const { type, data, seq, time, ignorable } = value;
  if (typeof type !== 'string') return undefined;
  if (seq !== undefined && !isSeq(seq)) return undefined;
  if (time !== undefined && !(typeof time === 'number' && Number.isSafeInteger(time) && !Object.is(time, -0))) return undefined;
  if (ignorable !== undefined && ignorable !== true) return undefined;
  const logOnly = !MESSAGE_EVENT_TYPES.has(type);
  const surfaceOp = surfaceOpOf(value['surfaceOp'], logOnly);
  const sourceEventSeqs = sourcesOf(value['sourceEventSeqs'], logOnly);
  if (surfaceOp === UNREPRESENTABLE || sourceEventSeqs === UNREPRESENTABLE) return undefined;
  let text: string | undefined;
  if ('data' in value) {
    text = dataText ?? (isLosslessJson(data) ? JSON.stringify(data) : undefined);
    if (text === undefined) return undefined;
  }
  return {
    type,
    data: text === undefined ? undefined : { kind: { $case: 'json', value: text } },
    sourceEventSeqs,
    surfaceOp,
    ignorable: ignorable === true,
    seq,
    time,
  };
}

/** One parsed envelope of a batch. */
export interface EnvelopeLine {
  /** The parsed JSON value. */
  readonly value: unknown;
  /** The line's text, when the envelope came from text (its data is then sent as written). */
  readonly text?: string;
  /** 1-based line number, added to error metadata as `line`. */
  readonly lineNumber?: number;
}

function atLine(e: DomainError, index: number, lineNumber: number | undefined): DomainError {
  if (lineNumber === undefined) return new DomainError(e.reason, e.message, { ...e.metadata }, index);
  return new DomainError(e.reason, `line ${lineNumber}: ${e.message}`, { ...e.metadata, line: String(lineNumber) }, index);
}

/**
 * A batch of parsed envelopes as EventInputs (see the module comment for the precedence).
 *
 * @throws DomainError with the reason the server gives, `metadata.index` (position in the batch)
 *   and `metadata.line`, when an envelope the proto cannot carry (or one before it) is invalid
 */
export function envelopesToEventInputs(envelopes: readonly EnvelopeLine[]): EventInput[] {
  const out: EventInput[] = [];
  let unrepresentable = -1;
  for (const [i, e] of envelopes.entries()) {
    const dataText = e.text === undefined ? undefined : memberTexts(e.text).get('data');
    const input = toEventInput(e.value, dataText);
    if (input === undefined) {
      unrepresentable = i;
      break;
    }
    out.push(input);
  }
  if (unrepresentable < 0) return out;
  // The domain's stateless rules, in batch order, up to the event the proto cannot carry.
  for (let i = 0; i <= unrepresentable; i++) {
    const e = envelopes[i] as EnvelopeLine;
    try {
      checkCandidateShape(e.value as CandidateEvent);
    } catch (err) {
      if (err instanceof DomainError) throw atLine(err, i, e.lineNumber);
      throw err;
    }
  }
  // Unreachable: every envelope the proto cannot carry breaks a stateless rule.
  throw new Error(`event ${unrepresentable} cannot be represented as an EventInput but passed the envelope rules`);
}

/**
 * One parsed envelope as an EventInput (data re-serialized: prefer {@link envelopeLineToEventInput}
 * for text, which sends data as written).
 *
 * @param index - position in the batch, reported as metadata `index`
 */
export function envelopeToEventInput(value: unknown, index: number): EventInput {
  try {
    return envelopesToEventInputs([{ value }])[0] as EventInput;
  } catch (e) {
    if (e instanceof DomainError) throw new DomainError(e.reason, e.message, { ...e.metadata }, index);
    throw e;
  }
}

/**
 * Parses one JSONL line of a batch.
 *
 * @throws DomainError JSONL_INVALID for text that is not JSON
 */
export function parseEnvelopeLine(line: string, index: number, lineNumber = index + 1): EnvelopeLine {
  try {
    return { value: JSON.parse(line) as unknown, text: line, lineNumber };
  } catch (e) {
    throw new DomainError(JSONL_INVALID, `line ${lineNumber}: not valid JSON (${(e as Error).message})`, { line: String(lineNumber) }, index);
  }
}

/**
 * One JSONL line as an EventInput (data sent as written).
 *
 * @param lineNumber - 1-based line number, added to the error metadata as `line`
 * @throws DomainError JSONL_INVALID for text that is not JSON, else as {@link envelopesToEventInputs}
 */
export function envelopeLineToEventInput(line: string, index: number, lineNumber = index + 1): EventInput {
  const parsed = parseEnvelopeLine(line, index, lineNumber);
  try {
    return envelopesToEventInputs([parsed])[0] as EventInput;
  } catch (e) {
    if (e instanceof DomainError) throw new DomainError(e.reason, e.message, { ...e.metadata, index: String(index) }, index);
    throw e;
  }
}
