/**
 * The use cases of Palimpsest over the store port: sessions, atomic appends with idempotency and
 * optimistic concurrency, reads, derivation, fork, repair, import and export. Knows nothing of
 * gRPC; throws DomainError with stable reasons.
 *
 * Concurrency model: the store is the single source of truth and may have other writers (server
 * replicas). Hot sessions are cached with their engine; an append is planned against the cached
 * engine and written with a condition on the head it was planned against. A moved head (another
 * writer) drops the cached engine; the request is re-planned on a fresh load (bounded retries).
 */
import { createHash, randomUUID } from 'node:crypto';
import type { CandidateEvent, Json, SessionEvent, SessionHeader } from '../domain/event.js';
import { SESSION_FORMAT_VERSION, SURFACE_TYPES } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { SessionEngine, dataDependencies, type BatchPlan } from '../domain/session-engine.js';
import { MessageProjection } from '../domain/derive.js';
import { messageOf } from '../domain/message-view.js';
import { interruptedTurnClosers } from '../domain/repair.js';
import { planFork } from '../domain/fork.js';
import { JsonlDecoder, JsonlLineSplitter, assertUncompressed } from '../domain/jsonl-reader.js';
import { JsonlEncoder } from '../domain/jsonl-writer.js';
import type { IdempotentResult, NewSession, QuotaExceeded, ReadEventsQuery, SessionRecord, SessionStore, StoredEventText } from './store-port.js';
import type { ChangeFeed } from './change-feed.js';
import { LocalChangeFeed } from './local-change-feed.js';
import { SessionHandle } from './session-handle.js';
import { storageKey, toStored, fromStored } from './tenant-scope.js';
import { MAX_JSON_DEPTH, jsonTextDepth } from './json-depth.js';

/** Limits enforced by the app (the server adds transport limits). */
export interface AppLimits {
  /** Max events per AppendEvents batch. */
  readonly maxBatchEvents: number;
  /** Max bytes of one event's data (JSON text). */
  readonly maxEventBytes: number;
  /** Max page size of list RPCs. */
  readonly maxPageSize: number;
  /** Default page size of list RPCs. */
  readonly defaultPageSize: number;
  /** Hot sessions kept in memory. */
  readonly cacheMaxSessions: number;
  /** Total events (structural entries) of hot sessions kept in memory. */
  readonly cacheMaxEvents: number;
  /** Per-tenant max sessions (0 = unlimited). */
  readonly tenantMaxSessions: number;
  /** Per-tenant max stored data bytes (0 = unlimited). */
  readonly tenantMaxBytes: number;
}

/** Sensible production defaults. */
export const DEFAULT_LIMITS: AppLimits = {
  maxBatchEvents: 1000,
  maxEventBytes: 4 * 1024 * 1024,
  maxPageSize: 1000,
  defaultPageSize: 100,
  cacheMaxSessions: 10_000,
  cacheMaxEvents: 20_000_000,
  tenantMaxSessions: 0,
  tenantMaxBytes: 0,
};

/** Who is calling: the tenant that owns what it creates ('' when auth is off). */
export interface CallContext {
  readonly tenant: string;
}

/** The no-auth context. */
export const ANONYMOUS: CallContext = { tenant: '' };

/** Options of an append. */
export interface AppendOptions {
  /** Seq of the last event the client expects (-1 = empty session). */
  readonly expectedLastSeq?: number;
  /** Idempotency key ('' or absent = none). */
  readonly idempotencyKey?: string;
  /** Byte size of each candidate's data as received (for the per-event limit), if known. */
  readonly dataBytes?: readonly number[];
}

/** Result of an append. */
export interface AppendResult {
  readonly seqs: readonly number[];
  readonly replayed: boolean;
  readonly surfaceLength: number;
}

/** A session and its live counts. */
export interface SessionView {
  readonly record: SessionRecord;
  readonly surfaceLength: number;
  readonly headSeq: number | undefined;
  readonly eventCount: number;
}

/** A derived message with the event it comes from. */
export interface DerivedMessage {
  readonly seq: number;
  readonly message: Json;
}

/** Logger port (pino in production). */
export interface AppLogger {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

const RETRY = Symbol('retry');
const MAX_ATTEMPTS = 8;
const SESSION_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;
const STORE_READ_BATCH = 2000;
/** How long an import's pending session stays owned without a new chunk (ms). */
const IMPORT_LEASE_MS = 5 * 60_000;

/** The QUOTA_EXCEEDED error of a store's quota outcome (same reason and metadata for sessions and bytes). */
function quotaError(tenant: string, q: QuotaExceeded): DomainError {
  const message = q.limitName === 'tenant_max_sessions'
    ? `tenant ${JSON.stringify(tenant)} has reached its limit of ${q.limit} sessions; delete sessions or raise the quota`
    : `tenant ${JSON.stringify(tenant)} would store ${q.actual} bytes; the limit is ${q.limit}; delete sessions or raise the quota`;
  return new DomainError('QUOTA_EXCEEDED', message, { limitName: q.limitName, limit: String(q.limit), actual: String(q.actual), tenant });
}

function notFound(id: string): DomainError {
  return new DomainError('SESSION_NOT_FOUND', `session ${JSON.stringify(id)} does not exist`, { sessionId: id });
}

/** JSON with object keys sorted at every depth (a canonical text of a JSON-like value). */
function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o).filter((k) => o[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
}

/**
 * Canonical hash of a request's events (every envelope field, keys sorted at every depth), to
 * detect an idempotency key reused with another body; key order inside data does not matter.
 */
function requestHash(candidates: readonly CandidateEvent[]): string {
  const h = createHash('sha256');
  for (const c of candidates) h.update(canonicalJson(c)).update('\n');
  return h.digest('hex');
}

/** The application service. */
export class SessionService {
  readonly #cache = new Map<string, SessionHandle>();
  readonly #loading = new Map<string, Promise<SessionHandle>>();
  readonly #inflightKeys = new Map<string, Promise<unknown>>();
  #cachedEvents = 0;
  #closed = false;
  /** Owner of this service's pending imports (see NewSession.pending). */
  readonly instanceId = randomUUID();

  constructor(
    readonly store: SessionStore,
    readonly limits: AppLimits = DEFAULT_LIMITS,
    private readonly clock: () => number = Date.now,
    private readonly log?: AppLogger,
    private readonly newId: () => string = randomUUID,
    /** What subscriptions follow: local batches only, or also the store's heads (StoreChangeFeed). */
    readonly feed: ChangeFeed = new LocalChangeFeed(),
  ) {
    this.feed.onListenerError = (e) => this.log?.error({ err: e }, 'a subscriber failed on a committed batch and was removed');
  }

  /**
   * The key a session is stored, cached and published under. Session ids are per tenant: two
   * tenants may both have a session "main", and nothing one tenant does can reveal another's ids.
   */
  storageKey(ctx: CallContext, id: string): string {
    return storageKey(ctx.tenant, id);
  }

  // ---- sessions --------------------------------------------------------------------------

  /** Creates an empty session. */
  async createSession(ctx: CallContext, req: {
    id?: string; labels?: Record<string, string>; cwd?: string; origin?: string;
    delegationDepth?: number; agentPreset?: string; strict?: boolean;
  }): Promise<SessionView> {
    const id = req.id || this.newId();
    this.#checkId(id);
    const header = this.#header({ id, createdAt: this.clock(), cwd: req.cwd, origin: req.origin, delegationDepth: req.delegationDepth, agentPreset: req.agentPreset });
    await this.#create(ctx, id, { header: toStored(ctx.tenant, header), labels: req.labels ?? {}, tenant: ctx.tenant, strict: req.strict ?? false, pairingGuard: false, writer: randomUUID() }, []);
    return this.getSession(ctx, id);
  }

  /** A session with live counts. */
  async getSession(ctx: CallContext, id: string): Promise<SessionView> {
    return this.#withRead(ctx, id, (h) => this.#view(h));
  }

  /** Sessions newest first. */
  async listSessions(ctx: CallContext, q: { pageSize?: number; pageToken?: string; labels?: Record<string, string> }): Promise<{ sessions: SessionView[]; nextPageToken: string }> {
    const pageSize = this.#pageSize(q.pageSize);
    const page = await this.store.listSessions({ tenant: ctx.tenant, labels: q.labels, pageSize, pageToken: q.pageToken || undefined });
    const sessions: SessionView[] = [];
    for (const stored of page.sessions) {
      const h = this.#cache.get(stored.header.id);
      const r = fromStored(stored);
      sessions.push(h && h.valid && !h.busy && h.engine.nextSeq === r.nextSeq
        ? this.#view(h)
        : { record: r, surfaceLength: h?.engine.surfaceLength ?? -1, headSeq: r.eventCount > 0 ? r.nextSeq - 1 : undefined, eventCount: r.eventCount });
    }
    // Surface lengths of sessions that are not hot: load them (bounded by the page size).
    for (let i = 0; i < sessions.length; i++) {
      const s = sessions[i]!;
      if (s.surfaceLength < 0) sessions[i] = await this.getSession(ctx, s.record.header.id);
    }
    return { sessions, nextPageToken: page.nextPageToken };
  }

  /** Deletes a session; subscribers are told. */
  async deleteSession(ctx: CallContext, id: string): Promise<void> {
    await this.#record(ctx, id);
    const key = this.storageKey(ctx, id);
    const ok = await this.store.deleteSession(key);
    this.#drop(key);
    if (!ok) throw notFound(id);
    this.feed.deleted(key);
  }

  // ---- append ----------------------------------------------------------------------------

  /** Appends a batch atomically (see the class comment for the concurrency model). */
  async append(ctx: CallContext, sessionId: string, candidates: readonly CandidateEvent[], opts: AppendOptions = {}): Promise<AppendResult> {
    if (candidates.length === 0) throw new DomainError('BATCH_EMPTY', 'the batch has no events; send at least one', {});
    if (candidates.length > this.limits.maxBatchEvents) {
      throw new DomainError('BATCH_TOO_LARGE', `the batch has ${candidates.length} events; the limit is ${this.limits.maxBatchEvents}`, {
        limitName: 'max_batch_events', limit: String(this.limits.maxBatchEvents), actual: String(candidates.length),
      });
    }
    this.#checkEventSizes(candidates, opts.dataBytes);
    const key = opts.idempotencyKey || undefined;
    const hash = key ? requestHash(candidates) : '';
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const handle = await this.#handle(ctx, sessionId);
      if (key) {
        const inflightKey = `${handle.id}\0${key}`;
        const inflight = this.#inflightKeys.get(inflightKey);
        if (inflight) {
          await inflight.catch(() => undefined);
          continue;
        }
        const stored = await this.store.getIdempotent(handle.id, key);
        if (stored) return this.#replayed(sessionId, key, stored, hash);
      }
      const deps = dataDependencies(handle.engine, candidates);
      const lookup = new Map<number, SessionEvent>();
      if (deps.length > 0) for (const e of await this.store.getEvents(handle.id, deps)) lookup.set(e.seq, e);
      const attemptPromise = this.#appendOnce(handle, candidates, opts, key, hash, lookup);
      if (key) {
        const inflightKey = `${handle.id}\0${key}`;
        this.#inflightKeys.set(inflightKey, attemptPromise);
        void attemptPromise.finally(() => this.#inflightKeys.delete(inflightKey)).catch(() => undefined);
      }
      const result = await attemptPromise;
      if (result !== RETRY) return result;
      // Let this session's in-flight writes settle before trying again (no busy spinning).
      await handle.read(() => undefined);
    }
    throw new DomainError('CONFLICT_RETRIES_EXHAUSTED', `session ${sessionId} kept moving under concurrent writers; retry the request`, { sessionId });
  }

  #appendOnce(handle: SessionHandle, candidates: readonly CandidateEvent[], opts: AppendOptions, key: string | undefined, hash: string, lookup: Map<number, SessionEvent>): Promise<AppendResult | typeof RETRY> {
    return new Promise((resolve, reject) => {
      handle.enqueue(() => {
        if (!handle.valid) {
          resolve(RETRY);
          return undefined;
        }
        const engine = handle.engine;
        const head = engine.nextSeq - 1;
        if (opts.expectedLastSeq !== undefined && opts.expectedLastSeq !== head) {
          reject(new DomainError('HEAD_MISMATCH',
            `expected_last_seq ${opts.expectedLastSeq} does not match the session head ${head}; re-read and retry`,
            { sessionId: handle.sessionId, expected: String(opts.expectedLastSeq), actual: String(head) }));
          return undefined;
        }
        // Data the plan needs (tool/result replace targets) may belong to batches planned but not
        // yet committed (pipelined), or may have been committed after the prefetch: take them
        // from the handle, or retry with a fresh prefetch.
        const need = (s: number): SessionEvent | undefined => lookup.get(s) ?? handle.pending.get(s);
        if (dataDependencies(engine, candidates).some((s) => need(s) === undefined)) {
          resolve(RETRY);
          return undefined;
        }
        let plan: BatchPlan;
        try {
          plan = engine.plan(candidates, { mode: 'append', now: this.clock, sessionId: handle.sessionId, lookup: need });
        } catch (e) {
          reject(e);
          return undefined;
        }
        engine.commit(plan);
        // This batch's own surface length (later pipelined batches move the engine on).
        const surfaceLength = engine.surfaceLength;
        for (const e of plan.events) handle.pending.set(e.seq, e);
        // The compare-and-set base: the token of the batch this plan sits on (committed or still
        // in flight); a failed base never stores its token, so this batch cannot commit either.
        const expectedWriter = handle.writer;
        const writer = randomUUID();
        handle.writer = writer;
        const maxBytes = this.limits.tenantMaxBytes;
        return this.store.append(handle.id, {
          expectedNextSeq: plan.baseNextSeq,
          expectedWriter,
          writer,
          events: plan.events,
          surfaceLength,
          ...(key ? { idempotency: { key, requestHash: hash } } : {}),
          ...(maxBytes > 0 ? { quota: { maxBytes } } : {}),
        }).then(
          (outcome) => {
            for (const e of plan.events) handle.pending.delete(e.seq);
            if (outcome.kind === 'appended') {
              resolve({ seqs: plan.events.map((e) => e.seq), replayed: false, surfaceLength });
              this.#committed(handle, plan);
            } else {
              // Another writer moved the head, or the key was used meanwhile: the speculative
              // engine state is wrong; reload and re-plan.
              this.#invalidate(handle);
              if (outcome.kind === 'not-found') reject(notFound(handle.sessionId));
              else if (outcome.kind === 'quota-exceeded') reject(quotaError(handle.record.tenant, outcome));
              else resolve(RETRY);
            }
          },
          (err: unknown) => {
            for (const e of plan.events) handle.pending.delete(e.seq);
            this.#invalidate(handle);
            reject(err);
          },
        );
      });
    });
  }

  /** After a durable commit: keep the projection in step and publish to subscribers. */
  #committed(handle: SessionHandle, plan: BatchPlan): void {
    this.#cachedEvents += plan.events.length;
    try {
      handle.projection?.apply(plan);
    } catch (e) {
      // The projection is a cache: drop it (the next read hydrates it again), never fail a
      // committed append.
      handle.projection = undefined;
      this.log?.error({ err: e, sessionId: handle.sessionId }, 'message projection update failed; dropped');
    }
    this.feed.publish({ sessionId: handle.id, events: plan.events, deltas: plan.deltas });
  }

  #replayed(sessionId: string, key: string, stored: IdempotentResult, hash: string): AppendResult {
    if (stored.requestHash !== hash) {
      throw new DomainError('IDEMPOTENCY_KEY_REUSED',
        `idempotency key ${JSON.stringify(key)} was already used with different events; use a new key for a new request`,
        { sessionId, idempotencyKey: key });
    }
    return { seqs: [...stored.seqs], replayed: true, surfaceLength: stored.surfaceLength };
  }

  // ---- reads ------------------------------------------------------------------------------

  /** A page of events. */
  async listEvents(ctx: CallContext, id: string, q: { fromSeq?: number; direction: 'forward' | 'backward'; pageSize?: number; types?: readonly string[] }): Promise<{ events: StoredEventText[]; nextSeq: number | undefined }> {
    const rec = await this.#record(ctx, id);
    const limit = this.#pageSize(q.pageSize);
    const fromSeq = q.fromSeq ?? (q.direction === 'forward' ? 0 : Math.max(rec.nextSeq - 1, 0));
    const query: ReadEventsQuery = { fromSeq, direction: q.direction, limit: limit + 1, types: q.types && q.types.length > 0 ? q.types : undefined };
    // Data as the stored JSON text: the server puts it on the wire as is (no parse + stringify).
    const events = await this.store.readEventTexts(this.storageKey(ctx, id), query);
    let next: number | undefined;
    if (events.length > limit) {
      const extra = events.pop() as StoredEventText;
      next = extra.seq;
    }
    return { events, nextSeq: next };
  }

  /** The surface. */
  async getSurface(ctx: CallContext, id: string): Promise<{ seqs: number[]; replaceGeneration: number; headSeq: number | undefined }> {
    return this.#withRead(ctx, id, (h) => ({
      seqs: h.engine.surface(),
      replaceGeneration: h.engine.replaceGeneration,
      headSeq: h.engine.eventCount > 0 ? h.engine.nextSeq - 1 : undefined,
    }));
  }

  /** Model history (surface walk) or transcript (append-origin surface events in log order). */
  async getMessages(ctx: CallContext, id: string, view: 'model' | 'transcript', page: { afterSeq?: number; limit?: number } = {}): Promise<{ messages: DerivedMessage[]; headSeq: number | undefined; replaceGeneration: number }> {
    if (view === 'transcript') return { ...(await this.#transcript(ctx, id, page.afterSeq ?? -1, page.limit ?? Number.MAX_SAFE_INTEGER)), replaceGeneration: 0 };
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const h = await this.#handle(ctx, id);
      if (!h.projection) {
        const seqs = await h.read(() => h.engine.surface());
        const events = await this.store.getEvents(this.storageKey(ctx, id), seqs);
        await h.read(() => {
          if (!h.valid || h.projection) return;
          // The surface may have moved while we read: hydrate only if it did not.
          const now = h.engine.surface();
          if (now.length === seqs.length && now.every((s, i) => s === seqs[i])) {
            const byS = new Map(events.map((e) => [e.seq, e] as const));
            // getEvents returns ascending seqs; the projection needs surface order (a replace puts
            // a later seq before earlier ones).
            const inSurfaceOrder = seqs.map((s) => byS.get(s)).filter((e): e is SessionEvent => e !== undefined);
            const p = new MessageProjection(id);
            p.hydrate(inSurfaceOrder, h.engine.nextSeq, (s) => byS.get(s));
            h.projection = p;
          }
        });
        if (!h.projection) continue;
      }
      const out = await h.read(() => (h.valid && h.projection ? {
        messages: h.projection.entries(),
        headSeq: h.engine.eventCount > 0 ? h.engine.nextSeq - 1 : undefined,
        replaceGeneration: h.engine.replaceGeneration,
      } : undefined));
      if (out) return out;
    }
    throw new DomainError('CONFLICT_RETRIES_EXHAUSTED', `session ${id} kept moving; retry`, { sessionId: id });
  }

  /** Transcript messages after `afterSeq` in log order, at most `limit` (log order makes seqs stable cursors). */
  async #transcript(ctx: CallContext, id: string, afterSeq: number, limit: number): Promise<{ messages: DerivedMessage[]; headSeq: number | undefined }> {
    const rec = await this.#record(ctx, id);
    const messages: DerivedMessage[] = [];
    let from = afterSeq + 1;
    const types = [...SURFACE_TYPES];
    for (;;) {
      const page = await this.store.readEvents(this.storageKey(ctx, id), { fromSeq: from, direction: 'forward', limit: STORE_READ_BATCH, types });
      for (const e of page) {
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

  /** Reads the whole log in ascending batches (export, subscriptions' catch-up). */
  async *scan(ctx: CallContext, id: string, fromSeq = 0): AsyncGenerator<SessionEvent[]> {
    await this.#record(ctx, id);
    yield* this.store.scanEvents(this.storageKey(ctx, id), fromSeq, STORE_READ_BATCH);
  }

  // ---- fork / repair ---------------------------------------------------------------------

  /** Forks a session at a boundary (dsh-semantics 5.5). */
  async fork(ctx: CallContext, id: string, req: { atSeq?: number; childId?: string; labels?: Record<string, string> }): Promise<SessionView> {
    const childId = req.childId || this.newId();
    this.#checkId(childId);
    if (await this.store.getSession(this.storageKey(ctx, childId))) {
      throw new DomainError('SESSION_ALREADY_EXISTS', `session ${JSON.stringify(childId)} already exists`, { sessionId: childId });
    }
    const rec = await this.#record(ctx, id);
    const prefix: SessionEvent[] = [];
    for await (const batch of this.store.scanEvents(this.storageKey(ctx, id), 0, STORE_READ_BATCH)) {
      for (const e of batch) prefix.push(e);
      const last = batch[batch.length - 1];
      if (req.atSeq !== undefined && last && last.seq > req.atSeq) break;
    }
    const plan = planFork({ header: rec.header, events: prefix }, { childId, createdAt: this.clock(), boundary: req.atSeq });
    const engine = SessionEngine.create({ strict: rec.strict });
    const batch = engine.plan(plan.events as unknown as CandidateEvent[], { mode: 'import', now: this.clock, sessionId: childId, lookup: () => undefined });
    await this.#create(ctx, childId, { header: toStored(ctx.tenant, plan.header), labels: req.labels ?? {}, tenant: ctx.tenant, strict: rec.strict, pairingGuard: rec.pairingGuard, writer: randomUUID() }, batch.events);
    return this.getSession(ctx, childId);
  }

  /** Appends crash-repair closers; idempotent. */
  async repair(ctx: CallContext, id: string): Promise<SessionEvent[]> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // The committed head (waits for this session's in-flight writes), so that concurrent
      // repairs see each other's closers instead of spinning on HEAD_MISMATCH.
      const nextSeq = await this.#withRead(ctx, id, (h) => h.engine.nextSeq);
      // The repair scan resets at every turn/start, so the log from the last one is enough.
      const lastStart = await this.store.readEvents(this.storageKey(ctx, id), { fromSeq: Math.max(nextSeq - 1, 0), direction: 'backward', limit: 1, types: ['turn/start'] });
      const from = lastStart[0]?.seq ?? 0;
      const tail: SessionEvent[] = [];
      for await (const batch of this.store.scanEvents(this.storageKey(ctx, id), from, STORE_READ_BATCH)) tail.push(...batch);
      const closers = interruptedTurnClosers(tail, id);
      if (closers.length === 0) return [];
      try {
        const res = await this.append(ctx, id, closers as unknown as CandidateEvent[], { expectedLastSeq: nextSeq - 1 });
        return closers.map((c, i) => ({ ...c, seq: res.seqs[i] as number }));
      } catch (e) {
        if (e instanceof DomainError && e.reason === 'HEAD_MISMATCH') continue;
        throw e;
      }
    }
    throw new DomainError('CONFLICT_RETRIES_EXHAUSTED', `session ${id} kept moving; retry the repair`, { sessionId: id });
  }

  // ---- import / export -------------------------------------------------------------------

  /**
   * Imports a reference JSONL file streamed as text chunks. The session stays pending (invisible)
   * until the whole file validated and stored; any failure deletes it.
   */
  async importJsonl(ctx: CallContext, chunks: AsyncIterable<Uint8Array>, opts: { id?: string; labels?: Record<string, string>; strict?: boolean }): Promise<SessionView> {
    const decoder = new JsonlDecoder();
    // A line holds one event (or one packed chunk row): bound it by the event size limit plus
    // room for the envelope, so a file without newlines cannot make the server buffer it all.
    const splitter = new JsonlLineSplitter(this.limits.maxEventBytes + 64 * 1024);
    const utf8 = new TextDecoder('utf-8', { fatal: true });
    let engine: SessionEngine | undefined;
    let id = '';
    let created = false;
    let pending: CandidateEvent[] = [];
    const firstLine = 0;
    let first = true;
    const lineOf: number[] = [];
    const flush = async (): Promise<void> => {
      if (!engine || pending.length === 0) return;
      let plan: BatchPlan;
      try {
        plan = engine.plan(pending, { mode: 'import', now: this.clock, sessionId: id, lookup: () => undefined });
      } catch (e) {
        if (e instanceof DomainError && e.index !== undefined) {
          const line = lineOf[e.index] ?? firstLine;
          throw new DomainError(e.reason, `line ${line}: ${e.message}`, { ...e.metadata, line: String(line) });
        }
        throw e;
      }
      engine.commit(plan);
      pending = [];
      lineOf.length = 0;
      const maxBytes = this.limits.tenantMaxBytes;
      const outcome = await this.store.appendPending(this.storageKey(ctx, id), plan.events, {
        owner: this.instanceId, leaseUntil: this.clock() + IMPORT_LEASE_MS, ...(maxBytes > 0 ? { quota: { maxBytes } } : {}),
      });
      if (outcome.kind === 'quota-exceeded') throw quotaError(ctx.tenant, outcome);
    };
    const lines = async (text: string[]): Promise<void> => {
      for (const line of text) {
        // The record envelope adds one level to its data's depth (see json-depth.ts).
        if (jsonTextDepth(line) > MAX_JSON_DEPTH + 1) {
          const n = decoder.lineNumber + 1;
          throw new DomainError('DATA_TOO_DEEP', `line ${n}: the record nests deeper than ${MAX_JSON_DEPTH} levels of data`, { line: String(n), limit: String(MAX_JSON_DEPTH) });
        }
        const events = decoder.push(line);
        if (!engine && decoder.header) {
          const header = decoder.header;
          id = opts.id || header.id;
          this.#checkId(id);
          const finalHeader: SessionHeader = { ...header, id };
          const rec: NewSession = {
            header: toStored(ctx.tenant, finalHeader), labels: opts.labels ?? {}, tenant: ctx.tenant, strict: opts.strict ?? false,
            pairingGuard: false, writer: randomUUID(), pending: { owner: this.instanceId, leaseUntil: this.clock() + IMPORT_LEASE_MS },
          };
          await this.#create(ctx, id, rec, []);
          created = true;
          engine = SessionEngine.create({ strict: opts.strict ?? false });
        }
        for (const e of events) {
          pending.push(e);
          lineOf.push(decoder.lineNumber);
        }
        if (pending.length >= STORE_READ_BATCH) await flush();
      }
    };
    try {
      const feed = async (chunk: Uint8Array): Promise<void> => {
        let text: string;
        try {
          text = utf8.decode(chunk, { stream: true });
        } catch {
          throw new DomainError('JSONL_INVALID', 'the file is not valid UTF-8', {});
        }
        await lines(splitter.push(text));
      };
      // The zstd magic is checked on the first 4 bytes however the client chunked them.
      let head: Uint8Array = new Uint8Array(0);
      for await (const part of chunks) {
        if (!first) {
          await feed(part);
          continue;
        }
        head = head.length === 0 ? part : Buffer.concat([head, part]);
        if (head.length < 4) continue;
        assertUncompressed(head);
        first = false;
        await feed(head);
      }
      if (first && head.length > 0) await feed(head);
      let rest: string;
      try {
        rest = utf8.decode(); // flush: a truncated UTF-8 sequence at the very end is an error too
      } catch {
        throw new DomainError('JSONL_INVALID', 'the file is not valid UTF-8 (it ends inside a character)', {});
      }
      if (rest) await lines(splitter.push(rest));
      await lines(splitter.end());
      decoder.finish();
      await flush();
      await this.store.publishSession(this.storageKey(ctx, id), this.instanceId);
    } catch (e) {
      if (created) await this.store.deleteSession(this.storageKey(ctx, id)).catch(() => undefined);
      throw e;
    }
    return this.getSession(ctx, id);
  }

  /** Exports a session as reference JSONL lines (packed chunk rows unless `unpacked`). */
  async *exportJsonl(ctx: CallContext, id: string, opts: { unpacked?: boolean } = {}): AsyncGenerator<string[]> {
    const rec = await this.#record(ctx, id);
    const enc = new JsonlEncoder(rec.header, { packChunks: !opts.unpacked });
    yield [enc.headerLine()];
    for await (const batch of this.store.scanEvents(this.storageKey(ctx, id), 0, STORE_READ_BATCH)) {
      const out: string[] = [];
      for (const e of batch) for (const l of enc.push(e)) out.push(l);
      if (out.length > 0) yield out;
    }
    const tail = enc.end();
    if (tail.length > 0) yield tail;
  }

  // ---- lifecycle / internals ------------------------------------------------------------

  /** Number of hot sessions (metrics). */
  get cachedSessions(): number {
    return this.#cache.size;
  }

  /** Stops serving and closes the store after in-flight writes finish. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const h of this.#cache.values()) await h.read(() => undefined);
    await this.feed.close();
    await this.store.close();
  }

  #view(h: SessionHandle): SessionView {
    return {
      record: h.record,
      surfaceLength: h.engine.surfaceLength,
      headSeq: h.engine.eventCount > 0 ? h.engine.nextSeq - 1 : undefined,
      eventCount: h.engine.eventCount,
    };
  }

  /** The session's record (header unscoped), or NOT_FOUND (also for another tenant's session). */
  async #record(ctx: CallContext, id: string): Promise<SessionRecord> {
    const rec = await this.store.getSession(this.storageKey(ctx, id));
    if (!rec || rec.tenant !== ctx.tenant) throw notFound(id);
    return fromStored(rec);
  }

  /** Runs `fn` on a hot, valid, up-to-date handle's committed state. */
  async #withRead<T>(ctx: CallContext, id: string, fn: (h: SessionHandle) => T): Promise<T> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const h = await this.#handle(ctx, id);
      const out = await h.read(() => (h.valid ? { v: fn(h) } : undefined));
      if (out) return out.v;
    }
    throw new DomainError('CONFLICT_RETRIES_EXHAUSTED', `session ${id} kept moving; retry`, { sessionId: id });
  }

  /**
   * The hot handle of a session, loading it on a miss. The store's head is checked on every call
   * that finds the session idle (one primary-key read) so that writes by other replicas are never
   * hidden by the cache.
   */
  async #handle(ctx: CallContext, id: string): Promise<SessionHandle> {
    if (this.#closed) throw new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; retry on another replica or later', {});
    const key = this.storageKey(ctx, id);
    const cached = this.#cache.get(key);
    if (cached && cached.valid) {
      if (cached.record.tenant !== ctx.tenant) throw notFound(id);
      if (!cached.busy) {
        const rec = await this.store.getSession(key);
        if (!rec) {
          this.#drop(key);
          throw notFound(id);
        }
        // Another writer appended, or deleted and re-created the session: reload.
        // (Every committed write leaves a new writer token, so the token alone tells.)
        if (cached.valid && !cached.busy && (rec.writer !== cached.writer || rec.nextSeq !== cached.engine.nextSeq)) this.#invalidate(cached);
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

  async #load(key: string, id: string): Promise<SessionHandle> {
    const stored = await this.store.getSession(key);
    if (!stored) throw notFound(id);
    const rec = fromStored(stored);
    const engine = SessionEngine.create({ strict: rec.strict });
    if (rec.strict) {
      const all: SessionEvent[] = [];
      for await (const b of this.store.scanEvents(key, 0, STORE_READ_BATCH)) all.push(...b);
      engine.loadEvents(all);
    } else {
      engine.loadStructural(await this.store.readStructure(key, 0));
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
      this.#drop(id);
    }
  }

  #invalidate(h: SessionHandle): void {
    h.valid = false;
    if (this.#cache.get(h.id) === h) this.#drop(h.id);
  }

  #drop(id: string): void {
    const h = this.#cache.get(id);
    if (!h) return;
    h.valid = false;
    this.#cache.delete(id);
    this.#cachedEvents -= h.engine.eventCount;
  }

  #checkId(id: string): void {
    if (!SESSION_ID_RE.test(id)) {
      throw new DomainError('INVALID_SESSION_ID', `session id ${JSON.stringify(id.slice(0, 140))} must be 1-128 characters of [A-Za-z0-9._:-]`, { field: 'session_id' });
    }
  }

  #header(h: { id: string; createdAt: number; cwd?: string; origin?: string; delegationDepth?: number; agentPreset?: string }): SessionHeader {
    const out: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = { version: SESSION_FORMAT_VERSION, id: h.id, createdAt: h.createdAt };
    if (h.cwd !== undefined) {
      if (!h.cwd.startsWith('/')) throw new DomainError('HEADER_INVALID', `cwd ${JSON.stringify(h.cwd)} must be an absolute path`, { field: 'cwd' });
      out.cwd = h.cwd;
    }
    if (h.origin !== undefined) {
      if (h.origin !== 'subagent') throw new DomainError('HEADER_INVALID', `origin ${JSON.stringify(h.origin)} is not supported; the only origin is "subagent"`, { field: 'origin' });
      out.origin = 'subagent';
    }
    // The reference's JSONL header always carries delegationDepth (0 for a top-level session).
    out.delegationDepth = h.delegationDepth ?? 0;
    if (h.agentPreset !== undefined) out.agentPreset = h.agentPreset;
    return out;
  }

  #pageSize(requested: number | undefined): number {
    if (!requested) return this.limits.defaultPageSize;
    if (requested > this.limits.maxPageSize) {
      throw new DomainError('PAGE_SIZE_TOO_LARGE', `page_size ${requested} exceeds the limit ${this.limits.maxPageSize}`, {
        field: 'page_size', limitName: 'max_page_size', limit: String(this.limits.maxPageSize), actual: String(requested),
      });
    }
    return requested;
  }

  #checkEventSizes(candidates: readonly CandidateEvent[], sizes: readonly number[] | undefined): void {
    for (let i = 0; i < candidates.length; i++) {
      const size = sizes?.[i] ?? JSON.stringify(candidates[i]?.data ?? null).length;
      if (size > this.limits.maxEventBytes) {
        throw new DomainError('EVENT_TOO_LARGE', `event ${i} has ${size} bytes of data; the limit is ${this.limits.maxEventBytes}`, {
          limitName: 'max_event_bytes', limit: String(this.limits.maxEventBytes), actual: String(size),
        }, i);
      }
    }
  }

  /** Creates a session in the store with the tenant quotas checked in its transaction. */
  async #create(ctx: CallContext, id: string, rec: NewSession, events: readonly SessionEvent[]): Promise<void> {
    const outcome = await this.store.createSession(rec, events, { maxSessions: this.limits.tenantMaxSessions, maxBytes: this.limits.tenantMaxBytes });
    if (outcome.kind === 'created') return;
    if (outcome.kind === 'exists') {
      throw new DomainError('SESSION_ALREADY_EXISTS', `session ${JSON.stringify(id)} already exists`, { sessionId: id });
    }
    throw quotaError(ctx.tenant, outcome);
  }
}
