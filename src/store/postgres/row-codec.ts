/**
 * Row codecs of the PostgreSQL store: events to the write functions' column arrays, selected rows
 * back to events, sessions and feed records.
 */
import type { FeedChangeKind, FeedRecord, SessionRecord, StoredEventText } from '../../app/store-port.js';
import { utf8Length } from '../../app/store-port.js';
import type { Json, SessionEvent, SessionHeader, SurfaceOp } from '../../domain/event.js';
import { decodeSurfaceOp, encodeSurfaceOp } from '../sqlite/codec.js';

/** Event columns as the write functions take them (one array per column). */
export type EventArrays = [seqs: number[], types: string[], times: number[], data: string[], sources: (string | null)[], ops: (string | null)[], ign: (boolean | null)[]];

export function encodeEvents(events: readonly SessionEvent[], dataTexts?: readonly (string | undefined)[]): { arrays: EventArrays; dataBytes: number } {
  const n = events.length;
  const seqs = new Array<number>(n);
  const types = new Array<string>(n);
  const times = new Array<number>(n);
  const data = new Array<string>(n);
  const sources = new Array<string | null>(n);
  const ops = new Array<string | null>(n);
  const ign = new Array<boolean | null>(n);
  let dataBytes = 0;
  for (let i = 0; i < n; i++) {
    const e = events[i]!;
    const text = dataTexts?.[i] ?? JSON.stringify(e.data);
    dataBytes += utf8Length(text);
    seqs[i] = e.seq;
    types[i] = e.type;
    times[i] = e.time;
    data[i] = text;
    sources[i] = e.sourceEventSeqs === undefined ? null : `{${e.sourceEventSeqs.join(',')}}`;
    ops[i] = encodeSurfaceOp(e.surfaceOp);
    ign[i] = e.ignorable === true ? true : null;
  }
  return { arrays: [seqs, types, times, data, sources, ops, ign], dataBytes };
}

export const SESSION_COLUMNS =
  'id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, labels, tenant, strict, pairing_guard, next_seq, event_count, data_bytes, writer, metadata_version';
export const EVENT_COLUMNS = 'seq, type, time, data, source_event_seqs, surface_op, ignorable';

/** A selected session row (SESSION_COLUMNS). */
export interface RawSession {
  id: string;
  version: number;
  created_at: number;
  cwd: string | null;
  parent_session: string | null;
  seed_length: number | null;
  origin: string | null;
  delegation_depth: number | null;
  agent_preset: string | null;
  labels: Record<string, string>;
  tenant: string;
  strict: boolean;
  pairing_guard: boolean;
  next_seq: number;
  event_count: number;
  data_bytes: number;
  writer: string;
  metadata_version: number;
}

/** A selected event row (EVENT_COLUMNS). */
export interface RawEvent {
  seq: number;
  type: string;
  time: number;
  data: string;
  source_event_seqs: number[] | null;
  surface_op: string | null;
  ignorable: boolean | null;
}

export function decodeEvent(r: RawEvent): SessionEvent {
  const event: { type: string; seq: number; time: number; data: Json; sourceEventSeqs?: readonly number[]; surfaceOp?: SurfaceOp; ignorable?: true } = {
    type: r.type, seq: r.seq, time: r.time, data: JSON.parse(r.data) as Json,
  };
  if (r.source_event_seqs !== null) event.sourceEventSeqs = r.source_event_seqs;
  if (r.surface_op !== null) event.surfaceOp = decodeSurfaceOp(r.surface_op);
  if (r.ignorable === true) event.ignorable = true;
  return event;
}

export function decodeEventText(r: RawEvent): StoredEventText {
  const event: { type: string; seq: number; time: number; dataText: string; sourceEventSeqs?: readonly number[]; surfaceOp?: SurfaceOp; ignorable?: true } = {
    type: r.type, seq: r.seq, time: r.time, dataText: r.data,
  };
  if (r.source_event_seqs !== null) event.sourceEventSeqs = r.source_event_seqs;
  if (r.surface_op !== null) event.surfaceOp = decodeSurfaceOp(r.surface_op);
  if (r.ignorable === true) event.ignorable = true;
  return event;
}

export function decodeSession(r: RawSession): SessionRecord {
  const header: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = { version: r.version, id: r.id, createdAt: r.created_at };
  if (r.cwd !== null) header.cwd = r.cwd;
  if (r.parent_session !== null) header.parentSession = r.parent_session;
  if (r.seed_length !== null) header.seedLength = r.seed_length;
  if (r.origin !== null) header.origin = r.origin as 'subagent';
  if (r.delegation_depth !== null) header.delegationDepth = r.delegation_depth;
  if (r.agent_preset !== null) header.agentPreset = r.agent_preset;
  return {
    header,
    labels: r.labels,
    tenant: r.tenant,
    strict: r.strict,
    pairingGuard: r.pairing_guard,
    nextSeq: r.next_seq,
    eventCount: r.event_count,
    dataBytes: r.data_bytes,
    writer: r.writer,
    metadataVersion: r.metadata_version,
  };
}

/** A feed row as selected (readFeed). */
export interface RawFeedRow {
  position: number; tenant: string; session_id: string; kind: FeedChangeKind; created_at: number; next_seq: number; event_count: number;
  surface_length: number; event_types: string[]; labels: Record<string, string>; previous_labels: Record<string, string> | null; time: number;
}

export function decodeFeedRow(r: RawFeedRow): FeedRecord {
  return {
    position: Number(r.position), tenant: r.tenant, sessionId: r.session_id, kind: r.kind, createdAt: Number(r.created_at), nextSeq: Number(r.next_seq),
    eventCount: Number(r.event_count), surfaceLength: Number(r.surface_length), eventTypes: r.event_types, labels: r.labels,
    previousLabels: r.previous_labels ?? undefined, time: Number(r.time),
  };
}
