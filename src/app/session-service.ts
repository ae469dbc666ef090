/**
 * The application service: a thin facade over the use cases of Palimpsest (knows nothing of
 * gRPC; throws DomainError with stable reasons). Each use case lives in its own file:
 *
 *   session-cache.ts   hot sessions (engine + pipeline), checked against the stored head
 *   write-pipeline.ts  plan + conditional append (head and writer token) + publish
 *   append.ts          AppendEvents (idempotency, retries) and RepairSession
 *   reads.ts           sessions, events, surface, messages (with GetMessages pagination), now
 *                      or as of a seq (time-travel.ts)
 *   pairing-guard.ts   the tool-pairing guard's per-session index (checked in the write pipeline)
 *   transfer.ts        fork, import, export
 *   quotas.ts          tenant quotas, enforced in the store's write transaction
 *
 * Concurrency model: the store is the single source of truth and may have other writers (server
 * processes). Hot sessions are cached with their engine; an append is planned against the cached
 * engine and written with a condition on the head and writer token it was planned against. A
 * refused condition (another writer) drops the cached engine; the request is re-planned on a
 * fresh load (bounded retries). Subscribers follow the change feed: batches this process
 * committed, plus (StoreChangeFeed) heads of commits made anywhere else.
 */
import { randomUUID } from 'node:crypto';
import type { CandidateEvent, SessionEvent } from '../domain/event.js';
import { AppendUseCase } from './append.js';
import {
  DEFAULT_LIMITS, buildHeader, checkId, notFound,
  type AppendOptions, type AppendResult, type AppLimits, type AppLogger, type CallContext, type DerivedMessage, type SessionView,
} from './app-types.js';
import type { ChangeFeed } from './change-feed.js';
import { LocalChangeFeed } from './local-change-feed.js';
import { createWithQuota } from './quotas.js';
import { importMessages, type ImportMessagesQuery } from './import-messages.js';
import { renderedMessagesPage, type RenderedPage, type RenderedQuery } from './rendered-messages.js';
import { Reads, type EventsPage, type ListEventsQuery, type MessagesPage, type MessagesView, type ModelSnapshot, type SnapshotOptions } from './reads.js';
import { SessionCache } from './session-cache.js';
import type { DeleteExpectation, SessionStore } from './store-port.js';
import { storageKey, toStored } from './tenant-scope.js';
import { Transfer } from './transfer.js';
import { WritePipeline } from './write-pipeline.js';

export {
  ANONYMOUS, DEFAULT_LIMITS,
  type AppendOptions, type AppendResult, type AppLimits, type AppLogger, type CallContext, type DerivedMessage, type SessionView,
} from './app-types.js';
export type { EventsPage, ListEventsQuery, ModelSnapshot, SnapshotOptions } from './reads.js';
import { checkLabels } from './input-limits.js';
import { SessionFeed, type SessionFeedOptions } from './session-feed.js';
import { updateSession, type UpdateSessionRequest } from './update-session.js';
import { DataCorruptedError } from './storage-error.js';
import { readBlobChunks, type BlobChunk } from './blob-refs.js';
import { SearchService } from './search-service.js';
import { ScanSearchIndex } from './scan-search-index.js';

/** The application service. */
export class SessionService {
  /** Owner of this service's pending imports (see NewSession.pending). */
  readonly instanceId = randomUUID();
  /** Hot sessions (new use cases read hot state through `cache.withRead`). */
  readonly cache: SessionCache;
  readonly #appends: AppendUseCase;
  readonly #reads: Reads;
  readonly #transfer: Transfer;
  /** The session feed (issue #35): changes of every session, read from the store by position. */
  readonly sessionFeed: SessionFeed;
  /** SearchEvents (issue #40): a scan of the store until the composition root gives it the store's index. */
  readonly search: SearchService;
  #closed = false;

  constructor(
    readonly store: SessionStore,
    readonly limits: AppLimits = DEFAULT_LIMITS,
    private readonly clock: () => number = Date.now,
    private readonly log?: AppLogger,
    private readonly newId: () => string = randomUUID,
    /** What subscriptions follow: local batches only, or also the store's heads (StoreChangeFeed). */
    readonly feed: ChangeFeed = new LocalChangeFeed(),
    feedOptions: SessionFeedOptions = {},
  ) {
    this.sessionFeed = new SessionFeed(store, { onError: (e) => this.log?.error({ err: e }, 'reading the session feed failed (retried)'), ...feedOptions });
    this.feed.onCommitted = () => this.sessionFeed.poke();
    this.feed.onListenerError = (e) => this.log?.error({ err: e }, 'a subscriber failed on a committed batch and was removed');
    this.cache = new SessionCache(store, limits, feed);
    const pipeline = new WritePipeline(store, this.cache, feed, limits, clock, log);
    this.#appends = new AppendUseCase(store, this.cache, pipeline, limits);
    this.#reads = new Reads(store, this.cache, limits);
    this.search = new SearchService(new ScanSearchIndex(store), this.cache, limits);
    this.#transfer = new Transfer(store, this.cache, this.#reads, limits, clock, newId, this.instanceId);
  }

  /**
   * The key a session is stored, cached and published under. Session ids are per tenant: two
   * tenants may both have a session "main", and nothing one tenant does can reveal another's ids.
   */
  storageKey(ctx: CallContext, id: string): string {
    return storageKey(ctx.tenant, id);
  }

  // ---- sessions --------------------------------------------------------------------------

  /** Creates an empty session (the tool-pairing guard on unless `pairingGuard: false`). */
  async createSession(ctx: CallContext, req: {
    id?: string; labels?: Record<string, string>; cwd?: string; origin?: string;
    delegationDepth?: number; agentPreset?: string; strict?: boolean; pairingGuard?: boolean;
  }): Promise<SessionView> {
    const id = req.id || this.newId();
    checkId(id);
    checkLabels(req.labels);
    const header = buildHeader({ id, createdAt: this.clock(), cwd: req.cwd, origin: req.origin, delegationDepth: req.delegationDepth, agentPreset: req.agentPreset });
    await createWithQuota(this.store, this.limits, ctx, id, {
      header: toStored(ctx.tenant, header), labels: req.labels ?? {}, tenant: ctx.tenant, strict: req.strict ?? false, pairingGuard: req.pairingGuard ?? true, writer: randomUUID(),
    }, []);
    this.sessionFeed.poke();
    return this.getSession(ctx, id);
  }

  /** A session with live counts. */
  getSession(ctx: CallContext, id: string): Promise<SessionView> {
    return this.#guard(this.#reads.getSession(ctx, id));
  }

  /** Sessions newest first. */
  listSessions(ctx: CallContext, q: { pageSize?: number; pageToken?: string; labels?: Record<string, string> }): Promise<{ sessions: SessionView[]; nextPageToken: string }> {
    return this.#reads.listSessions(ctx, q);
  }

  /**
   * Deletes a session (NOT_FOUND when there is none); subscribers are told. With `expected` (retention), only while its
   * head and creation time are still these, checked in the store's delete transaction: false when
   * it changed meanwhile and was kept.
   */
  async deleteSession(ctx: CallContext, id: string, expected?: DeleteExpectation): Promise<boolean> {
    const key = this.storageKey(ctx, id);
    try {
      // A refused session can be deleted: that is how it is cleared.
      await this.cache.record(ctx, id, 'allow');
    } catch (e) {
      // A session the store refuses without a record (lost from the database, its head on record):
      // the store's delete clears that refusal.
      if (!(e instanceof DataCorruptedError) || e.sessionId !== key) throw e;
    }
    const ok = await this.store.deleteSession(key, expected);
    if (!ok && expected !== undefined && (await this.store.getSession(key).catch(() => undefined)) !== undefined) return false;
    this.cache.drop(key);
    if (!ok) throw notFound(id);
    this.cache.forget(key);
    this.feed.deleted(key);
    return true;
  }

  /**
   * Sets and removes labels (UpdateSession), conditional on `expectedVersion` when given
   * (METADATA_VERSION_MISMATCH); reported on the session feed as labels_changed.
   */
  async updateSession(ctx: CallContext, id: string, req: UpdateSessionRequest): Promise<SessionView> {
    await updateSession(this.store, this.cache, ctx, id, req);
    this.sessionFeed.poke();
    return this.getSession(ctx, id);
  }

  // ---- append / repair ---------------------------------------------------------------------

  /** Appends a batch atomically (see the module comment for the concurrency model). */
  append(ctx: CallContext, sessionId: string, candidates: readonly CandidateEvent[], opts: AppendOptions = {}): Promise<AppendResult> {
    return this.#guard(this.#appends.append(ctx, sessionId, candidates, opts));
  }

  /** Appends crash-repair closers; idempotent. */
  repair(ctx: CallContext, id: string): Promise<SessionEvent[]> {
    return this.#guard(this.#appends.repair(ctx, id));
  }

  // ---- reads ------------------------------------------------------------------------------

  /** A page of events. */
  listEvents(ctx: CallContext, id: string, q: ListEventsQuery): Promise<EventsPage> {
    return this.#guard(this.#reads.listEvents(ctx, id, q));
  }

  /** The surface (now, or right after `asOfSeq`). */
  getSurface(ctx: CallContext, id: string, asOfSeq?: number): Promise<{ seqs: number[]; replaceGeneration: number; headSeq: number | undefined }> {
    return this.#guard(this.#reads.getSurface(ctx, id, asOfSeq));
  }

  /** Model history (surface walk) or transcript (append-origin surface events in log order), now or as of a seq. */
  getMessages(ctx: CallContext, id: string, view: MessagesView, page: { afterSeq?: number; limit?: number; asOfSeq?: number } = {}): Promise<{ messages: DerivedMessage[]; headSeq: number | undefined; replaceGeneration: number }> {
    return this.#guard(this.#reads.getMessages(ctx, id, view, page));
  }

  /** ImportMessages: a conversation in a provider's format appended as the reference's events (import-messages.ts). */
  importMessages(ctx: CallContext, id: string, q: ImportMessagesQuery): Promise<{ seqs: number[]; headSeq: number }> {
    return importMessages(this.store, this.cache, (c, i, events, opts) => this.append(c, i, events, opts), ctx, id, q);
  }

  /** One page of the model history rendered for a provider (GetMessages `format`; rendered-messages.ts). */
  getRenderedMessagesPage(ctx: CallContext, id: string, q: RenderedQuery): Promise<RenderedPage> {
    return renderedMessagesPage(this.#reads, this.limits, ctx, id, q);
  }

  /** One GetMessages page (pageSize 0 = all; see Reads.getMessagesPage), now or as of a seq. */
  getMessagesPage(ctx: CallContext, id: string, view: MessagesView, pageSize: number, pageToken: string, asOfSeq?: number, blobRefs?: boolean): Promise<MessagesPage> {
    return this.#guard(this.#reads.getMessagesPage(ctx, id, view, pageSize, pageToken, asOfSeq, blobRefs));
  }

  /** The model history with the surface it comes from, from one committed state (compaction planning, pruning). */
  modelSnapshot(ctx: CallContext, id: string, opts: SnapshotOptions = {}): Promise<ModelSnapshot> {
    return this.#guard(this.#reads.modelSnapshot(ctx, id, opts));
  }

  /** Reads the whole log in ascending batches (export, subscriptions' catch-up). */
  scan(ctx: CallContext, id: string, fromSeq = 0): AsyncGenerator<SessionEvent[]> {
    return this.#guardAll(this.#reads.scan(ctx, id, fromSeq));
  }

  // ---- fork / import / export ----------------------------------------------------------------

  /** Forks a session at a boundary (dsh-semantics 5.5). */
  async fork(ctx: CallContext, id: string, req: { atSeq?: number; childId?: string; labels?: Record<string, string> }): Promise<SessionView> {
    const view = await this.#guard(this.#transfer.fork(ctx, id, req));
    this.sessionFeed.poke();
    return view;
  }

  /** Imports a reference JSONL file streamed as chunks (pending until complete; the tool-pairing guard off unless asked). */
  async importJsonl(ctx: CallContext, chunks: AsyncIterable<Uint8Array>, opts: { id?: string; labels?: Record<string, string>; strict?: boolean; allowSeqGaps?: boolean; pairingGuard?: boolean }): Promise<SessionView & { uncommittedTailBytes: number }> {
    const view = await this.#transfer.importJsonl(ctx, chunks, opts);
    this.sessionFeed.poke();
    return view;
  }

  /** Exports a session as reference JSONL lines (packed chunk rows unless `unpacked`). */
  /** GetBlob (issue #39): the caller's tenant's blob by digest from `offset`, in chunks (blob-refs.ts). */
  readBlob(ctx: CallContext, digest: string, offset = 0): AsyncGenerator<BlobChunk> {
    return readBlobChunks(this.store, ctx.tenant, digest, offset);
  }

  exportJsonl(ctx: CallContext, id: string, opts: { unpacked?: boolean; blobRefs?: boolean } = {}): AsyncGenerator<string[]> {
    return this.#guardAll(this.#transfer.exportJsonl(ctx, id, opts));
  }

  // ---- refused sessions -------------------------------------------------------------------

  /** A use case's outcome; a failed integrity check refuses its session from then on (SessionCache.refuse). */
  #guard<T>(p: Promise<T>): Promise<T> {
    return p.catch((e: unknown) => this.#refuse(e));
  }

  /** As #guard, for a use case that yields batches. */
  async *#guardAll<T>(gen: AsyncGenerator<T>): AsyncGenerator<T> {
    try {
      yield* gen;
    } catch (e) {
      await this.#refuse(e);
    }
  }

  async #refuse(e: unknown): Promise<never> {
    if (e instanceof DataCorruptedError) await this.cache.refuse(e);
    throw e;
  }

  // ---- lifecycle ---------------------------------------------------------------------------

  /** Number of hot sessions (metrics). */
  get cachedSessions(): number {
    return this.cache.size;
  }

  /** Stops serving and closes the feed and the store after in-flight writes finish. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.cache.close();
    this.sessionFeed.close();
    await this.cache.settle();
    await this.feed.close();
    await this.search.close();
    await this.store.close();
  }
}
