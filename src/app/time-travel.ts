/**
 * Time travel (`as_of_seq` on GetSurface and GetMessages): the session as it was right after
 * event `asOfSeq`, by a plain replay of the log prefix.
 *
 * The surface is rebuilt by a fresh engine from the structural rows up to `asOfSeq`
 * (store.readStructure: no event data is read), paged so that a long log is never held twice;
 * the model history then reads the data of the surviving surface events only
 * (store.getEvents) and projects them exactly as the live read does (MessageProjection), so
 * "now" and "as of the head" give the same messages. The log is append-only: a prefix never
 * changes, so the replay needs no lock against concurrent appends.
 */
import { DomainError } from '../domain/errors.js';
import type { SessionEvent, StructuralRow } from '../domain/event.js';
import { MessageProjection } from '../domain/derive.js';
import { SessionEngine } from '../domain/session-engine.js';
import type { CallContext, DerivedMessage } from './app-types.js';
import type { SessionStore } from './store-port.js';

/** What a replay reads: the store, the tenant's storage key, the session's head (the facade or Reads). */
export interface TimeTravelDeps {
  readonly store: SessionStore;
  storageKey(ctx: CallContext, id: string): string;
  getSession(ctx: CallContext, id: string): Promise<{ readonly headSeq: number | undefined }>;
}

/** Structural rows read per store call during a replay. */
const STRUCTURE_PAGE = 10_000;

/** The surface replayed to `asOfSeq`. */
export interface SurfaceAsOf {
  readonly seqs: number[];
  readonly replaceGeneration: number;
  /** The last event at or before `asOfSeq` (the head of the session as it was then). */
  readonly headSeq: number | undefined;
  /** Replay engine (for the message read). */
  readonly engine: SessionEngine;
}

/**
 * Rebuilds the surface right after `asOfSeq`.
 *
 * @throws DomainError SESSION_NOT_FOUND; AS_OF_SEQ_AFTER_HEAD when `asOfSeq` is past the head
 */
export async function surfaceAsOf(app: TimeTravelDeps, ctx: CallContext, id: string, asOfSeq: number): Promise<SurfaceAsOf> {
  await assertAsOfInRange(app, ctx, id, asOfSeq);
  const key = app.storageKey(ctx, id);
  const rows: StructuralRow[] = [];
  for (let from = 0; ;) {
    const page = await app.store.readStructure(key, from, STRUCTURE_PAGE);
    let past = false;
    for (const r of page) {
      if (r.seq > asOfSeq) {
        past = true;
        break;
      }
      rows.push(r);
    }
    if (past || page.length < STRUCTURE_PAGE) break;
    from = (page[page.length - 1] as StructuralRow).seq + 1;
  }
  // Structural replay only reads the surface; strict-mode invariants are not re-checked here.
  const engine = SessionEngine.create();
  engine.loadStructural(rows);
  return {
    seqs: engine.surface(),
    replaceGeneration: engine.replaceGeneration,
    headSeq: rows.length > 0 ? (rows[rows.length - 1] as StructuralRow).seq : undefined,
    engine,
  };
}

/** The model history right after `asOfSeq` (same errors as surfaceAsOf). */
export async function modelHistoryAsOf(app: TimeTravelDeps, ctx: CallContext, id: string, asOfSeq: number): Promise<{ messages: DerivedMessage[]; headSeq: number | undefined; replaceGeneration: number }> {
  const s = await surfaceAsOf(app, ctx, id, asOfSeq);
  const events = await app.store.getEvents(app.storageKey(ctx, id), s.seqs);
  const bySeq = new Map(events.map((e) => [e.seq, e] as const));
  const inSurfaceOrder = s.seqs.map((q) => bySeq.get(q)).filter((e): e is SessionEvent => e !== undefined);
  const projection = new MessageProjection(id);
  projection.hydrate(inSurfaceOrder, s.engine.nextSeq, (q) => bySeq.get(q));
  return { messages: projection.entries(), headSeq: s.headSeq, replaceGeneration: s.replaceGeneration };
}

/**
 * Checks that `asOfSeq` is at or before the head of session `id`.
 *
 * @throws DomainError SESSION_NOT_FOUND; AS_OF_SEQ_AFTER_HEAD (metadata `asOfSeq`, `headSeq`)
 */
export async function assertAsOfInRange(app: TimeTravelDeps, ctx: CallContext, id: string, asOfSeq: number): Promise<void> {
  const view = await app.getSession(ctx, id);
  if (view.headSeq === undefined || asOfSeq > view.headSeq) {
    throw new DomainError('AS_OF_SEQ_AFTER_HEAD',
      `as_of_seq ${asOfSeq} is after the session's head (${view.headSeq ?? 'empty log'}); pass a seq up to the head, or leave it unset for now`,
      { asOfSeq: String(asOfSeq), headSeq: view.headSeq === undefined ? '' : String(view.headSeq) });
  }
}
