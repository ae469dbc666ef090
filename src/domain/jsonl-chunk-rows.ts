/**
 * Packed chunk rows of the reference JSONL format (dsh-semantics 5.2): a run of at least
 * {@link MIN_PACKED_RUN} consecutive same-block `assistant/chunk` delta events is stored as one
 * row `{type, seq0, time0, data:{turn, step, index, dt[], texts[] | id, name?, args[]}}`.
 *
 * Semantics (worked out from the reference fixtures and cross-checked against them):
 *  - member k has `seq = seq0 + k`;
 *  - `time` of member 0 is `time0`, and `dt[k-1]` is the difference to the *previous* member
 *    (`time_k = time_{k-1} + dt[k-1]`), so `dt.length === members - 1`; deltas may be negative;
 *  - each member unpacks to `{type:"assistant/chunk", seq, time, data:{turn, step, chunk}}` with
 *    `chunk` = `{type:"text-delta"|"reasoning-delta", index, text}` or
 *    `{type:"tool-call-delta", index, id, name?, argumentsDelta}`;
 *  - the tool-call `name` is shared by the run: a row with `name` gives every member that name, a
 *    row without it gives none. So only runs whose members all carry the same name, or all carry
 *    none, are packable.
 */
import { DomainError } from './errors.js';
import type { CandidateEvent, Json, SessionEvent } from './event.js';

/** Reason: a line of a JSONL session file is malformed. */
export const JSONL_INVALID = 'JSONL_INVALID';

/** The three packed row types. */
export type ChunkRowType = 'text-chunks' | 'reasoning-chunks' | 'tool-call-chunks';

/** The delta chunk kinds that can be packed. */
export type DeltaKind = 'text-delta' | 'reasoning-delta' | 'tool-call-delta';

/** Minimum run length the reference packs (shorter runs stay one line per event). */
export const MIN_PACKED_RUN = 3;

/** Packed row type per delta kind. */
export const ROW_TYPE_OF_DELTA: Readonly<Record<DeltaKind, ChunkRowType>> = {
  'text-delta': 'text-chunks',
  'reasoning-delta': 'reasoning-chunks',
  'tool-call-delta': 'tool-call-chunks',
};

const DELTA_OF_ROW_TYPE: Readonly<Record<ChunkRowType, DeltaKind>> = {
  'text-chunks': 'text-delta',
  'reasoning-chunks': 'reasoning-delta',
  'tool-call-chunks': 'tool-call-delta',
};

/** True when `type` names a packed chunk row. */
export function isChunkRowType(type: unknown): type is ChunkRowType {
  return type === 'text-chunks' || type === 'reasoning-chunks' || type === 'tool-call-chunks';
}

/**
 * The block identity of a packable delta chunk: two chunks with equal keys may share a row.
 * `name` is `undefined` when the chunk has no name.
 */
export interface PackableChunk {
  readonly kind: DeltaKind;
  readonly turn: number;
  readonly step: number;
  readonly index: number;
  readonly id?: string;
  readonly name?: string;
  /** `text` or `argumentsDelta`. */
  readonly member: string;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function hasExactKeys(obj: Record<string, unknown>, required: readonly string[], optional: readonly string[] = []): boolean {
  const keys = Object.keys(obj);
  let seen = 0;
  for (const key of keys) {
    if (required.includes(key)) seen++;
    else if (!optional.includes(key)) return false;
  }
  return seen === required.length;
}

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && !Object.is(v, -0);

/**
 * Classifies an event as a packable delta chunk, or `undefined` when it must stay a line of its
 * own. Packable means *exactly* the shape a packed row reproduces: an `assistant/chunk` with the
 * envelope keys `type, seq, time, data` only (no surface fields, no `ignorable`), `data` with
 * exactly `turn, step, chunk`, and a delta chunk with exactly its keys and string payloads.
 */
export function classifyPackable(event: SessionEvent | CandidateEvent): PackableChunk | undefined {
  const e = event as unknown as Record<string, unknown>;
  if (e['type'] !== 'assistant/chunk') return undefined;
  if (!hasExactKeys(e, ['type', 'seq', 'time', 'data'])) return undefined;
  if (!Number.isSafeInteger(e['seq']) || (e['seq'] as number) < 0 || !Number.isSafeInteger(e['time'])) return undefined;
  const data = e['data'];
  if (!isPlainObject(data) || !hasExactKeys(data, ['turn', 'step', 'chunk'])) return undefined;
  const { turn, step, chunk } = data;
  if (!isNumber(turn) || !isNumber(step) || !isPlainObject(chunk)) return undefined;
  const kind = chunk['type'];
  const index = chunk['index'];
  if (!isNumber(index)) return undefined;
  if (kind === 'text-delta' || kind === 'reasoning-delta') {
    if (!hasExactKeys(chunk, ['type', 'index', 'text']) || typeof chunk['text'] !== 'string') return undefined;
    return { kind, turn, step, index, member: chunk['text'] };
  }
  if (kind === 'tool-call-delta') {
    if (!hasExactKeys(chunk, ['type', 'index', 'id', 'argumentsDelta'], ['name'])) return undefined;
    const { id, name, argumentsDelta } = chunk;
    if (typeof id !== 'string' || typeof argumentsDelta !== 'string') return undefined;
    if (Object.hasOwn(chunk, 'name')) {
      if (typeof name !== 'string') return undefined;
      return { kind, turn, step, index, id, name, member: argumentsDelta };
    }
    return { kind, turn, step, index, id, member: argumentsDelta };
  }
  return undefined;
}

/** True when `b` belongs to the same block as `a` (same kind, coordinates, call id and name). */
export function sameBlock(a: PackableChunk, b: PackableChunk): boolean {
  return (
    a.kind === b.kind &&
    a.turn === b.turn &&
    a.step === b.step &&
    a.index === b.index &&
    a.id === b.id &&
    a.name === b.name
  );
}

/**
 * Builds the packed row for a run of same-block chunks with consecutive seqs (the caller
 * guarantees both, and that every `dt` is a safe integer).
 */
export function packRun(
  first: PackableChunk,
  seq0: number,
  time0: number,
  dt: readonly number[],
  members: readonly string[],
): Record<string, Json> {
  const data: Record<string, Json> = { turn: first.turn, step: first.step, index: first.index, dt: [...dt] };
  if (first.kind === 'tool-call-delta') {
    data['id'] = first.id as string;
    if (first.name !== undefined) data['name'] = first.name;
    data['args'] = [...members];
  } else {
    data['texts'] = [...members];
  }
  return { type: ROW_TYPE_OF_DELTA[first.kind], seq0, time0, data };
}

/** What is wrong with a packed row's turn, step or index that is not a number the row can carry. */
function notANumber([field, v]: readonly [string, unknown]): string {
  if (typeof v === 'number') {
    return Object.is(v, -0)
      ? `${field} is -0, which a JSON writer prints as 0, so the row would not export as it was read; write 0`
      : `${field} is ${v}; turn, step and index must be finite numbers`;
  }
  const kind = v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : `a ${typeof v}`;
  return `${field} is ${kind}; turn, step and index must be JSON numbers`;
}

function rowError(lineNumber: number, rowType: string, message: string): DomainError {
  return new DomainError(JSONL_INVALID, `line ${lineNumber}: invalid ${rowType} row: ${message}`, {
    line: String(lineNumber),
  });
}

/**
 * Expands a packed row into the `assistant/chunk` events it stands for, validating the row's
 * shape exactly (no unknown keys, `dt.length === members - 1`, safe-integer seqs and times).
 *
 * @throws DomainError `JSONL_INVALID` naming the line number
 */
export function unpackChunkRow(row: Record<string, unknown>, lineNumber: number): SessionEvent[] {
  const rowType = row['type'] as ChunkRowType;
  const kind = DELTA_OF_ROW_TYPE[rowType];
  if (!hasExactKeys(row, ['type', 'seq0', 'time0', 'data'])) {
    throw rowError(lineNumber, rowType, 'a packed row has exactly the keys type, seq0, time0, data');
  }
  const { seq0, time0, data } = row;
  if (typeof seq0 !== 'number' || !Number.isSafeInteger(seq0) || seq0 < 0) {
    throw rowError(lineNumber, rowType, 'seq0 must be a non-negative safe integer');
  }
  if (typeof time0 !== 'number' || !Number.isSafeInteger(time0)) {
    throw rowError(lineNumber, rowType, 'time0 must be a safe integer');
  }
  if (!isPlainObject(data)) throw rowError(lineNumber, rowType, 'data must be an object');
  const isTool = kind === 'tool-call-delta';
  const shapeOk = isTool
    ? hasExactKeys(data, ['turn', 'step', 'index', 'dt', 'id', 'args'], ['name'])
    : hasExactKeys(data, ['turn', 'step', 'index', 'dt', 'texts']);
  if (!shapeOk) {
    throw rowError(
      lineNumber,
      rowType,
      isTool ? 'data has exactly turn, step, index, dt, id, args and optionally name' : 'data has exactly turn, step, index, dt, texts',
    );
  }
  const { turn, step, index, dt } = data;
  if (!isNumber(turn) || !isNumber(step) || !isNumber(index)) {
    throw rowError(lineNumber, rowType, notANumber(isNumber(turn) ? (isNumber(step) ? ['index', index] : ['step', step]) : ['turn', turn]));
  }
  const members = isTool ? data['args'] : data['texts'];
  const membersKey = isTool ? 'args' : 'texts';
  if (!Array.isArray(members) || members.length === 0 || !members.every((m) => typeof m === 'string')) {
    throw rowError(lineNumber, rowType, `${membersKey} must be a non-empty array of strings`);
  }
  if (!Array.isArray(dt) || dt.length !== members.length - 1 || !dt.every((d) => Number.isSafeInteger(d))) {
    throw rowError(lineNumber, rowType, `dt must be ${members.length - 1} safe integers (one fewer than ${membersKey})`);
  }
  if (members.length - 1 > Number.MAX_SAFE_INTEGER - seq0) throw rowError(lineNumber, rowType, 'seq range is not safe');
  let id: string | undefined;
  let name: string | undefined;
  if (isTool) {
    if (typeof data['id'] !== 'string') throw rowError(lineNumber, rowType, 'id must be a string');
    id = data['id'];
    if (Object.hasOwn(data, 'name')) {
      if (typeof data['name'] !== 'string') throw rowError(lineNumber, rowType, 'name must be a string when present');
      name = data['name'];
    }
  }
  const events: SessionEvent[] = [];
  let time = time0;
  for (let k = 0; k < members.length; k++) {
    if (k > 0) {
      time += dt[k - 1] as number;
      if (!Number.isSafeInteger(time)) throw rowError(lineNumber, rowType, 'time range is not safe');
    }
    const member = members[k] as string;
    let chunk: Record<string, Json>;
    if (isTool) {
      chunk = { type: kind, index, id: id as string };
      if (name !== undefined) chunk['name'] = name;
      chunk['argumentsDelta'] = member;
    } else {
      chunk = { type: kind, index, text: member };
    }
    events.push({ type: 'assistant/chunk', seq: seq0 + k, time, data: { turn, step, chunk } });
  }
  return events;
}
