/**
 * The session metadata trailer of an exported JSONL file (issue #35): labels and the pairing
 * guard travel as the file's LAST event, `{"type":"palimpsest/session-metadata","ignorable":true,
 * "data":{"labels":{...},"pairingGuard":true|false}}`, seq = the session's next seq.
 *
 * Why an event and not header keys: the reference's loader validates the header and refuses keys
 * it does not know (dsh-semantics 1.6; src/domain/jsonl-header.ts does the same), while an
 * unknown event type marked `ignorable: true` is accepted anywhere (dsh-semantics 1.4 / 5.3).
 * Why last and not first: seqs are the events' indexes from 0 and are cited by
 * `sourceEventSeqs` and replace ranges, so an event in front would renumber the whole log.
 * An importer that knows the trailer drops it from the log (the round trip keeps the log exactly)
 * and applies it; one that does not keeps it as an ordinary ignorable event. A file without it
 * imports as before.
 */
import type { CandidateEvent, Json, SessionEvent } from './event.js';

/** The trailer's event type. */
export const METADATA_TRAILER_TYPE = 'palimpsest/session-metadata';

/** What the trailer carries. */
export interface SessionMetadata {
  readonly labels: Readonly<Record<string, string>>;
  readonly pairingGuard: boolean;
}

/** The trailer event of a session whose next seq is `seq` (its time: the last event's, or the creation time). */
export function metadataTrailer(meta: SessionMetadata, seq: number, time: number): SessionEvent {
  return { type: METADATA_TRAILER_TYPE, seq, time, data: { labels: { ...meta.labels }, pairingGuard: meta.pairingGuard }, ignorable: true };
}

/** True when a session has metadata worth a trailer (labels, or the guard on). */
export function hasMetadata(meta: SessionMetadata): boolean {
  return meta.pairingGuard || Object.keys(meta.labels).length > 0;
}

/** The metadata of an event when it is a well-formed trailer (type, ignorable, data shape), else undefined. */
export function readMetadataTrailer(e: CandidateEvent | SessionEvent): SessionMetadata | undefined {
  if (e.type !== METADATA_TRAILER_TYPE || e.ignorable !== true || e.surfaceOp !== undefined) return undefined;
  const d = e.data as Json;
  if (typeof d !== 'object' || d === null || Array.isArray(d)) return undefined;
  const { labels, pairingGuard } = d as Record<string, Json>;
  if (typeof pairingGuard !== 'boolean' || typeof labels !== 'object' || labels === null || Array.isArray(labels)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels)) {
    if (typeof v !== 'string') return undefined;
    out[k] = v;
  }
  return { labels: out, pairingGuard };
}
