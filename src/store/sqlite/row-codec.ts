/**
 * Row codecs: events to bound rows (data as the client's JSON text when the domain kept it),
 * selected rows back to events, sessions and idempotency results, and the compact structural
 * line format of readStructure (see decodeStructureLine).
 */
import { withOptionalEnvelope, type EncodedEventPage, type FeedChangeKind, type FeedRecord, type IdempotentResult, type SessionRecord, type StoredEventText, type StructuralRow } from '../../app/store-port.js';
import type { Json, SessionEvent, SessionHeader, SurfaceOp } from '../../domain/event.js';
import { DataCorruptedError } from '../../app/storage-error.js';
import { decodeSeqs, decodeSeqsHex, decodeSurfaceOp, encodeSeqs, encodeSurfaceOp } from './codec.js';
import { CRC_INIT, crcFinal, crcString } from './crc32c.js';
import { dataCrc, digestStep, rowCorrupted, structuralCrc } from './integrity.js';
import { tokenColumns } from './token-figures.js';
import type { EventTokenFigures } from '../../domain/event-tokens.js';

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
  scrc: number,
  dcrc: number,
  /** The event's token figures (token-figures.ts): its estimate (NULL for 0, -1 unknown) and usage text. */
  tokens: number | null,
  usage: string | null,
];

/**
 * A selected event: a raw row of EVENT_COLUMNS (seq, type, time, data, source_event_seqs,
 * surface_op, ignorable, scrc, dcrc), verified in JS, or the row's EVENT_LINE, checked by SQLite.
 */
export type RawEvent = ChecksummedRawEvent | string;
/** A raw event row of EVENT_COLUMNS (with both stored checksums). */
export type ChecksummedRawEvent = [number, string, number, string, Buffer | null, string | null, number | null, number, number];
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
  number,
];

/** A stored idempotency row: request_hash, seqs, surface_length. */
export type StoredIdempotent = [string, Buffer, number];

/** The session columns, in RawSession order. */
export const SESSION_COLUMNS =
  'id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, labels, tenant, strict, next_seq, event_count, data_bytes, pairing_guard, writer';
/** What session reads select: SESSION_COLUMNS and the metadata version (issue #35; not written by the insert). */
export const SESSION_READ_COLUMNS = `${SESSION_COLUMNS}, metadata_version`;
/** The event columns, in RawEvent order. */
export const EVENT_COLUMNS = 'seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc';
/**
 * One value per event row, checked by SQLite (the checksum extension, sqlite-ext.ts): the
 * row's line for decodeEventLine. better-sqlite3 materialises a JS value per column and an array
 * per raw row, which cost more than the SELECT itself (measured: 0.82 ms per 1,000-row page for
 * the eight columns, 0.35 ms for the line).
 */
export const EVENT_LINE =
  'palimpsest_event_line(seq, type, time, data, source_event_seqs, surface_op, ignorable, scrc, dcrc)';
/** The extension's aggregate that encodes a page of rows (sqlite-ext/sqlite-checksums.c palimpsest_event_page). */
export const EVENT_PAGE = 'palimpsest_event_page';

/** `figures`: per event, its token figures when the caller knows them (BlobWrites.tokenFigures), else they are computed here. */
export function encodeEvents(
  sessionId: string, events: readonly SessionEvent[], checksums = true, dataTexts?: readonly (string | undefined)[], figures?: readonly EventTokenFigures[],
): { rows: EventRow[]; dataBytes: number } {
  const rows = new Array<EventRow>(events.length);
  let dataBytes = 0;
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    // The client's text when the plan kept it (AppendRequest.dataTexts: the bytes JSON.stringify writes).
    const data = dataTexts?.[i] ?? JSON.stringify(e.data);
    dataBytes += Buffer.byteLength(data, 'utf8');
    const seqs = e.sourceEventSeqs === undefined ? null : encodeSeqs(e.sourceEventSeqs);
    const op = encodeSurfaceOp(e.surfaceOp);
    const ignorable = e.ignorable === true ? 1 : null;
    const [tokens, usage] = tokenColumns(e, data, figures?.[i]);
    rows[i] = [sessionId, e.seq, e.type, e.time, data, seqs, op, ignorable, 0, 0, tokens, usage];
  }
  if (checksums) addChecksums(rows);
  return { rows, dataBytes };
}

/**
 * Fills in the two checksums of rows encoded without them (the writer thread computes them, off
 * the event loop). A citation list that crossed a thread boundary arrives as a plain Uint8Array:
 * it is viewed as a Buffer again (same bytes, no copy).
 */
export function addChecksums(rows: EventRow[]): void {
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    let seqs: Uint8Array | null = row[5];
    if (seqs !== null && !Buffer.isBuffer(seqs)) row[5] = seqs = Buffer.from(seqs.buffer, seqs.byteOffset, seqs.byteLength);
    row[8] = structuralCrc(row[1], row[6], seqs as Buffer | null, row[7], row[2]);
    row[9] = dataCrc(row[3], row[4]);
  }
}

/**
 * Decodes and verifies one structural line: `<scrc>,<dcrc>,` and then `<seq>\t<type>` when the
 * event has no surface op, no sourceEventSeqs and is not ignorable (the common case),
 * `<seq>+\t<type>` for a plain `append` surface op (the next most common), else
 * `<seq>:<surface_op or ''>\t<hex(source_event_seqs) or '-' for NULL>\t<'1' or ''>\t<type>`
 * (the canonical line of integrity.ts, whose CRC is `scrc`). The type comes last so it may
 * contain any character. Type strings are interned per call, so a million rows hold a few dozen
 * type strings rather than a million copies; a row of the same type as the previous one is
 * recognised without slicing or hashing its type. `scan.digest` advances by the row; a row whose
 * structural CRC does not match throws DataCorruptedError.
 */
export function decodeStructureLine(line: string, types: TypeTable, scan: StructureScan): StructuralRow {
  let scrc = 0;
  let pos = 0;
  let code = line.charCodeAt(0);
  while (code >= 48 && code <= 57) {
    scrc = scrc * 10 + (code - 48);
    code = line.charCodeAt(++pos);
  }
  let dcrc = 0;
  code = line.charCodeAt(++pos);
  while (code >= 48 && code <= 57) {
    dcrc = dcrc * 10 + (code - 48);
    code = line.charCodeAt(++pos);
  }
  const start = ++pos;
  let seq = 0;
  code = line.charCodeAt(pos);
  while (code >= 48 && code <= 57) {
    seq = seq * 10 + (code - 48);
    code = line.charCodeAt(++pos);
  }
  let row: StructuralRow;
  let crc = crcString(CRC_INIT, line, start, pos);
  if (code === 9) {
    row = { seq, type: typeAt(line, pos + 1, types) };
    crc = crcString(crcString(crc, ':\t-\t\t'), line, pos + 1);
  } else if (code === 43 /* + */) {
    row = { seq, type: typeAt(line, pos + 2, types), surfaceOp: 'append' };
    crc = crcString(crcString(crc, ':append\t-\t\t'), line, pos + 2);
  } else {
    const opEnd = line.indexOf('\t', pos + 1);
    const seqsEnd = line.indexOf('\t', opEnd + 1);
    const ignorableEnd = line.indexOf('\t', seqsEnd + 1);
    const general: { seq: number; type: string; surfaceOp?: SurfaceOp; sourceEventSeqs?: readonly number[]; ignorable?: true } = {
      seq,
      type: intern(types, line.slice(ignorableEnd + 1)),
    };
    crc = crcString(crc, line, pos);
    if (crcFinal(crc) !== scrc) throw rowCorrupted(scan.sessionId, seq, 'structural');
    if (opEnd > pos + 1) general.surfaceOp = decodeSurfaceOp(line.slice(pos + 1, opEnd));
    if (line.charCodeAt(opEnd + 1) !== 45 /* '-' */) general.sourceEventSeqs = decodeSeqsHex(line.slice(opEnd + 1, seqsEnd));
    if (ignorableEnd > seqsEnd + 1) general.ignorable = true;
    row = general;
  }
  if (crcFinal(crc) !== scrc) throw rowCorrupted(scan.sessionId, seq, 'structural');
  scan.digest = digestStep(scan.digest, scrc, dcrc);
  return row;
}

/** The state of one structural scan: whose rows, and the digest of the rows seen so far. */
export interface StructureScan {
  readonly sessionId: string;
  digest: number;
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

/**
 * What is damaged in a raw row, or undefined when its stored bytes match its checksums: a value
 * of a storage class the schema forbids (a flipped record-header bit turns TEXT into BLOB; STRICT
 * tables do not re-check on read) or an empty surface_op is damage as the extension judges it,
 * then the two CRC-32C values.
 */
export function rowDamage(r: ChecksummedRawEvent): 'structural' | 'data' | undefined {
  if (typeof r[0] !== 'number' || typeof r[1] !== 'string' || (r[4] !== null && !Buffer.isBuffer(r[4])) ||
      (r[5] !== null && (typeof r[5] !== 'string' || r[5] === '')) || (r[6] !== null && typeof r[6] !== 'number') || typeof r[7] !== 'number') {
    return 'structural';
  }
  if (typeof r[2] !== 'number' || typeof r[3] !== 'string' || typeof r[8] !== 'number') return 'data';
  if (structuralCrc(r[0], r[5], r[4], r[6], r[1]) !== r[7]) return 'structural';
  if (dataCrc(r[2], r[3]) !== r[8]) return 'data';
  return undefined;
}

/** Throws DataCorruptedError unless the row's stored bytes match its checksums. */
export function verifyRow(sessionId: string, r: ChecksummedRawEvent): void {
  const damage = rowDamage(r);
  if (damage !== undefined) throw rowCorrupted(sessionId, typeof r[0] === 'number' ? r[0] : Number(r[0]), damage);
}

/** The version of EVENT_LINE's format; sqlite-ext/sqlite-checksums.c LINE_FORMAT must be the same. */
export const LINE_FORMAT = 6;

/**
 * The envelope and data text of an EVENT_LINE (sqlite-ext/sqlite-checksums.c `palimpsest_event_line`):
 * `<seq>,<time>,<'1' or ''>,<UTF-16 length of type>,<UTF-8 bytes of data>,<HEX(source_event_seqs) or '-'>,<surface_op or ''>\t<type><data>`,
 * or `!<1|2>,<seq>` for a row that failed its structural (1) or data (2) checksum, which throws
 * DataCorruptedError (as does a line that does not parse: it is never served in part).
 */
class EventLine {
  readonly seq: number;
  readonly time: number;
  readonly type: string;
  readonly dataText: string;
  readonly dataBytes: number;
  readonly sourceEventSeqs: readonly number[] | undefined;
  readonly surfaceOp: SurfaceOp | undefined;
  readonly ignorable: boolean;

  constructor(sessionId: string, line: string) {
    if (line.charCodeAt(0) === 33 /* ! */) throw rowCorrupted(sessionId, Number(line.slice(3)), line.charCodeAt(1) === 50 ? 'data' : 'structural');
    cursor = 0;
    this.seq = lineNumber(line);
    const negative = line.charCodeAt(cursor) === 45; /* - */
    if (negative) cursor++;
    const time = lineNumber(line);
    this.time = negative ? -time : time;
    this.ignorable = line.charCodeAt(cursor) === 49; /* 1 */
    if (this.ignorable) cursor++;
    if (line.charCodeAt(cursor++) !== 44) throw malformed(sessionId, line);
    const typeLength = lineNumber(line);
    this.dataBytes = lineNumber(line);
    const seqsAt = cursor;
    const seqsEnd = line.indexOf(',', seqsAt);
    const tab = seqsEnd < 0 ? -1 : line.indexOf('\t', seqsEnd + 1);
    const dataAt = tab + 1 + typeLength;
    if (Number.isNaN(this.seq + time + typeLength + this.dataBytes) || tab < 0 || dataAt > line.length) throw malformed(sessionId, line);
    this.sourceEventSeqs = line.charCodeAt(seqsAt) === 45 /* - */ ? undefined : decodeSeqsHex(line.slice(seqsAt, seqsEnd));
    this.surfaceOp = tab > seqsEnd + 1 ? decodeSurfaceOp(line.slice(seqsEnd + 1, tab)) : undefined;
    this.type = line.slice(tab + 1, dataAt);
    this.dataText = line.slice(dataAt);
  }
}

/** EventLine's position in the line it decodes (one line at a time: decoding is synchronous). */
let cursor = 0;

/** The decimal number at `cursor` and the comma after it (consumed); NaN when there is none. */
function lineNumber(line: string): number {
  const start = cursor;
  let v = 0;
  let code = line.charCodeAt(start);
  while (code >= 48 && code <= 57) {
    v = v * 10 + (code - 48);
    code = line.charCodeAt(++cursor);
  }
  if (code !== 44 || cursor === start) return NaN;
  cursor++;
  return v;
}

/** A line the extension wrote that this decoder cannot read: refused like a damaged row. */
function malformed(sessionId: string, line: string): DataCorruptedError {
  const seq = Number.parseInt(line, 10);
  return new DataCorruptedError(sessionId, Number.isSafeInteger(seq) ? seq : undefined,
    `session ${sessionId}: a stored event${Number.isSafeInteger(seq) ? ` (seq ${seq})` : ''} came back from the checksum extension in a form this build cannot read; ` +
      'nothing of it is served; rebuild the extension (`npm run build:sqlite-ext`) and run palimpsest verify');
}

/** The event of an EVENT_LINE (SQLite checked the row). */
export function decodeEventLine(sessionId: string, line: string): SessionEvent {
  const l = new EventLine(sessionId, line);
  return withOptionalEnvelope({ type: l.type, seq: l.seq, time: l.time, data: JSON.parse(l.dataText) as Json }, l);
}

/** The event (data as stored text, with its UTF-8 length) of an EVENT_LINE (SQLite checked the row). */
export function decodeEventTextLine(sessionId: string, line: string): StoredEventText {
  const l = new EventLine(sessionId, line);
  return withOptionalEnvelope({ type: l.type, seq: l.seq, time: l.time, dataText: l.dataText, dataBytes: l.dataBytes }, l);
}

/**
 * The page palimpsest_event_page wrote (its events are opaque here: their format is the server's,
 * src/server/wire/event-page.ts): 'P', the event count, the next seq, the first and the last seq in
 * read order (each an 8-byte little-endian integer, -1: none), then the events; 'D', the damage (1
 * structural, 2 data) and the seq of the first damaged row (throws DataCorruptedError); 'F': not
 * encodable there (undefined).
 */
export function decodeEventPage(sessionId: string, blob: Buffer): EncodedEventPage | undefined {
  const kind = blob[0];
  if (kind === 0x50 /* P */ && blob.length >= PAGE_HEAD) {
    const next = Number(blob.readBigInt64LE(9));
    const first = Number(blob.readBigInt64LE(17));
    const last = Number(blob.readBigInt64LE(25));
    return {
      bytes: blob.subarray(PAGE_HEAD), count: Number(blob.readBigInt64LE(1)), nextSeq: next < 0 ? undefined : next,
      firstSeq: first < 0 ? undefined : first, lastSeq: last < 0 ? undefined : last,
    };
  }
  if (kind === 0x44 /* D */ && blob.length === 10) throw rowCorrupted(sessionId, Number(blob.readBigInt64LE(2)), blob[1] === 2 ? 'data' : 'structural');
  if (kind === 0x46 /* F */ && blob.length === 1) return undefined;
  throw new DataCorruptedError(sessionId, undefined,
    `session ${sessionId}: a page of events came back from the checksum extension in a form this build cannot read; ` +
      'nothing of it is served; rebuild the extension (`npm run build:sqlite-ext`) and run palimpsest verify');
}

/** Bytes of a 'P' page's head (sqlite-ext/sqlite-checksums.c PAGE_HEAD). */
const PAGE_HEAD = 33;

/** The optional envelope of a raw row (source_event_seqs, surface_op, ignorable columns). */
function rawEnvelope(r: ChecksummedRawEvent): { sourceEventSeqs?: readonly number[]; surfaceOp?: SurfaceOp; ignorable: boolean } {
  return { sourceEventSeqs: r[4] === null ? undefined : decodeSeqs(r[4]), surfaceOp: r[5] === null ? undefined : decodeSurfaceOp(r[5]), ignorable: r[6] !== null };
}

/** The event of a selected row, verified. */
export function decodeEvent(sessionId: string, r: RawEvent): SessionEvent {
  if (typeof r === 'string') return decodeEventLine(sessionId, r);
  verifyRow(sessionId, r);
  return withOptionalEnvelope({ type: r[1], seq: r[0], time: r[2], data: JSON.parse(r[3]) as Json }, rawEnvelope(r));
}

/** The event (data as stored text) of a selected row, verified. */
export function decodeEventText(sessionId: string, r: RawEvent): StoredEventText {
  if (typeof r === 'string') return decodeEventTextLine(sessionId, r);
  verifyRow(sessionId, r);
  return withOptionalEnvelope({ type: r[1], seq: r[0], time: r[2], dataText: r[3] }, rawEnvelope(r));
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
    metadataVersion: r[17],
  };
}

/** A feed row as selected (feed-statements.ts readFeed). */
export type RawFeedRow = [number, string, string, string, number, number, number, number, string, string, string | null, number];

export function decodeFeedRow(r: RawFeedRow): FeedRecord {
  return {
    position: r[0], tenant: r[1], sessionId: r[2], kind: r[3] as FeedChangeKind, createdAt: r[4], nextSeq: r[5], eventCount: r[6],
    surfaceLength: r[7], eventTypes: JSON.parse(r[8]) as string[], labels: JSON.parse(r[9]) as Record<string, string>,
    previousLabels: r[10] === null ? undefined : (JSON.parse(r[10]) as Record<string, string>), time: r[11],
  };
}
