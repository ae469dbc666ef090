/**
 * Row codecs: events to bound rows (data as the client's JSON text when the domain kept it),
 * selected rows back to events, sessions and idempotency results, and the compact structural
 * line format of readStructure (see decodeStructureLine).
 */
import type { IdempotentResult, SessionRecord, StoredEventText, StructuralRow } from '../../app/store-port.js';
import type { Json, SessionEvent, SessionHeader, SurfaceOp } from '../../domain/event.js';
import { jsonTextOf } from '../../domain/json.js';
import { decodeSeqs, decodeSeqsHex, decodeSurfaceOp, encodeSeqs, encodeSurfaceOp } from './codec.js';

/** One encoded event row, ready to bind. */
export type EventRow = [
  sessionId: string,
  seq: number,
  type: string,
  time: number,
  data: string,
  sourceEventSeqs: Buffer | null,
  surfaceOp: string | null,
  ignorable: 1 | null,
];

/** A raw event row as selected: seq, type, time, data, source_event_seqs, surface_op, ignorable. */
export type RawEvent = [number, string, number, string, Buffer | null, string | null, number | null];
/** A raw session row, in SESSION_COLUMNS order. */
export type RawSession = [
  string,
  number,
  number,
  string | null,
  string | null,
  number | null,
  string | null,
  number | null,
  string | null,
  string,
  string,
  number,
  number,
  number,
  number,
  number,
  string,
];

/** A stored idempotency row: request_hash, seqs, surface_length. */
export type StoredIdempotent = [string, Buffer, number];

/** The session columns, in RawSession order. */
export const SESSION_COLUMNS =
  'id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, labels, tenant, strict, next_seq, event_count, data_bytes, pairing_guard, writer';
/** The event columns, in RawEvent order. */
export const EVENT_COLUMNS = 'seq, type, time, data, source_event_seqs, surface_op, ignorable';

export function encodeEvents(sessionId: string, events: readonly SessionEvent[]): { rows: EventRow[]; dataBytes: number } {
  const rows = new Array<EventRow>(events.length);
  let dataBytes = 0;
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    // The client's text when the domain kept it (canonical: the same bytes JSON.stringify writes).
    const data = jsonTextOf(e.data) ?? JSON.stringify(e.data);
    dataBytes += Buffer.byteLength(data, 'utf8');
    rows[i] = [
      sessionId,
      e.seq,
      e.type,
      e.time,
      data,
      e.sourceEventSeqs === undefined ? null : encodeSeqs(e.sourceEventSeqs),
      encodeSurfaceOp(e.surfaceOp),
      e.ignorable === true ? 1 : null,
    ];
  }
  return { rows, dataBytes };
}

/**
 * Decodes one structural line: `<seq>\t<type>` when the event has no surface op, no
 * sourceEventSeqs and is not ignorable (the common case), `<seq>+\t<type>` for a plain
 * `append` surface op (the next most common), else
 * `<seq>:<surface_op or ''>\t<hex(source_event_seqs) or '-' for NULL>\t<'1' or ''>\t<type>`.
 * The type comes last so it may contain any character. Type strings are interned per call, so
 * a million rows hold a few dozen type strings rather than a million copies; a row of the same
 * type as the previous one is recognised without slicing or hashing its type.
 */
export function decodeStructureLine(line: string, types: TypeTable): StructuralRow {
  let seq = 0;
  let pos = 0;
  let code = line.charCodeAt(0);
  while (code >= 48 && code <= 57) {
    seq = seq * 10 + (code - 48);
    code = line.charCodeAt(++pos);
  }
  if (code === 9) return { seq, type: typeAt(line, pos + 1, types) };
  if (code === 43 /* + */) return { seq, type: typeAt(line, pos + 2, types), surfaceOp: 'append' };
  const opEnd = line.indexOf('\t', pos + 1);
  const seqsEnd = line.indexOf('\t', opEnd + 1);
  const ignorableEnd = line.indexOf('\t', seqsEnd + 1);
  const row: { seq: number; type: string; surfaceOp?: SurfaceOp; sourceEventSeqs?: readonly number[]; ignorable?: true } = {
    seq,
    type: intern(types, line.slice(ignorableEnd + 1)),
  };
  if (opEnd > pos + 1) row.surfaceOp = decodeSurfaceOp(line.slice(pos + 1, opEnd));
  if (line.charCodeAt(opEnd + 1) !== 45 /* '-' */) row.sourceEventSeqs = decodeSeqsHex(line.slice(opEnd + 1, seqsEnd));
  if (ignorableEnd > seqsEnd + 1) row.ignorable = true;
  return row;
}

/** The type from `start` to the end of `line`, interned; runs of one type (chunks) skip the slice and the hash. */
export function typeAt(line: string, start: number, types: TypeTable): string {
  const last = types.last;
  return last.length === line.length - start && line.endsWith(last) ? last : intern(types, line.slice(start));
}

export function intern(types: TypeTable, type: string): string {
  let known = types.get(type);
  if (known === undefined) {
    types.set(type, type);
    known = type;
  }
  types.last = known;
  return known;
}

/** Interned type strings of one scan, and the last one seen. */
export class TypeTable extends Map<string, string> {
  last = '\u0000';
}

export function decodeIdempotent(r: StoredIdempotent): IdempotentResult {
  return { seqs: decodeSeqs(r[1]), requestHash: r[0], surfaceLength: r[2] };
}

export function decodeEvent(r: RawEvent): SessionEvent {
  const event: {
    type: string;
    seq: number;
    time: number;
    data: Json;
    sourceEventSeqs?: readonly number[];
    surfaceOp?: SurfaceOp;
    ignorable?: true;
  } = { type: r[1], seq: r[0], time: r[2], data: JSON.parse(r[3]) as Json };
  if (r[4] !== null) event.sourceEventSeqs = decodeSeqs(r[4]);
  if (r[5] !== null) event.surfaceOp = decodeSurfaceOp(r[5]);
  if (r[6] !== null) event.ignorable = true;
  return event;
}

export function decodeEventText(r: RawEvent): StoredEventText {
  const event: {
    type: string;
    seq: number;
    time: number;
    dataText: string;
    sourceEventSeqs?: readonly number[];
    surfaceOp?: SurfaceOp;
    ignorable?: true;
  } = { type: r[1], seq: r[0], time: r[2], dataText: r[3] };
  if (r[4] !== null) event.sourceEventSeqs = decodeSeqs(r[4]);
  if (r[5] !== null) event.surfaceOp = decodeSurfaceOp(r[5]);
  if (r[6] !== null) event.ignorable = true;
  return event;
}

export function decodeSession(r: RawSession): SessionRecord {
  const header: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = { version: r[1], id: r[0], createdAt: r[2] };
  if (r[3] !== null) header.cwd = r[3];
  if (r[4] !== null) header.parentSession = r[4];
  if (r[5] !== null) header.seedLength = r[5];
  if (r[6] !== null) header.origin = r[6] as 'subagent';
  if (r[7] !== null) header.delegationDepth = r[7];
  if (r[8] !== null) header.agentPreset = r[8];
  return {
    header,
    labels: JSON.parse(r[9]) as Record<string, string>,
    tenant: r[10],
    strict: r[11] === 1,
    nextSeq: r[12],
    eventCount: r[13],
    dataBytes: r[14],
    pairingGuard: r[15] === 1,
    writer: r[16],
  };
}
