/**
 * The stored form of the events this process holds with their bytes (issue #39, subscriptions
 * with `blob_refs`): BlobbingStore records, for each event whose data it moved into blobs on a
 * write or put back on a read, the event as the store keeps it (references in place of the
 * values). Subscribers asking for references are sent that form; an event with no entry holds no
 * reference (its stored form is itself) or came a way that recorded none, and is sent as it is,
 * bytes included. Keyed weakly by the event object: an entry lives as long as the event does.
 */
import type { SessionEvent } from '../domain/event.js';

const stored = new WeakMap<SessionEvent, SessionEvent>();

/** Records `form` as the stored form of `event` (same seq, references in place of blobbed values). */
export function recordStoredForm(event: SessionEvent, form: SessionEvent): void {
  if (event !== form) stored.set(event, form);
}

/** The stored form of `event` when recorded, else `event` itself. */
export function storedFormOf(event: SessionEvent): SessionEvent {
  return stored.get(event) ?? event;
}
