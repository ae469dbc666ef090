/**
 * The hot-session cache: each session's engine (surface, counters) and write pipeline, loaded
 * from the store on a miss, LRU-evicted by session and event counts (never a session with
 * writes in flight or live subscribers).
 *
 * The store is the single source of truth and may have other writers (server processes). A
 * cached handle is used only after checking the stored head and writer token (one primary-key
 * read) whenever the session is idle, so another process's commit (or a delete and re-create)
 * is never hidden by the cache; while this process has writes in flight, a conflict on any of
 * them drops the handle.
 *
 * Refused sessions (issue #33 item 1): once an integrity check failed on a session (a store's
 * checksum or digest, or a run of events with a seq missing, run-check.ts), every use case that
 * reaches it through this cache answers that same DataCorruptedError until the session is deleted
 * (or another process deletes and re-creates the id: the refusal names the incarnation by its
 * creation time). Kept per process, not stored.
 */
import type { SessionEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { SessionEngine } from '../domain/session-engine.js';
import { READ_ATTEMPTS, STORE_READ_BATCH, notFound, retriesExhausted, type AppLimits, type CallContext } from './app-types.js';
import type { ChangeFeed } from './change-feed.js';
import { SessionHandle } from './session-handle.js';
import type { SessionRecord, SessionStore } from './store-port.js';
import { fromStored, storageKey } from './tenant-scope.js';
import { DataCorruptedError } from './storage-error.js';
import { AscendingRun, runCorrupted } from './run-check.js';

/** A refused session: the incarnation (creation time) and the error every use answers. */
interface Refusal {
  readonly createdAt: number;
  readonly error: DataCorruptedError;
}

/** Hot sessions of one service. */
export class SessionCache {
  readonly #cache = new Map<string, SessionHandle>();
  readonly #loading = new Map<string, Promise<SessionHandle>>();
  readonly #refused = new Map<string, Refusal>();
  #cachedEvents = 0;
  #closed = false;

  /** Keys deleted elsewhere while they had subscribers: dropped when the last one leaves. */
  readonly #deletedWhileWatched = new Set<string>();

  constructor(
    private readonly store: SessionStore,
    private readonly limits: AppLimits,
    private readonly feed: ChangeFeed,
  ) {
    feed.onUnwatched = (key) => {
      if (this.#deletedWhileWatched.delete(key)) this.deletedElsewhere(key);
    };
  }

  /** Number of hot sessions. */
  get size(): number {
    return this.#cache.size;
  }

  /** The cached handle of a storage key, if any (not checked against the store). */
  peek(key: string): SessionHandle | undefined {
    return this.#cache.get(key);
  }

  /** Refuses new work from now on. */
  close(): void {
    this.#closed = true;
  }

  /** Waits for every hot session's writes in flight. */
  async settle(): Promise<void> {
    for (const h of this.#cache.values()) await h.read(() => undefined);
  }

  /**
   * The session's record (header unscoped), or NOT_FOUND (also for another tenant's session);
   * DATA_CORRUPTED for a refused session unless `refused` is 'allow' (a delete clears it).
   */
  async record(ctx: CallContext, id: string, refused: 'refuse' | 'allow' = 'refuse'): Promise<SessionRecord> {
    const key = storageKey(ctx.tenant, id);
    const rec = await this.store.getSession(key);
    if (!rec || rec.tenant !== ctx.tenant) throw notFound(id);
    if (refused === 'refuse') this.#checkRefused(key, rec.header.createdAt);
    return fromStored(rec);
  }

  /**
   * Refuses the session `error` names (its storage key) from now on: the incarnation stored now.
   * A session gone from the store is not remembered (a store that keeps refusing such a
   * session, as SQLite's heads record does, answers for it itself).
   */
  async refuse(error: DataCorruptedError): Promise<void> {
    const key = error.sessionId;
    if (this.#refused.has(key)) return;
    const rec = await this.store.getSession(key).catch(() => undefined);
    if (rec === undefined || this.#refused.has(key)) return;
    this.#refused.set(key, { createdAt: rec.header.createdAt, error });
    this.drop(key);
  }

  /** True when the session stored under `key` with this creation time is refused. */
  isRefused(key: string, createdAt: number): boolean {
    return this.#refused.get(key)?.createdAt === createdAt;
  }

  /** Forgets a refusal (the session was deleted). */
  forget(key: string): void {
    this.#refused.delete(key);
  }

  #checkRefused(key: string, createdAt: number): void {
    const r = this.#refused.get(key);
    if (r === undefined) return;
    if (r.createdAt === createdAt) throw r.error;
    // Deleted and created again (by another process): a new session.
    this.#refused.delete(key);
  }

  /**
   * A run of events read from the store broke what `rec` promises (run-check.ts): unless the
   * session was deleted (NOT_FOUND) or re-created (a retry) since `rec` was read, the session is
   * refused from now on and DATA_CORRUPTED thrown.
   */
  async corrupted(key: string, id: string, rec: SessionRecord, problem: string): Promise<never> {
    const now = await this.store.getSession(key);
    if (now === undefined) throw notFound(id);
    if (now.header.createdAt !== rec.header.createdAt) throw retriesExhausted(id, 'it was deleted and created again during the read; retry');
    const error = runCorrupted(key, problem);
    if (!this.#refused.has(key)) this.#refused.set(key, { createdAt: rec.header.createdAt, error });
    this.drop(key);
    throw this.#refused.get(key)!.error;
  }

  /**
   * The events of a session from `fromSeq` to the end in ascending batches, each checked against
   * `rec` (run-check.ts: no seq missing, the count when read from 0); a batch is yielded only once
   * checked, so an export or a fork never carries a log with a hole.
   */
  async *scan(key: string, id: string, rec: SessionRecord, fromSeq: number, blobRefs = false): AsyncGenerator<SessionEvent[]> {
    const run = new AscendingRun(rec, fromSeq);
    // blobRefs: blobbed values as their references (issue #39, the rows as stored).
    const batches = blobRefs && this.store.scanStoredEvents !== undefined
      ? this.store.scanStoredEvents(key, fromSeq, STORE_READ_BATCH)
      : this.store.scanEvents(key, fromSeq, STORE_READ_BATCH);
    for await (const batch of batches) {
      const problem = run.add(batch);
      if (problem !== undefined) await this.corrupted(key, id, rec, problem);
      yield batch;
    }
    const problem = run.end();
    if (problem !== undefined) await this.corrupted(key, id, rec, problem);
  }

  /** Runs `fn` on a hot, valid, up-to-date handle's committed state. */
  async withRead<T>(ctx: CallContext, id: string, fn: (h: SessionHandle) => T): Promise<T> {
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const h = await this.handle(ctx, id);
      const out = await h.read(() => (h.valid ? { v: fn(h) } : undefined));
      if (out) return out.v;
    }
    throw retriesExhausted(id);
  }

  /**
   * The hot handle of a session, loading it on a miss. The store's head and writer token are
   * checked on every call that finds the session idle, unless `verify` is false: appends skip
   * that read (their write is conditional on head and token anyway, so a moved session is a
   * conflict and a re-plan) and call {@link moved} only when a plan is rejected.
   */
  async handle(ctx: CallContext, id: string, opts: { readonly verify?: boolean } = {}): Promise<SessionHandle> {
    if (this.#closed) throw new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; retry on another replica or later', {});
    const key = storageKey(ctx.tenant, id);
    const cached = this.#cache.get(key);
    if (cached && cached.valid) {
      if (cached.record.tenant !== ctx.tenant) throw notFound(id);
      this.#checkRefused(key, cached.record.header.createdAt);
      if (!cached.busy && opts.verify !== false) {
        const rec = await this.store.getSession(key);
        if (!rec) {
          this.drop(key);
          throw notFound(id);
        }
        // Another writer appended, or deleted and re-created the session: reload. Every
        // committed write leaves a new writer token, so the token alone tells.
        if (cached.valid && !cached.busy && (rec.writer !== cached.writer || rec.nextSeq !== cached.engine.nextSeq)) this.invalidate(cached);
        // Labels changed by another process (UpdateSession): the handle takes the stored ones.
        else if (cached.valid && rec.metadataVersion > cached.record.metadataVersion && rec.header.createdAt === cached.record.header.createdAt) {
          cached.record = { ...cached.record, labels: rec.labels, metadataVersion: rec.metadataVersion };
        }
      }
      if (cached.valid) {
        this.#cache.delete(key);
        this.#cache.set(key, cached);
        return cached;
      }
    }
    let loading = this.#loading.get(key);
    if (!loading) {
      loading = this.#load(key, id).finally(() => this.#loading.delete(key));
      this.#loading.set(key, loading);
    }
    const h = await loading;
    if (h.record.tenant !== ctx.tenant) throw notFound(id);
    return h;
  }

  /**
   * True (and the handle dropped) when the store's head or writer token differ from an idle
   * handle's, i.e. another writer moved the session since it was cached; false when it is current
   * or busy (its own writes in flight).
   */
  async moved(h: SessionHandle): Promise<boolean> {
    if (h.busy || !h.valid) return !h.valid;
    const rec = await this.store.getSession(h.id);
    if (h.busy || !h.valid) return !h.valid;
    if (rec && rec.writer === h.writer && rec.nextSeq === h.engine.nextSeq) return false;
    this.invalidate(h);
    return true;
  }

  /** Counts events a commit added to a hot session (eviction budget). */
  added(events: number): void {
    this.#cachedEvents += events;
  }

  /** Drops a handle found inconsistent with the store (it reloads on next use). */
  invalidate(h: SessionHandle): void {
    h.valid = false;
    if (this.#cache.get(h.id) === h) this.drop(h.id);
  }

  /**
   * A session deleted elsewhere (another replica or process: HeadWatch.watchDeletes): its handle
   * is dropped now rather than left to LRU eviction, which keeps up to `cacheMaxSessions` (10,000)
   * of them (issue #33: the soak's replicas grew by every session the other one deleted). Not a
   * handle with writes in flight or live subscribers (the rule of eviction): those find the
   * deletion themselves, and a handle kept for subscribers is dropped when the last one leaves.
   * A late hint after a re-create only costs a reload.
   */
  deletedElsewhere(key: string): void {
    const h = this.#cache.get(key);
    if (h === undefined || h.busy) return;
    if (this.feed.listenerCount(key) > 0) {
      this.#deletedWhileWatched.add(key);
      return;
    }
    this.drop(key);
  }

  /** Drops a storage key's handle. */
  drop(key: string): void {
    this.#deletedWhileWatched.delete(key);
    const h = this.#cache.get(key);
    if (!h) return;
    h.valid = false;
    this.#cache.delete(key);
    this.#cachedEvents -= h.engine.eventCount;
  }

  async #load(key: string, id: string): Promise<SessionHandle> {
    const stored = await this.store.getSession(key);
    if (!stored) throw notFound(id);
    this.#checkRefused(key, stored.header.createdAt);
    const rec = fromStored(stored);
    const engine = SessionEngine.create({ strict: rec.strict });
    if (rec.strict) {
      const all: SessionEvent[] = [];
      for await (const b of this.scan(key, id, rec, 0)) all.push(...b);
      engine.loadEvents(all);
    } else {
      // The whole log: the count and (without seq gaps) contiguity are checked, on every store.
      const rows = this.store.readStructureColumns !== undefined ? await this.store.readStructureColumns(key) : await this.store.readStructure(key, 0);
      const run = new AscendingRun(rec, 0);
      const problem = (Array.isArray(rows) ? run.add(rows) : run.addSeqs(rows.seqs)) ?? run.end();
      if (problem !== undefined) await this.corrupted(key, id, rec, problem);
      engine.loadStructural(rows);
    }
    const h = new SessionHandle(key, id, rec, engine);
    this.#cache.set(key, h);
    this.#cachedEvents += engine.eventCount;
    this.#evict();
    return h;
  }

  #evict(): void {
    for (const [id, h] of this.#cache) {
      if (this.#cache.size <= this.limits.cacheMaxSessions && this.#cachedEvents <= this.limits.cacheMaxEvents) break;
      if (h.busy || this.feed.listenerCount(id) > 0) continue;
      this.drop(id);
    }
  }
}
