/**
 * Stored events of the in-memory store and small lookups over them.
 *
 * An event is stored as what the SQLite store keeps: its envelope and its data's JSON text (the
 * client's canonical text when the domain kept it, else JSON.stringify's), frozen. Not the
 * parsed tree: a log of a million events is then a million small objects and strings rather
 * than millions of JSON nodes (plus their text) that every major GC has to mark; reads parse.
 */
import { withOptionalEnvelope, type SessionRecord, type StructuralRow } from '../../app/store-port.js';
import type { Json, SessionEvent, SessionHeader } from '../../domain/event.js';
import { deepFreeze as deepFreezeJson } from '../../domain/json.js';
import type { MemoryEvent, MemorySession } from './memory-database.js';

export type { MemoryEvent } from './memory-database.js';

export function eventBytes(events: readonly MemoryEvent[]): number {
  let n = 0;
  for (const e of events) n += e.dataBytes;
  return n;
}

export function toRecord(session: MemorySession): SessionRecord {
  return {
    header: session.header,
    labels: session.labels,
    tenant: session.tenant,
    nextSeq: session.nextSeq,
    eventCount: session.events.length,
    dataBytes: session.dataBytes,
    strict: session.strict,
    pairingGuard: session.pairingGuard,
    writer: session.writer,
  };
}

/** Index of the first event with seq >= `seq`. */
export function lowerBound(events: readonly { readonly seq: number }[], seq: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (events[mid]!.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function structuralRow(event: MemoryEvent): StructuralRow {
  const row: { seq: number; type: string; surfaceOp?: StructuralRow['surfaceOp']; sourceEventSeqs?: readonly number[]; ignorable?: true } = {
    seq: event.seq,
    type: event.type,
  };
  if (event.surfaceOp !== undefined) row.surfaceOp = event.surfaceOp;
  if (event.sourceEventSeqs !== undefined) row.sourceEventSeqs = event.sourceEventSeqs;
  if (event.ignorable === true) row.ignorable = true;
  return row;
}

/**
 * The stored form of `event`, frozen, in the canonical key order, absent optional keys absent:
 * its data as JSON text (`knownText`, the client's canonical text, when the plan kept one: what
 * JSON.stringify writes for it; else JSON.stringify's), so neither the caller's later mutation nor a reader can alter
 * the log.
 */
export function canonicalEvent(event: SessionEvent, knownText?: string): MemoryEvent {
  const dataText = knownText ?? JSON.stringify(event.data);
  const out: {
    type: string;
    seq: number;
    time: number;
    dataText: string;
    dataBytes: number;
    sourceEventSeqs?: readonly number[];
    surfaceOp?: SessionEvent['surfaceOp'];
    ignorable?: true;
  } = { type: event.type, seq: event.seq, time: event.time, dataText, dataBytes: Buffer.byteLength(dataText, 'utf8') };
  if (event.sourceEventSeqs !== undefined) out.sourceEventSeqs = Object.freeze([...event.sourceEventSeqs]);
  if (event.surfaceOp !== undefined) {
    out.surfaceOp =
      event.surfaceOp === 'append'
        ? 'append'
        : Object.freeze({ op: 'replace' as const, start: event.surfaceOp.start, end: event.surfaceOp.end });
  }
  if (event.ignorable === true) out.ignorable = true;
  return Object.freeze(out);
}

/** The event of a stored one: its data parsed from the stored text and deep-frozen. */
export function storedEvent(stored: MemoryEvent): SessionEvent {
  const data = deepFreezeJson(JSON.parse(stored.dataText) as Json);
  return Object.freeze(withOptionalEnvelope({ type: stored.type, seq: stored.seq, time: stored.time, data }, stored));
}

export function canonicalHeader(header: SessionHeader): SessionHeader {
  const out: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = {
    version: header.version,
    id: header.id,
    createdAt: header.createdAt,
  };
  if (header.cwd !== undefined) out.cwd = header.cwd;
  if (header.parentSession !== undefined) out.parentSession = header.parentSession;
  if (header.seedLength !== undefined) out.seedLength = header.seedLength;
  if (header.origin !== undefined) out.origin = header.origin;
  if (header.delegationDepth !== undefined) out.delegationDepth = header.delegationDepth;
  if (header.agentPreset !== undefined) out.agentPreset = header.agentPreset;
  return Object.freeze(out);
}
