/**
 * What a session counts toward its tenant's byte quota (one definition for every store): the JSON
 * text of its header and labels plus the data text of each of its events (UTF-8 bytes).
 */
import type { SessionHeader } from './event.js';
import { utf8Length } from './utf8.js';

/**
 * Bytes a session's header and labels count toward the tenant's byte quota (their JSON text,
 * UTF-8); event data adds the byte length of each event's data text. One definition for every store.
 */
export function storedSessionBytes(header: SessionHeader, labels: Readonly<Record<string, string>>): number {
  return utf8Length(JSON.stringify(header)) + utf8Length(JSON.stringify(labels));
}

/** How many bytes a labels change adds to a session's byte count (negative when they shrink). */
export function labelsBytesDelta(before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>): number {
  return utf8Length(JSON.stringify(after)) - utf8Length(JSON.stringify(before));
}
