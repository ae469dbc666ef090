/**
 * Store port, optional capabilities: reads a store may offer and the app probes for at run time
 * (with the type guards below), falling back to the event log when a store has none.
 */
import type { StructuralRow } from '../../domain/event.js';
import type { ReadEventsQuery } from './event-log.js';

/** What `readSurfaceStructure` returns: a prefix's surface rows and the prefix's last seq. */
export interface SurfaceStructure {
  readonly rows: StructuralRow[];
  readonly headSeq: number | undefined;
}

/**
 * What one event adds to a ListEvents page's size estimate, by which pages are cut below the
 * max message size: its data and type bytes (UTF-8), 11 per cited seq, 64 for the rest of its
 * envelope. The server's rows path (handlers.ts) and readEncodedEventPage (in SQLite:
 * native/sqlite-checksums.c palimpsest_event_page writes the same sum) cut at the same event.
 */
export function pageEventBytes(dataBytes: number, typeBytes: number, citedSeqs: number): number {
  return dataBytes + typeBytes + 11 * citedSeqs + 64;
}

/**
 * A page of events encoded as the `events` field of `palimpsest.v1.ListEventsResponse`: each
 * event is the field's tag, its length and a `palimpsest.v1.SessionEvent` with its data in the
 * json form, byte for byte what the generated encoder writes (proto/ is the published schema).
 */
export interface EncodedEventPage {
  readonly bytes: Uint8Array;
  /** Events in `bytes`. */
  readonly count: number;
  /** The first seq after the page (left out by the page size or the byte budget); undefined when the read reached the end. */
  readonly nextSeq: number | undefined;
  /** Seq of the page's first event in read order (undefined for an empty page): what the app's run check needs (run-check.ts). */
  readonly firstSeq: number | undefined;
  /** Seq of the page's last event in read order (undefined for an empty page). */
  readonly lastSeq: number | undefined;
}

/** Capability: pages of events already in the wire form (see EncodedEventPage). */
export interface EncodedEventPages {
  /**
   * Optional (the SQLite store with its checksum extension): a page of events already in the wire
   * form the schema publishes (see EncodedEventPage), rows checked as readEventTexts checks them.
   * A deliberate shortcut for the server's ListEvents in the json data form: a store that has it
   * knows the published message layout, and proto/ changes to SessionEvent must change it too
   * (test/integration/sqlite-event-page.test.ts compares it with the generated encoder).
   * `query.limit` is the page size; the page also ends before an event that would take the sum
   * of pageEventBytes past `budgetBytes`, keeping at least one. Undefined when this page cannot
   * be encoded here: the caller reads it with readEventTexts.
   */
  readEncodedEventPage(sessionId: string, query: ReadEventsQuery, budgetBytes: number): Promise<EncodedEventPage | undefined>;
}

/** Capability: the surface rows of a prefix (time travel). */
export interface SurfaceStructureReads {
  /**
   * Optional (issue #14, time travel): the structural rows of the *surface* events (surfaceOp
   * present) with seq <= toSeq, ascending, without `sourceEventSeqs`, plus the last seq <= toSeq
   * of any type. All a surface replay of a prefix needs, without decoding the rest of the log;
   * stores without it are replayed from `readStructure`.
   */
  readSurfaceStructure(sessionId: string, toSeq: number): Promise<SurfaceStructure>;
}

/** Whether `store` offers {@link EncodedEventPages}. */
export function hasEncodedEventPages<S extends object>(store: S): store is S & EncodedEventPages {
  return typeof (store as Partial<EncodedEventPages>).readEncodedEventPage === 'function';
}

/** Whether `store` offers {@link SurfaceStructureReads}. */
export function hasSurfaceStructureReads<S extends object>(store: S): store is S & SurfaceStructureReads {
  return typeof (store as Partial<SurfaceStructureReads>).readSurfaceStructure === 'function';
}
