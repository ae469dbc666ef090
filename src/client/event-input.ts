/**
 * Client-side conversion of a reference JSON envelope
 * (`{"type","data","surfaceOp"?,"sourceEventSeqs"?,"ignorable"?,"seq"?,"time"?}`) to the
 * EventInput proto. Only what the proto cannot carry is refused here, with the rule ID the
 * server would report for the same envelope; every other rule is left to the server, so the
 * one validator stays the judge.
 */
import { DomainError } from '../domain/errors.js';
import { Reason } from '../domain/reasons.js';
import { ENVELOPE_KEYS } from '../domain/validate-event.js';
import type { EventInput, SourceEventSeqs } from '../../gen/palimpsest/v1/event.js';

/** Reason of a line that is not JSON text at all (the import path's reason for the same fault). */
export const JSONL_INVALID = 'JSONL_INVALID';

function isSeq(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function surfaceOpOf(op: unknown, type: string, index: number): EventInput['surfaceOp'] {
  if (op === undefined) return undefined;
  if (op === 'append') return { $case: 'append', value: {} };
  if (!isObject(op) || op['op'] !== 'replace') {
    throw new DomainError(Reason.SURFACE_OP_INVALID, `${type} carries an invalid surfaceOp: expected "append" or {op:"replace", start, end}`, { type }, index);
  }
  const { start, end } = op;
  if (Object.keys(op).length !== 3 || !isSeq(start) || !isSeq(end)) {
    throw new DomainError(Reason.REPLACE_OP_INVALID, `${type} carries an invalid replace surfaceOp: expected exactly {op:"replace", start, end} with non-negative safe integer endpoints`, { type }, index);
  }
  return { $case: 'replace', value: { start, end } };
}

function sourcesOf(s: unknown, type: string, index: number): SourceEventSeqs | undefined {
  if (s === undefined) return undefined;
  if (!Array.isArray(s)) throw new DomainError(Reason.SOURCES_NOT_ARRAY, `${type} sourceEventSeqs must be an array when present`, { type }, index);
  const bad = s.findIndex((v) => !isSeq(v));
  if (bad >= 0) {
    throw new DomainError(Reason.SOURCES_NOT_SEQ, `${type} sourceEventSeqs must contain non-negative safe integers; element ${bad} is ${JSON.stringify(s[bad])}`, { element: String(bad) }, index);
  }
  return { seqs: s as number[] };
}

function envelopeError(message: string, field: string, index: number): DomainError {
  return new DomainError(Reason.ENVELOPE_INVALID, `invalid event envelope: ${message}`, { field }, index);
}

/**
 * A parsed reference envelope as an EventInput (data sent as canonical JSON text).
 *
 * @param index - position in the batch, reported as ErrorInfo-style metadata `index`
 * @throws DomainError ENVELOPE_INVALID, SURFACE_OP_INVALID, REPLACE_OP_INVALID, SOURCES_NOT_ARRAY
 *   or SOURCES_NOT_SEQ for shapes the proto cannot represent
 */
export function envelopeToEventInput(value: unknown, index: number): EventInput {
  if (!isObject(value)) throw envelopeError('an event must be a JSON object', 'event', index);
  for (const key of Object.keys(value)) {
    if (!ENVELOPE_KEYS.has(key)) throw envelopeError(`unknown key "${key}" (allowed: ${[...ENVELOPE_KEYS].join(', ')})`, key, index);
  }
  const { type, data, seq, time, ignorable } = value;
  if (typeof type !== 'string') throw envelopeError('type must be a string', 'type', index);
  if (seq !== undefined && !isSeq(seq)) throw envelopeError('seq must be a non-negative safe integer', 'seq', index);
  if (time !== undefined && !(typeof time === 'number' && Number.isSafeInteger(time))) throw envelopeError('time must be a safe integer (Unix epoch ms)', 'time', index);
  if (ignorable !== undefined && ignorable !== true) throw envelopeError('ignorable must be absent or exactly true', 'ignorable', index);
  return {
    type,
    data: 'data' in value ? { kind: { $case: 'json', value: JSON.stringify(data) } } : undefined,
    sourceEventSeqs: sourcesOf(value['sourceEventSeqs'], type, index),
    surfaceOp: surfaceOpOf(value['surfaceOp'], type, index),
    ignorable: ignorable === true,
    seq,
    time,
  };
}

/**
 * One JSONL line as an EventInput.
 *
 * @param lineNumber - 1-based line number, added to the error metadata as `line`
 * @throws DomainError JSONL_INVALID for text that is not JSON, else as {@link envelopeToEventInput}
 */
export function envelopeLineToEventInput(line: string, index: number, lineNumber = index + 1): EventInput {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch (e) {
    throw new DomainError(JSONL_INVALID, `line ${lineNumber}: not valid JSON (${(e as Error).message})`, { line: String(lineNumber) }, index);
  }
  try {
    return envelopeToEventInput(parsed, index);
  } catch (e) {
    if (e instanceof DomainError) throw new DomainError(e.reason, `line ${lineNumber}: ${e.message}`, { ...e.metadata, line: String(lineNumber) }, index);
    throw e;
  }
}
