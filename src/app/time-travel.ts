/**
 * Time travel (issue #14): the surface and the derived messages exactly as they were right after
 * a given event ("what did the model see at turn 3?", debugging a compaction).
 *
 * Computed from the log, never from caches: a structural replay of the prefix (the store's
 * structural columns of the prefix's surface events, `readSurfaceStructure`, or of every event up
 * to `asOfSeq`, paged, for stores without it; `data` never read) rebuilds the surface with the same
 * engine code a cold open uses; reads.ts then reads only the data of the surviving surface events
 * to derive the model history, with the projection the live reads use. The transcript as of a seq
 * is the live transcript's walk, stopped at that seq.
 */
import { DomainError } from '../domain/errors.js';
import type { StructuralRow } from '../domain/event.js';
import { SessionEngine } from '../domain/session-engine.js';
import { hasSurfaceStructureReads } from './ports/capabilities.js';
import type { SessionRecord, SessionStore } from './store-port.js';

/** Structural rows read per page during the replay. */
const PAGE = 65_536;

/** AS_OF_SEQ_AFTER_HEAD unless `asOfSeq` is a seq of the session's log range. */
export function checkAsOf(rec: SessionRecord, asOfSeq: number): void {
  const head = rec.nextSeq - 1;
  if (rec.eventCount === 0 || asOfSeq > head) {
    throw new DomainError(
      'AS_OF_SEQ_AFTER_HEAD',
      rec.eventCount === 0 ? `as_of_seq ${asOfSeq}: the session has no events yet` : `as_of_seq ${asOfSeq} is after the session head ${head}; pass a seq <= ${head}, or omit it for now`,
      { asOfSeq: String(asOfSeq), headSeq: rec.eventCount === 0 ? '' : String(head) },
    );
  }
}

/** The structural rows with seq <= asOfSeq (paged reads of the prefix only). */
async function prefixRows(store: SessionStore, key: string, asOfSeq: number): Promise<StructuralRow[]> {
  const rows: StructuralRow[] = [];
  let from = 0;
  for (;;) {
    const page = await store.readStructure(key, from, PAGE);
    let done = page.length < PAGE;
    for (const r of page) {
      if (r.seq > asOfSeq) {
        done = true;
        break;
      }
      rows.push(r);
    }
    const last = page[page.length - 1];
    if (done || last === undefined) return rows;
    from = last.seq + 1;
  }
}

/** The engine replayed right after `asOfSeq`, and the last seq <= asOfSeq. */
export async function replayAsOf(store: SessionStore, key: string, rec: SessionRecord, asOfSeq: number): Promise<{ engine: SessionEngine; headSeq: number | undefined }> {
  checkAsOf(rec, asOfSeq);
  if (hasSurfaceStructureReads(store)) {
    // Only the surface rows of the prefix: the other rows never move the surface (measured on a
    // 1M-event agent log: ~10% of the rows, and no citation lists decoded).
    const { rows, headSeq } = await store.readSurfaceStructure(key, asOfSeq);
    const engine = SessionEngine.create();
    engine.loadStructural(rows);
    return { engine, headSeq };
  }
  const rows = await prefixRows(store, key, asOfSeq);
  const engine = SessionEngine.create();
  engine.loadStructural(rows);
  return { engine, headSeq: rows.length > 0 ? (rows[rows.length - 1] as StructuralRow).seq : undefined };
}
