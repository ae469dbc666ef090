/**
 * Time travel (issue #14): the surface and the derived messages exactly as they were right after
 * a given event ("what did the model see at turn 3?", debugging a compaction).
 *
 * Computed from the log, never from caches: a structural replay of the prefix (the store's
 * structural columns of the prefix's surface events, `readSurfaceStructure`, or of every event up
 * to `asOfSeq`, paged, for stores without it; `data` never read) rebuilds the surface with the same
 * engine code a cold open uses, then only the data of the surviving surface events is read
 * (`getEvents`) to derive the model history. The transcript as of a seq is the append-origin
 * surface events up to it (log order, surface types only).
 */
import { DomainError } from '../domain/errors.js';
import type { SessionEvent, StructuralRow } from '../domain/event.js';
import { SURFACE_TYPES } from '../domain/event.js';
import { SessionEngine } from '../domain/session-engine.js';
import { messageOf } from '../domain/message-view.js';
import { projectMessage } from '../domain/derive.js';
import type { SessionRecord, SessionStore } from './store-port.js';

/** Structural rows read per page during the replay. */
const PAGE = 65_536;

function checkAsOf(rec: SessionRecord, asOfSeq: number): void {
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

/** The replayed engine right after `asOfSeq`. */
async function replay(store: SessionStore, key: string, rec: SessionRecord, asOfSeq: number): Promise<{ engine: SessionEngine; headSeq: number | undefined }> {
  checkAsOf(rec, asOfSeq);
  if (store.readSurfaceStructure !== undefined) {
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

/** GetSurface as of a seq. */
export async function surfaceAsOf(store: SessionStore, key: string, rec: SessionRecord, asOfSeq: number): Promise<{ seqs: number[]; replaceGeneration: number; headSeq: number | undefined }> {
  const { engine, headSeq } = await replay(store, key, rec, asOfSeq);
  return { seqs: engine.surface(), replaceGeneration: engine.replaceGeneration, headSeq };
}

/** GetMessages as of a seq (model history or transcript; `afterSeq`/`limit` page the transcript). */
export async function messagesAsOf(
  store: SessionStore,
  key: string,
  sessionId: string,
  rec: SessionRecord,
  view: 'model' | 'transcript',
  asOfSeq: number,
  page: { afterSeq?: number; limit?: number } = {},
): Promise<{ messages: { seq: number; message: SessionEvent['data'] }[]; headSeq: number | undefined; replaceGeneration: number }> {
  if (view === 'transcript') {
    checkAsOf(rec, asOfSeq);
    const limit = page.limit ?? Number.MAX_SAFE_INTEGER;
    const messages: { seq: number; message: SessionEvent['data'] }[] = [];
    let from = (page.afterSeq ?? -1) + 1;
    const types = [...SURFACE_TYPES];
    outer: for (;;) {
      const batch = await store.readEvents(key, { fromSeq: from, direction: 'forward', limit: 2000, types });
      for (const e of batch) {
        if (e.seq > asOfSeq) break outer;
        if (e.surfaceOp !== 'append') continue;
        const m = messageOf(e, sessionId);
        if (m) messages.push({ seq: e.seq, message: m });
        if (messages.length >= limit) break outer;
      }
      const last = batch[batch.length - 1];
      if (batch.length < 2000 || last === undefined) break;
      from = last.seq + 1;
    }
    const head = await store.readEvents(key, { fromSeq: asOfSeq, direction: 'backward', limit: 1 });
    return { messages, headSeq: head[0]?.seq, replaceGeneration: 0 };
  }
  const { engine, headSeq } = await replay(store, key, rec, asOfSeq);
  const seqs = engine.surface();
  const events = await store.getEvents(key, seqs);
  const bySeq = new Map(events.map((e) => [e.seq, e] as const));
  const resolve = (seq: number): string | undefined => {
    const t = bySeq.get(seq);
    const id = t === undefined ? undefined : messageOf(t, sessionId, resolve)?.['id'];
    return typeof id === 'string' ? id : undefined;
  };
  const messages: { seq: number; message: SessionEvent['data'] }[] = [];
  for (const s of seqs) {
    const e = bySeq.get(s);
    if (e === undefined) throw new Error(`time travel: surface event ${s} is missing from the store`);
    const m = projectMessage(e, sessionId, resolve);
    if (m !== undefined) messages.push({ seq: s, message: m });
  }
  return { messages, headSeq, replaceGeneration: engine.replaceGeneration };
}
