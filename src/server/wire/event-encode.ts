/**
 * A hand-written encoder of ListEventsResponse for events whose data goes out as JSON text (the
 * default data format): byte for byte what the generated ListEventsResponse.encode writes for the
 * same message (see test/unit/list-events-response.test.ts), in one buffer sized up front, without
 * building a PbSessionEvent per event or the generated writer's fork/join chunks.
 */
import type { SessionEvent } from '../../domain/event.js';

/** An event and the JSON text its data goes out as. */
export interface EventWithText {
  readonly event: Omit<SessionEvent, 'data'>;
  readonly text: string;
  /** UTF-8 bytes of `text`. */
  readonly textBytes: number;
}

const TWO_32 = 2 ** 32;

/** Node's Buffer#utf8Write / #latin1Write (what Buffer#write calls, without its argument handling). */
interface Utf8Writable {
  utf8Write(s: string, offset: number, length: number): number;
  latin1Write(s: string, offset: number, length: number): number;
}

/**
 * Writes `s`, whose UTF-8 form is `bytes` long, at `pos`. A string whose UTF-8 length equals its
 * length is ASCII: then its bytes are its char codes, copied without UTF-8 encoding.
 */
function writeText(buf: Buffer, pos: number, s: string, bytes: number): number {
  const b = buf as unknown as Utf8Writable;
  return bytes === s.length ? b.latin1Write(s, pos, bytes) : b.utf8Write(s, pos, bytes);
}

/** Bytes of the varint of a non-negative safe integer (below 2^53: at most 8). */
function varintSize(v: number): number {
  if (v < 128) return 1;
  if (v < 16384) return 2;
  if (v < 2097152) return 3;
  if (v < 268435456) return 4;
  if (v < 34359738368) return 5;
  if (v < 4398046511104) return 6;
  if (v < 562949953421312) return 7;
  return 8;
}

function writeVarint(buf: Buffer, pos: number, v: number): number {
  if (v >= TWO_32) {
    // Split into 32-bit halves (exact for safe integers) so the loop runs on 32-bit integers:
    // epoch-millisecond times (~2^41) are the common case here.
    let lo = v >>> 0;
    let hi = (v - lo) / TWO_32;
    while (hi > 0) {
      buf[pos++] = (lo & 127) | 128;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    v = lo;
  }
  while (v > 127) {
    buf[pos++] = (v & 127) | 128;
    v >>>= 7;
  }
  buf[pos++] = v;
  return pos;
}

/** Whether the fast path encodes this number exactly as the generated uint64/int64 writer does. */
function plain(v: number): boolean {
  return Number.isSafeInteger(v) && v >= 0;
}

/** Whether every number of the event is a non-negative safe integer (otherwise: generated encoder). */
export function fastEncodable(e: Omit<SessionEvent, 'data'>): boolean {
  if (!plain(e.seq) || !plain(e.time)) return false;
  const s = e.sourceEventSeqs;
  if (s) for (let i = 0; i < s.length; i++) if (!plain(s[i]!)) return false;
  const op = e.surfaceOp;
  if (op !== undefined && op !== 'append' && (!plain(op.start) || !plain(op.end))) return false;
  return true;
}

/** Size of the encoded SessionEvent (without its field tag and length). */
function eventSize(x: EventWithText, typeBytes: number): number {
  const e = x.event;
  let n = 0;
  if (e.seq !== 0) n += 1 + varintSize(e.seq);
  if (e.time !== 0) n += 1 + varintSize(e.time);
  if (typeBytes !== 0) n += 1 + varintSize(typeBytes) + typeBytes;
  const dataLen = 1 + varintSize(x.textBytes) + x.textBytes;
  n += 1 + varintSize(dataLen) + dataLen;
  const s = e.sourceEventSeqs;
  if (s) {
    const len = seqsMessageSize(s);
    n += 1 + varintSize(len) + len;
  }
  const op = e.surfaceOp;
  if (op === 'append') n += 2;
  else if (op !== undefined) {
    const len = replaceSize(op.start, op.end);
    n += 1 + varintSize(len) + len;
  }
  if (e.ignorable === true) n += 2;
  return n;
}

function packedSize(s: readonly number[]): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) n += varintSize(s[i]!);
  return n;
}

function seqsMessageSize(s: readonly number[]): number {
  if (s.length === 0) return 0;
  const p = packedSize(s);
  return 1 + varintSize(p) + p;
}

function replaceSize(start: number, end: number): number {
  return (start !== 0 ? 1 + varintSize(start) : 0) + (end !== 0 ? 1 + varintSize(end) : 0);
}

/**
 * ListEventsResponse{events, next_page_token} encoded. Every event must be fastEncodable; `extra`
 * holds already-encoded SessionEvent messages (the generated encoder's output, for events that
 * are not) by index.
 */
export function encodeListEventsResponse(events: readonly EventWithText[], nextPageToken: string, extra?: ReadonlyMap<number, Uint8Array>): Buffer {
  const sizes = new Array<number>(events.length);
  const typeBytes = new Array<number>(events.length);
  let total = 0;
  for (let i = 0; i < events.length; i++) {
    const pre = extra?.get(i);
    const t = pre === undefined ? Buffer.byteLength(events[i]!.event.type) : 0;
    typeBytes[i] = t;
    const n = pre === undefined ? eventSize(events[i]!, t) : pre.length;
    sizes[i] = n;
    total += 1 + varintSize(n) + n;
  }
  const tokenBytes = Buffer.byteLength(nextPageToken);
  if (tokenBytes !== 0) total += 1 + varintSize(tokenBytes) + tokenBytes;
  const buf = Buffer.allocUnsafe(total);
  let pos = 0;
  for (let i = 0; i < events.length; i++) {
    buf[pos++] = 10;
    pos = writeVarint(buf, pos, sizes[i]!);
    const pre = extra?.get(i);
    if (pre !== undefined) {
      buf.set(pre, pos);
      pos += pre.length;
      continue;
    }
    const x = events[i]!;
    const e = x.event;
    if (e.seq !== 0) {
      buf[pos++] = 8;
      pos = writeVarint(buf, pos, e.seq);
    }
    if (e.time !== 0) {
      buf[pos++] = 16;
      pos = writeVarint(buf, pos, e.time);
    }
    const t = typeBytes[i]!;
    if (t !== 0) {
      buf[pos++] = 26;
      pos = writeVarint(buf, pos, t);
      pos += writeText(buf, pos, e.type, t);
    }
    buf[pos++] = 34;
    pos = writeVarint(buf, pos, 1 + varintSize(x.textBytes) + x.textBytes);
    buf[pos++] = 10;
    pos = writeVarint(buf, pos, x.textBytes);
    pos += writeText(buf, pos, x.text, x.textBytes);
    const s = e.sourceEventSeqs;
    if (s) {
      buf[pos++] = 42;
      pos = writeVarint(buf, pos, seqsMessageSize(s));
      if (s.length !== 0) {
        buf[pos++] = 10;
        pos = writeVarint(buf, pos, packedSize(s));
        for (let j = 0; j < s.length; j++) pos = writeVarint(buf, pos, s[j]!);
      }
    }
    const op = e.surfaceOp;
    if (op === 'append') {
      buf[pos++] = 50;
      buf[pos++] = 0;
    } else if (op !== undefined) {
      buf[pos++] = 58;
      pos = writeVarint(buf, pos, replaceSize(op.start, op.end));
      if (op.start !== 0) {
        buf[pos++] = 8;
        pos = writeVarint(buf, pos, op.start);
      }
      if (op.end !== 0) {
        buf[pos++] = 16;
        pos = writeVarint(buf, pos, op.end);
      }
    }
    if (e.ignorable === true) {
      buf[pos++] = 64;
      buf[pos++] = 1;
    }
  }
  if (tokenBytes !== 0) {
    buf[pos++] = 18;
    pos = writeVarint(buf, pos, tokenBytes);
    pos += (buf as unknown as Utf8Writable).utf8Write(nextPageToken, pos, tokenBytes);
  }
  if (pos !== total) throw new Error(`ListEventsResponse encoding wrote ${pos} of ${total} bytes`);
  return buf;
}

/** ListEventsResponse{events, next_page_token} from its events already encoded (EncodedEventPage's bytes). */
export function listEventsResponseOf(events: Uint8Array, nextPageToken: string): Buffer {
  const tokenBytes = Buffer.byteLength(nextPageToken);
  const buf = Buffer.allocUnsafe(events.length + (tokenBytes === 0 ? 0 : 1 + varintSize(tokenBytes) + tokenBytes));
  buf.set(events, 0);
  if (tokenBytes !== 0) {
    let pos = events.length;
    buf[pos++] = 18;
    pos = writeVarint(buf, pos, tokenBytes);
    (buf as unknown as Utf8Writable).utf8Write(nextPageToken, pos, tokenBytes);
  }
  return buf;
}

/**
 * AppendEventsResponse{seqs, replayed, surface_length} encoded, byte for byte as the generated
 * encoder (test/unit/list-events-response.test.ts); undefined when a number is not a
 * non-negative safe integer (the caller then uses the generated encoder, which rejects it).
 */
export function encodeAppendEventsResponse(seqs: readonly number[], replayed: boolean, surfaceLength: number): Buffer | undefined {
  if (!plain(surfaceLength)) return undefined;
  let packed = 0;
  for (let i = 0; i < seqs.length; i++) {
    const s = seqs[i]!;
    if (!plain(s)) return undefined;
    packed += varintSize(s);
  }
  const total = (seqs.length !== 0 ? 1 + varintSize(packed) + packed : 0) + (replayed ? 2 : 0) + (surfaceLength !== 0 ? 1 + varintSize(surfaceLength) : 0);
  const buf = Buffer.allocUnsafe(total);
  let pos = 0;
  if (seqs.length !== 0) {
    buf[pos++] = 10;
    pos = writeVarint(buf, pos, packed);
    for (let i = 0; i < seqs.length; i++) pos = writeVarint(buf, pos, seqs[i]!);
  }
  if (replayed) {
    buf[pos++] = 16;
    buf[pos++] = 1;
  }
  if (surfaceLength !== 0) {
    buf[pos++] = 24;
    pos = writeVarint(buf, pos, surfaceLength);
  }
  return buf;
}
