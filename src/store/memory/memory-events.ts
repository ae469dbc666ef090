/**
 * Canonical, deep-frozen stored copies and small lookups of the in-memory store.
 */
import type { SessionRecord, StructuralRow } from '../../app/store-port.js';
import type { Json, SessionEvent, SessionHeader } from '../../domain/event.js';
import { jsonTextOf } from '../../domain/json.js';
import type { MemorySession } from './memory-database.js';

export function eventBytes(events: readonly SessionEvent[]): number {
  let n = 0;
  for (const e of events) n += dataBytes(e.data);
  return n;
}

/** UTF-8 bytes of `data`'s JSON text (the text kept by toFrozenJson when it has one). */
export function dataBytes(data: Json): number {
  return Buffer.byteLength(jsonTextOf(data) ?? JSON.stringify(data), 'utf8');
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
export function lowerBound(events: readonly SessionEvent[], seq: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (events[mid]!.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function structuralRow(event: SessionEvent): StructuralRow {
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
 * A deep-frozen copy of `event` in the canonical key order, absent optional keys absent. Data
 * that `toFrozenJson` froze in place with its canonical text (jsonTextOf) is already deep-frozen
 * and referenced by nothing mutable: it is shared, not copied.
 */
export function canonicalEvent(event: SessionEvent): SessionEvent {
  const out: {
    type: string;
    seq: number;
    time: number;
    data: Json;
    sourceEventSeqs?: readonly number[];
    surfaceOp?: SessionEvent['surfaceOp'];
    ignorable?: true;
  } = { type: event.type, seq: event.seq, time: event.time, data: jsonTextOf(event.data) !== undefined ? event.data : deepFreeze(JSON.parse(JSON.stringify(event.data)) as Json) };
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

export function deepFreeze<T extends Json>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
