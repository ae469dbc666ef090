/**
 * Store port, optional capabilities: reads a store may offer and the app probes for at run time
 * (with the type guards below), falling back to the event log when a store has none.
 */
import type { StructuralRow } from '../../domain/event.js';
import type { StructuralColumns } from '../../domain/structural-columns.js';

export type { StructuralColumns };
import type { ReadEventsQuery } from './event-log.js';

/** What `readSurfaceStructure` returns: a prefix's surface rows and the prefix's last seq. */
export interface SurfaceStructure {
  readonly rows: StructuralRow[];
  readonly headSeq: number | undefined;
}

/**
 * A page of events already in a wire form: opaque bytes to the app, in the format (and cut by the
 * size rule) of version `eventPageFormat` of the store that wrote it. The server owns that format
 * (src/server/wire/event-page.ts) and asks for pages only in the version it writes itself.
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
   * The version of the page format this store writes (the server's EVENT_PAGE_FORMAT when it
   * matches), fixed when the store opens; undefined when it writes none.
   */
  readonly eventPageFormat: number | undefined;
  /**
   * A page of events in the wire form of version `eventPageFormat` (the SQLite store with its
   * extension), rows checked as readEventTexts checks them: a deliberate shortcut for the server's
   * ListEvents in the json data form. `query.limit` is the page size; the page also ends before an
   * event that would take the sum of the format's size estimates past `budgetBytes`, keeping at
   * least one. Undefined when this page cannot be encoded here: the caller reads it with
   * readEventTexts.
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

/**
 * What `readTokenFigures` returns (issue #37): the token figures of a log's events
 * (domain/event-tokens.ts) from a seq, in three aligned arrays, seqs ascending. Events without
 * figures (no message, no usage) are left out.
 */
export interface TokenFigureRows {
  readonly seqs: number[];
  /** Per seq: the event's estimate, or -1 when the store does not know it (then its usage is unknown too: read the event). */
  readonly tokens: number[];
  /** Per seq: the event's usage text (event-tokens.ts encodeUsage), '' for none. */
  readonly usage: string[];
}

/** Capability: the token figures kept with the event rows (GetSession's counts without reading event data). */
export interface TokenFigureReads {
  /** The figures of session `sessionId`'s events with seq >= fromSeq (see TokenFigureRows). */
  readTokenFigures(sessionId: string, fromSeq: number): Promise<TokenFigureRows>;
}

/** Whether `store` offers {@link TokenFigureReads}. */
export function hasTokenFigureReads<T extends object>(store: T): store is T & TokenFigureReads {
  return typeof (store as Partial<TokenFigureReads>).readTokenFigures === 'function';
}

/** Capability (issue #37, the cold open): a whole log's structure in columns. */
export interface StructureColumnReads {
  /**
   * What `readStructure(sessionId, 0)` returns, in columns (domain/structural-columns.ts) and
   * checked the same way (every row's structural checksum, the whole log against the session's
   * digest): the cold open's load without an object per event.
   */
  readStructureColumns(sessionId: string): Promise<StructuralColumns>;
}
