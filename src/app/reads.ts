/**
 * The read use cases: session views, lists, event pages, the surface, and messages (model
 * history from the hot session's projection; the transcript from the store in log order), with
 * GetMessages pagination (see message-pages.ts). Hot state is read only through the session cache,
 * which checks the stored head first: a read never answers from a stale cache.
 */
import { DataCorruptedError } from './storage-error.js';
import type { SessionEvent } from '../domain/event.js';
import { MESSAGE_EVENT_TYPES } from '../domain/event.js';
import { MessageProjection } from '../domain/derive.js';
import { replacementChainSeqs } from '../domain/replace-chains.js';
import { messageOf, type MessageJson } from '../domain/message-view.js';
import {
  READ_ATTEMPTS, STORE_READ_BATCH, checkPageSizeLimit, pageSizeOf, retriesExhausted, viewOf,
  type AppLimits, type CallContext, type DerivedMessage, type SessionView,
} from './app-types.js';
import { decodeMessagesToken, encodeMessagesToken, staleMessagesToken } from './message-pages.js';
import type { SessionCache } from './session-cache.js';
import { hasEncodedEventPages } from './ports/capabilities.js';
import type { EncodedEventPage, ReadEventsQuery, SessionRecord, SessionStore, StoredEventText } from './store-port.js';
import { fromStored, storageKey } from './tenant-scope.js';
import { checkAsOf, replayAsOf } from './time-travel.js';
import { pageProblem, type RunSeen } from './run-check.js';

/** Which messages GetMessages returns. */
export type MessagesView = 'model' | 'transcript';

/** The model history with the surface it comes from (Reads.modelSnapshot). */
export interface ModelSnapshot {
  readonly messages: DerivedMessage[];
  readonly headSeq: number | undefined;
  readonly replaceGeneration: number;
  /** The surface in order, when asked (then `messages` is empty and `nodeMessages` holds them). */
  readonly surface?: number[];
  /** With `surface`: the message of each surface node (undefined where it contributes none). */
  readonly nodeMessages?: (MessageJson | undefined)[];
  /** The type of each surface node, when asked. */
  readonly types?: string[];
  readonly record: SessionRecord;
  readonly surfaceLength: number;
  /** With `recent`: per query, the seqs of the newest events of its types (at most its limit), newest first. */
  readonly recent?: number[][];
}

/** What modelSnapshot adds to the model history. */
export interface SnapshotOptions {
  readonly surface?: boolean;
  readonly types?: boolean;
  readonly recent?: readonly { readonly types: readonly string[]; readonly limit: number }[];
}

/**
 * What a message projection of the surface `seqs` is hydrated from: the surface events in surface
 * order (getEvents returns ascending seqs; a replace puts a later seq before earlier ones) and a
 * lookup of them plus the events of `chain` (replacementChainSeqs: the events that pruned tool
 * results replaced, legacy prunes take their message id). A seq missing from the store is left out.
 */
export async function projectionInput(store: Pick<SessionStore, 'getEvents'>, key: string, seqs: readonly number[], chain: readonly number[]): Promise<{ events: SessionEvent[]; lookup: (seq: number) => SessionEvent | undefined }> {
  const events = await store.getEvents(key, chain.length === 0 ? seqs : [...new Set([...seqs, ...chain])].sort((a, b) => a - b));
  const byS = new Map(events.map((e) => [e.seq, e] as const));
  return { events: seqs.map((s) => byS.get(s)).filter((e): e is SessionEvent => e !== undefined), lookup: (s) => byS.get(s) };
}

/** The store's reads with blobbed values as their references (issue #39; a store without blobs stores none). */
export function storedReads(store: SessionStore): Pick<SessionStore, 'getEvents' | 'readEvents'> {
  return {
    getEvents: (k, seqs) => (store.getStoredEvents !== undefined ? store.getStoredEvents(k, seqs) : store.getEvents(k, seqs)),
    readEvents: (k, q) => (store.readStoredEvents !== undefined ? store.readStoredEvents(k, q) : store.readEvents(k, q)),
  };
}

/** What ListEvents asks for. */
export interface ListEventsQuery {
  readonly fromSeq?: number;
  readonly direction: 'forward' | 'backward';
  readonly pageSize?: number;
  readonly types?: readonly string[];
  /** The page as EncodedEventPage when the store can encode it, cut at this byte estimate (see SessionStore.readEncodedEventPage). */
  readonly encodedBudgetBytes?: number;
  /** Blobbed values as their references (issue #39, ListEventsRequest.blob_refs), not their bytes. */
  readonly blobRefs?: boolean;
  /** The page format the caller reads (src/server/wire/event-page.ts): a store's pages of another version are not used. */
  readonly encodedFormat?: number;
}

/** A page of events: their stored texts, or (`encoded`, then `events` is empty) the encoded page. */
export interface EventsPage {
  readonly events: StoredEventText[];
  readonly nextSeq: number | undefined;
  readonly encoded?: EncodedEventPage;
}

/** One page of GetMessages. */
export interface MessagesPage {
  readonly messages: DerivedMessage[];
  readonly headSeq: number | undefined;
  /** '' on the last page. */
  readonly nextPageToken: string;
}

/** Read use cases over the cache and the store. */
export class Reads {
  constructor(
    private readonly store: SessionStore,
    private readonly cache: SessionCache,
    private readonly limits: AppLimits,
  ) {}

  /** A session with live counts. */
  getSession(ctx: CallContext, id: string): Promise<SessionView> {
    return this.cache.withRead(ctx, id, viewOf);
  }

  /** Sessions newest first. */
  async listSessions(ctx: CallContext, q: { pageSize?: number; pageToken?: string; labels?: Record<string, string> }): Promise<{ sessions: SessionView[]; nextPageToken: string }> {
    const pageSize = pageSizeOf(this.limits, q.pageSize);
    const page = await this.store.listSessions({ tenant: ctx.tenant, labels: q.labels, pageSize, pageToken: q.pageToken || undefined });
    const sessions: SessionView[] = [];
    for (const stored of page.sessions) {
      const h = this.cache.peek(stored.header.id);
      const r = fromStored(stored);
      sessions.push(h && h.valid && !h.busy && h.engine.nextSeq === r.nextSeq && h.writer === r.writer
        ? viewOf(h)
        : { record: r, surfaceLength: -1, headSeq: r.eventCount > 0 ? r.nextSeq - 1 : undefined, eventCount: r.eventCount });
    }
    // Surface lengths of sessions that are not hot: load them (bounded by the page size).
    for (let i = 0; i < sessions.length; i++) {
      const s = sessions[i]!;
      if (s.surfaceLength >= 0) continue;
      try {
        sessions[i] = await this.getSession(ctx, s.record.header.id);
      } catch (e) {
        // A damaged session stays listed from its stored record (surface length 0) so it can be
        // found and deleted; reading it answers DATA_LOSS.
        if (!(e instanceof DataCorruptedError)) throw e;
        sessions[i] = { ...s, surfaceLength: 0, damaged: true };
      }
    }
    return { sessions, nextPageToken: page.nextPageToken };
  }

  /**
   * A page of events, data as the stored JSON text; with `encodedBudgetBytes`, already encoded
   * when the store can (EncodedEventPage, cut at that byte estimate), else as texts.
   */
  async listEvents(ctx: CallContext, id: string, q: ListEventsQuery): Promise<EventsPage> {
    const rec = await this.cache.record(ctx, id);
    const limit = pageSizeOf(this.limits, q.pageSize);
    const fromSeq = q.fromSeq ?? (q.direction === 'forward' ? 0 : Math.max(rec.nextSeq - 1, 0));
    const types = q.types && q.types.length > 0 ? q.types : undefined;
    const key = storageKey(ctx.tenant, id);
    // An untyped page is checked against the record (run-check.ts): no seq may be missing from it.
    const check = async (seen: RunSeen): Promise<void> => {
      if (types !== undefined) return;
      const problem = pageProblem(rec, fromSeq, q.direction, seen);
      if (problem !== undefined) await this.cache.corrupted(key, id, rec, problem);
    };
    if (q.encodedBudgetBytes !== undefined && hasEncodedEventPages(this.store) && this.store.eventPageFormat === q.encodedFormat && q.blobRefs !== true) {
      const encoded = await this.store.readEncodedEventPage(key, { fromSeq, direction: q.direction, limit, types }, q.encodedBudgetBytes);
      // A page with a seq missing is read again as rows below, which name the missing seq.
      const seen = { first: encoded?.firstSeq, last: encoded?.lastSeq, count: encoded?.count ?? 0, next: encoded?.nextSeq };
      if (encoded !== undefined && (types !== undefined || pageProblem(rec, fromSeq, q.direction, seen) === undefined)) {
        return { events: [], nextSeq: encoded.nextSeq, encoded };
      }
    }
    const query: ReadEventsQuery = { fromSeq, direction: q.direction, limit: limit + 1, types };
    // Data as the stored JSON text: the server puts it on the wire as is (no parse + stringify).
    const events = q.blobRefs === true && this.store.readStoredEventTexts !== undefined
      ? await this.store.readStoredEventTexts(key, query)
      : await this.store.readEventTexts(key, query);
    let next: number | undefined;
    if (events.length > limit) {
      const extra = events.pop() as StoredEventText;
      next = extra.seq;
    }
    await check({ first: events[0]?.seq, last: events[events.length - 1]?.seq, count: events.length, next, events });
    return { events, nextSeq: next };
  }

  /** The surface (now, or right after `asOfSeq`: time-travel.ts). */
  async getSurface(ctx: CallContext, id: string, asOfSeq?: number): Promise<{ seqs: number[]; replaceGeneration: number; headSeq: number | undefined }> {
    if (asOfSeq !== undefined) {
      const { engine, headSeq } = await replayAsOf(this.store, storageKey(ctx.tenant, id), await this.cache.record(ctx, id), asOfSeq);
      return { seqs: engine.surface(), replaceGeneration: engine.replaceGeneration, headSeq };
    }
    return this.cache.withRead(ctx, id, (h) => ({
      seqs: h.engine.surface(),
      replaceGeneration: h.engine.replaceGeneration,
      headSeq: h.engine.eventCount > 0 ? h.engine.nextSeq - 1 : undefined,
    }));
  }

  /**
   * Model history (surface walk) or transcript (append-origin surface events in log order), now
   * or as of a seq (right after `asOfSeq`; computed from the log, see time-travel.ts).
   */
  async getMessages(ctx: CallContext, id: string, view: MessagesView, page: { afterSeq?: number; limit?: number; asOfSeq?: number; blobRefs?: boolean } = {}): Promise<{ messages: DerivedMessage[]; headSeq: number | undefined; replaceGeneration: number }> {
    if (page.asOfSeq !== undefined) return this.#messagesAsOf(ctx, id, view, page.asOfSeq, page);
    if (view === 'transcript') return { ...(await this.#transcript(ctx, id, page.afterSeq ?? -1, page.limit ?? Number.MAX_SAFE_INTEGER, undefined, page.blobRefs)), replaceGeneration: 0 };
    if (page.blobRefs === true) return this.#modelHistoryRefs(ctx, id);
    const snap = await this.modelSnapshot(ctx, id);
    return { messages: snap.messages, headSeq: snap.headSeq, replaceGeneration: snap.replaceGeneration };
  }

  /**
   * The model history with the surface it was derived from (and the surface nodes' types when
   * asked), all from one committed state: what compaction planning and pruning work on.
   */
  async modelSnapshot(ctx: CallContext, id: string, opts: SnapshotOptions = {}): Promise<ModelSnapshot> {
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const h = await this.cache.handle(ctx, id);
      if (!h.projection) {
        const hydrate = async (): Promise<void> => {
          const seqs = await h.read(() => h.engine.surface());
          const input = await projectionInput(this.store, h.id, seqs, await h.read(() => replacementChainSeqs(h.engine, seqs)));
          await h.read(() => {
            if (!h.valid || h.projection) return;
            // The surface may have moved while we read: hydrate only if it did not.
            const now = h.engine.surface();
            if (now.length === seqs.length && now.every((s, i) => s === seqs[i])) {
              const p = new MessageProjection(id);
              p.hydrate(input.events, h.engine.nextSeq, input.lookup);
              h.projection = p;
            }
          });
        };
        // Optimistic first; if a write moved the surface during the store read, again with the
        // session's new writes held for that one read. Under steady same-session appends the
        // surface moves during nearly every read (GetSession hydrates for its token counts), so
        // retrying optimistically ran out of attempts (server-concurrency's churn test).
        await (attempt === 0 ? hydrate() : h.readHeld(hydrate));
        if (!h.projection) continue;
      }
      const out = await h.read((): ModelSnapshot | undefined => {
        if (!h.valid || !h.projection) return undefined;
        const surface = opts.surface === true || opts.types === true ? h.projection.surface() : undefined;
        return {
          messages: opts.surface === true ? [] : h.projection.entries(),
          nodeMessages: opts.surface === true ? h.projection.nodeMessages() : undefined,
          headSeq: h.engine.eventCount > 0 ? h.engine.nextSeq - 1 : undefined,
          replaceGeneration: h.engine.replaceGeneration,
          surface,
          types: opts.types === true && surface !== undefined ? surface.map((s) => h.engine.typeOf(s) ?? '') : undefined,
          record: h.record,
          surfaceLength: h.engine.surfaceLength,
          recent: opts.recent?.map((q) => h.engine.lastSeqsOfTypes(q.types, q.limit)),
        };
      });
      if (out) return out;
    }
    throw retriesExhausted(id);
  }

  /**
   * The model history with blobbed values as their references (GetMessages blob_refs, issue #39):
   * hydrated from the stored events of the current surface, never cached (the cached projection
   * carries the bytes). Surface, replacement chains and head come from one read of the handle;
   * the events they name are immutable, so the result is one committed state.
   */
  async #modelHistoryRefs(ctx: CallContext, id: string): Promise<{ messages: DerivedMessage[]; headSeq: number | undefined; replaceGeneration: number }> {
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const h = await this.cache.handle(ctx, id);
      const state = await h.read(() => {
        if (!h.valid) return undefined;
        const seqs = h.engine.surface();
        return {
          seqs, chain: replacementChainSeqs(h.engine, seqs), nextSeq: h.engine.nextSeq,
          headSeq: h.engine.eventCount > 0 ? h.engine.nextSeq - 1 : undefined, replaceGeneration: h.engine.replaceGeneration,
        };
      });
      if (state === undefined) continue;
      const input = await projectionInput(storedReads(this.store), h.id, state.seqs, state.chain);
      // A surface event the read did not find: the session was deleted (or re-created) meanwhile;
      // the next attempt answers from the handle as it is then (SESSION_NOT_FOUND when gone).
      if (input.events.length !== state.seqs.length || !h.valid) continue;
      const p = new MessageProjection(id);
      p.hydrate(input.events, state.nextSeq, input.lookup);
      return { messages: p.entries(), headSeq: state.headSeq, replaceGeneration: state.replaceGeneration };
    }
    throw retriesExhausted(id);
  }

  /** GetMessages as of a seq: the model history of the replayed prefix, or the transcript up to it. */
  async #messagesAsOf(ctx: CallContext, id: string, view: MessagesView, asOfSeq: number, page: { afterSeq?: number; limit?: number; blobRefs?: boolean }): Promise<{ messages: DerivedMessage[]; headSeq: number | undefined; replaceGeneration: number }> {
    const rec = await this.cache.record(ctx, id);
    const key = storageKey(ctx.tenant, id);
    if (view === 'transcript') {
      checkAsOf(rec, asOfSeq);
      const { messages } = await this.#transcript(ctx, id, page.afterSeq ?? -1, page.limit ?? Number.MAX_SAFE_INTEGER, asOfSeq, page.blobRefs);
      const head = await this.store.readEvents(key, { fromSeq: asOfSeq, direction: 'backward', limit: 1 });
      return { messages, headSeq: head[0]?.seq, replaceGeneration: 0 };
    }
    const { engine, headSeq } = await replayAsOf(this.store, key, rec, asOfSeq);
    const seqs = engine.surface();
    const input = await projectionInput(page.blobRefs === true ? storedReads(this.store) : this.store, key, seqs, replacementChainSeqs(engine, seqs));
    if (input.events.length !== seqs.length) throw new Error(`time travel: a surface event of ${id} as of ${asOfSeq} is missing from the store`);
    const p = new MessageProjection(id);
    p.hydrate(input.events, engine.nextSeq, input.lookup);
    return { messages: p.entries(), headSeq, replaceGeneration: engine.replaceGeneration };
  }

  /**
   * One page of GetMessages. Transcript pages are cut by seq (appends never move earlier
   * entries); model-history pages by position, valid while no replace rewrote the surface (the
   * token carries the replace generation; PAGE_TOKEN_STALE after a replace). pageSize 0 = all.
   *
   * @throws DomainError PAGE_SIZE_TOO_LARGE, INVALID_PAGE_TOKEN, PAGE_TOKEN_STALE, SESSION_NOT_FOUND
   */
  async getMessagesPage(ctx: CallContext, id: string, view: MessagesView, pageSize: number, pageToken: string, asOfSeq?: number, blobRefs?: boolean): Promise<MessagesPage> {
    checkPageSizeLimit(this.limits, pageSize);
    const transcript = view === 'transcript';
    const token = pageToken ? decodeMessagesToken(pageToken, transcript) : undefined;
    if (transcript) {
      const out = await this.getMessages(ctx, id, 'transcript', { afterSeq: token?.s, limit: pageSize > 0 ? pageSize + 1 : undefined, asOfSeq, blobRefs });
      if (pageSize > 0 && out.messages.length > pageSize) {
        const messages = out.messages.slice(0, pageSize);
        return { messages, headSeq: out.headSeq, nextPageToken: encodeMessagesToken({ v: 't', s: messages[messages.length - 1]!.seq }) };
      }
      return { messages: out.messages, headSeq: out.headSeq, nextPageToken: '' };
    }
    const out = await this.getMessages(ctx, id, 'model', { asOfSeq, blobRefs });
    if (token !== undefined && token.g !== out.replaceGeneration) throw staleMessagesToken(token.g as number, out.replaceGeneration);
    const from = token?.o ?? 0;
    const messages = pageSize > 0 || from > 0 ? out.messages.slice(from, pageSize > 0 ? from + pageSize : undefined) : out.messages;
    const next = pageSize > 0 && from + pageSize < out.messages.length ? encodeMessagesToken({ v: 'm', o: from + pageSize, g: out.replaceGeneration }) : '';
    return { messages, headSeq: out.headSeq, nextPageToken: next };
  }

  /** Reads the log from `fromSeq` to the end in ascending batches, checked (SessionCache.scan). */
  async *scan(ctx: CallContext, id: string, fromSeq = 0): AsyncGenerator<SessionEvent[]> {
    const rec = await this.cache.record(ctx, id);
    yield* this.cache.scan(storageKey(ctx.tenant, id), id, rec, fromSeq);
  }

  /**
   * Transcript messages after `afterSeq` (up to `toSeq` when given) in log order, at most `limit`
   * (log order makes seqs stable cursors).
   */
  async #transcript(ctx: CallContext, id: string, afterSeq: number, limit: number, toSeq = Number.MAX_SAFE_INTEGER, blobRefs = false): Promise<{ messages: DerivedMessage[]; headSeq: number | undefined }> {
    const rec = await this.cache.record(ctx, id);
    const store = blobRefs ? storedReads(this.store) : this.store;
    const messages: DerivedMessage[] = [];
    let from = afterSeq + 1;
    const types = [...MESSAGE_EVENT_TYPES];
    let done = false;
    while (!done) {
      const page = await store.readEvents(storageKey(ctx.tenant, id), { fromSeq: from, direction: 'forward', limit: STORE_READ_BATCH, types });
      for (const e of page) {
        if (e.seq > toSeq) {
          done = true;
          break;
        }
        if (e.surfaceOp !== 'append') continue;
        const m = messageOf(e, id);
        if (m) messages.push({ seq: e.seq, message: m });
        if (messages.length >= limit) break;
      }
      if (page.length < STORE_READ_BATCH || messages.length >= limit) break;
      from = (page[page.length - 1] as SessionEvent).seq + 1;
    }
    return { messages, headSeq: rec.eventCount > 0 ? rec.nextSeq - 1 : undefined };
  }
}
