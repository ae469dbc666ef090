/**
 * Small conversions of the in-memory store: session records, stored events back to events,
 * canonical headers. The events themselves are kept in columns (event-log.ts).
 */
import { withOptionalEnvelope, type SessionRecord } from '../../app/store-port.js';
import type { Json, SessionEvent, SessionHeader } from '../../domain/event.js';
import { deepFreeze as deepFreezeJson } from '../../domain/json.js';
import type { MemorySession } from './memory-database.js';
import type { MemoryEvent } from './event-log.js';

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
    metadataVersion: session.metadataVersion,
  };
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
