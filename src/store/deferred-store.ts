/**
 * A store that is not open yet (issue #33 item 3): a replica started while PostgreSQL is down
 * serves at once, answers every call UNAVAILABLE / STORE_UNAVAILABLE (as a running replica does
 * while the database is away) and its health NOT_SERVING, while the composition root (main.ts)
 * keeps trying to open the real store with backoff; `open(store)` then hands every call to it.
 *
 * Head watches registered meanwhile (subscriptions opened while waiting) are attached to the real
 * store's watch when it opens (feed watchers too, told once at the open). The optional port
 * methods (readEncodedEventPage, readSurfaceStructure) are not: the PostgreSQL store, the only one opened this way,
 * has neither.
 */
import type {
  AppendOutcome, AppendRequest, CreateOutcome, CreateQuota, DeleteExpectation, HeadWatch, IdempotentResult, NewSession,
  PendingChunkOptions, PendingChunkOutcome, ReadEventsQuery, SessionPage, SessionRecord, SessionStore, StoredEventText, StructuralRow, TenantUsage,
  FeedQuery, FeedRecord, PublishMetadata, UpdateLabelsOutcome,
} from '../app/store-port.js';
import type { SessionEvent } from '../domain/event.js';
import { StoreClosedError, StoreUnavailableError } from './store-errors.js';

/** A watch registered before the store opened. */
interface PendingWatch {
  readonly sessionId: string;
  readonly onHead: (head: number | 'deleted') => void;
  stop: (() => void) | undefined;
}

/** Head watches that attach to the real store's watch once it is open. */
class DeferredHeadWatch implements HeadWatch {
  #inner: HeadWatch | undefined;
  readonly #pending = new Set<PendingWatch>();
  /** Feed watchers (watchFeed), attached to the real watch once it is open. */
  readonly #feed = new Map<(tenant?: string) => void, (() => void) | undefined>();
  /** Deletion watchers (watchDeletes), attached to the real watch once it is open. */
  readonly #deletes = new Map<(sessionId: string) => void, (() => void) | undefined>();
  #closed = false;

  attach(inner: HeadWatch): void {
    this.#inner = inner;
    for (const w of this.#pending) w.stop = inner.watch(w.sessionId, w.onHead);
    for (const onChange of this.#feed.keys()) {
      this.#feed.set(onChange, inner.watchFeed?.(onChange));
      // The store just opened: whatever it holds is news to the feed.
      onChange();
    }
    for (const onDeleted of this.#deletes.keys()) this.#deletes.set(onDeleted, inner.watchDeletes?.(onDeleted));
  }

  watchDeletes(onDeleted: (sessionId: string) => void): () => void {
    const entry = (sessionId: string): void => onDeleted(sessionId);
    this.#deletes.set(entry, this.#inner?.watchDeletes?.(entry));
    return () => {
      this.#deletes.get(entry)?.();
      this.#deletes.delete(entry);
    };
  }

  watchFeed(onChange: (tenant?: string) => void): () => void {
    const entry = (tenant?: string): void => onChange(tenant);
    this.#feed.set(entry, this.#inner?.watchFeed?.(entry));
    return () => {
      this.#feed.get(entry)?.();
      this.#feed.delete(entry);
    };
  }

  watch(sessionId: string, onHead: (head: number | 'deleted') => void): () => void {
    const w: PendingWatch = { sessionId, onHead, stop: this.#inner?.watch(sessionId, onHead) };
    this.#pending.add(w);
    return () => {
      this.#pending.delete(w);
      w.stop?.();
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#pending.clear();
    this.#feed.clear();
    this.#deletes.clear();
    await this.#inner?.close();
  }
}

/** The store port over a store that opens later (see the module comment). */
export class DeferredStore implements SessionStore {
  #store: SessionStore | undefined;
  #closed = false;
  readonly #watch = new DeferredHeadWatch();

  /** @param waiting what calls answer until the store opens (the operator's words: what is awaited, until when). */
  constructor(private readonly waiting: string) {}

  /** True once closed (the opener then closes a store it opens late). */
  get closed(): boolean {
    return this.#closed;
  }

  /** True once the real store is open. */
  get isOpen(): boolean {
    return this.#store !== undefined;
  }

  /** Hands every call to `store` from now on. */
  open(store: SessionStore): void {
    if (this.#closed) throw new StoreClosedError();
    this.#store = store;
    this.#watch.attach(store.openHeadWatch());
  }

  #s(): SessionStore {
    if (this.#closed) throw new StoreClosedError();
    if (this.#store === undefined) throw new StoreUnavailableError(this.waiting);
    return this.#store;
  }

  async createSession(record: NewSession, events: readonly SessionEvent[], quota?: CreateQuota): Promise<CreateOutcome> {
    return this.#s().createSession(record, events, quota);
  }
  async getSession(id: string): Promise<SessionRecord | undefined> {
    return this.#s().getSession(id);
  }
  async listSessions(query: { tenant?: string; labels?: Readonly<Record<string, string>>; pageSize: number; pageToken?: string }): Promise<SessionPage> {
    return this.#s().listSessions(query);
  }
  async deleteSession(id: string, expected?: DeleteExpectation): Promise<boolean> {
    return this.#s().deleteSession(id, expected);
  }
  async deletePending(id: string, owner: string): Promise<boolean> {
    return this.#s().deletePending(id, owner);
  }
  async append(sessionId: string, req: AppendRequest): Promise<AppendOutcome> {
    return this.#s().append(sessionId, req);
  }
  async getIdempotent(sessionId: string, key: string): Promise<IdempotentResult | undefined> {
    return this.#s().getIdempotent(sessionId, key);
  }
  async readFeed(query: FeedQuery): Promise<FeedRecord[]> {
    return this.#s().readFeed(query);
  }
  async feedEnd(tenant: string): Promise<number> {
    return this.#s().feedEnd(tenant);
  }
  async feedPrunedUpTo(tenant: string): Promise<number> {
    return this.#s().feedPrunedUpTo(tenant);
  }
  async pruneFeed(before: number): Promise<number> {
    return this.#s().pruneFeed(before);
  }
  async updateLabels(id: string, labels: Readonly<Record<string, string>>, expectedVersion: number): Promise<UpdateLabelsOutcome> {
    return this.#s().updateLabels(id, labels, expectedVersion);
  }
  async tenantSessionCounts(): Promise<ReadonlyMap<string, number>> {
    return (await this.#s().tenantSessionCounts?.()) ?? new Map();
  }
  async readEvents(sessionId: string, query: ReadEventsQuery): Promise<SessionEvent[]> {
    return this.#s().readEvents(sessionId, query);
  }
  async readEventTexts(sessionId: string, query: ReadEventsQuery): Promise<StoredEventText[]> {
    return this.#s().readEventTexts(sessionId, query);
  }
  async getEvents(sessionId: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    return this.#s().getEvents(sessionId, seqs);
  }
  async readStructure(sessionId: string, fromSeq: number, limit?: number): Promise<StructuralRow[]> {
    return this.#s().readStructure(sessionId, fromSeq, limit);
  }
  async *scanEvents(sessionId: string, fromSeq: number, batchSize: number): AsyncIterable<SessionEvent[]> {
    yield* this.#s().scanEvents(sessionId, fromSeq, batchSize);
  }
  async publishSession(id: string, owner: string, metadata?: PublishMetadata): Promise<void> {
    return this.#s().publishSession(id, owner, metadata);
  }
  async appendPending(sessionId: string, events: readonly SessionEvent[], opts: PendingChunkOptions): Promise<PendingChunkOutcome> {
    return this.#s().appendPending(sessionId, events, opts);
  }
  async getPendingEvents(sessionId: string, owner: string, seqs: readonly number[]): Promise<SessionEvent[]> {
    return this.#s().getPendingEvents(sessionId, owner, seqs);
  }
  async getTenantUsage(tenant: string): Promise<TenantUsage> {
    return this.#s().getTenantUsage(tenant);
  }
  openHeadWatch(): HeadWatch {
    return this.#watch;
  }
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#watch.close();
    await this.#store?.close();
  }
}
