/**
 * The append use cases: AppendEvents (atomic batches with idempotency keys and optimistic
 * concurrency) and crash repair (closers for interrupted turns, appended conditionally).
 *
 * An append is planned against the hot session's engine and written with a condition on what it
 * was planned against (write-pipeline.ts); when another writer moved the session the request is
 * re-planned on a fresh load (bounded retries). A request with an idempotency key that is already
 * stored answers the stored result (seqs and the original surface length), from any process.
 */
import { createHash } from 'node:crypto';
import type { CandidateEvent, SessionEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { dataDependencies } from '../domain/replace-chains.js';
import { interruptedTurnClosers } from '../domain/repair.js';
import {
  MAX_ATTEMPTS, STORE_READ_BATCH, checkEventSizes, retriesExhausted,
  type AppendOptions, type AppendResult, type AppLimits, type CallContext,
} from './app-types.js';
import type { SessionCache } from './session-cache.js';
import type { IdempotentResult, SessionStore } from './store-port.js';
import { storageKey } from './tenant-scope.js';
import { RETRY, type WritePipeline } from './write-pipeline.js';
import { checkAppendOptions, checkEventTypes } from './input-limits.js';
import { ensurePairingIndex, guardApplies } from './pairing-guard.js';
import { resolveBlobRefs } from './blob-refs.js';

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
export function requestHash(candidates: readonly CandidateEvent[]): string {
  const h = createHash('sha256');
  for (const c of candidates) h.update(canonicalJson(c)).update('\n');
  return h.digest('hex');
}

/** Canonical hash of a server-built request (`kind` names the RPC) for its idempotency record. */
export function requestBodyHash(kind: string, body: unknown): string {
  return createHash('sha256').update(kind).update('\n').update(canonicalJson(body)).digest('hex');
}

/** AppendEvents and RepairSession. */
export class AppendUseCase {
  /**
   * The keyed attempts in flight, by session and key. Not a Map: V8 links a Map's replaced tables,
   * so one set and cleared per call promotes what it holds (bench/README.md, sixth round).
   */
  readonly #inflightKeys: Record<string, Promise<unknown> | undefined> = Object.create(null) as Record<string, Promise<unknown> | undefined>;

  constructor(
    private readonly store: SessionStore,
    private readonly cache: SessionCache,
    private readonly pipeline: WritePipeline,
    private readonly limits: AppLimits,
  ) {}

  /** Appends a batch atomically. */
  async append(ctx: CallContext, sessionId: string, candidates: readonly CandidateEvent[], opts: AppendOptions = {}): Promise<AppendResult> {
    if (candidates.length === 0) throw new DomainError('BATCH_EMPTY', 'the batch has no events; send at least one', {});
    if (candidates.length > this.limits.maxBatchEvents) {
      throw new DomainError('BATCH_TOO_LARGE', `the batch has ${candidates.length} events; the limit is ${this.limits.maxBatchEvents}`, {
        limitName: 'max_batch_events', limit: String(this.limits.maxBatchEvents), actual: String(candidates.length),
      });
    }
    checkEventSizes(this.limits, candidates, opts.dataBytes);
    checkEventTypes(candidates);
    checkAppendOptions(opts);
    if (opts.parsedData !== undefined && opts.parsedData.length !== candidates.length) {
      // A caller's bug, not a client's: the texts would be stored for the wrong events.
      throw new Error(`AppendOptions.parsedData has ${opts.parsedData.length} entries for ${candidates.length} candidates; give one per candidate (undefined when not parsed here)`);
    }
    const key = opts.idempotencyKey || undefined;
    const hash = key ? (opts.requestHash ?? requestHash(candidates)) : '';
    // References to the tenant's blobs (issue #39) stand for their content from here on.
    const resolved = await resolveBlobRefs(this.store, ctx.tenant, candidates, opts);
    if (resolved !== undefined) {
      candidates = resolved.candidates;
      opts = resolved.opts;
      checkEventSizes(this.limits, candidates, opts.dataBytes);
    }
    // Appends plan on the cached state without re-reading the session row (one store round trip
    // less per append); a rejected plan re-checks it once, since the rejection may only mean that
    // another writer moved the session (conflicts need no check: the write is conditional).
    let rechecked = false;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      if (attempt > 0 && opts.retryAfter !== undefined) await opts.retryAfter.catch(() => undefined);
      const handle = await this.cache.handle(ctx, sessionId, { verify: false });
      const inflightKey = key ? `${handle.id}\0${key}` : '';
      if (key) {
        const inflight = this.#inflightKeys[inflightKey];
        if (inflight) {
          await inflight.catch(() => undefined);
          continue;
        }
        const stored = await this.store.getIdempotent(handle.id, key);
        if (stored) return replayed(sessionId, key, stored, hash);
      }
      if (guardApplies(handle, candidates, opts.pairingGuard)) await ensurePairingIndex(this.store, handle);
      const deps = dataDependencies(handle.engine, candidates);
      const lookup = new Map<number, SessionEvent>();
      if (deps.length > 0) for (const e of await this.store.getEvents(handle.id, deps)) lookup.set(e.seq, e);
      const attemptPromise = this.pipeline.submit(handle, candidates, opts, key, hash, lookup);
      if (key) {
        this.#inflightKeys[inflightKey] = attemptPromise;
        void attemptPromise.finally(() => delete this.#inflightKeys[inflightKey]).catch(() => undefined);
      }
      let result: Awaited<typeof attemptPromise>;
      try {
        result = await attemptPromise;
      } catch (e) {
        if (e instanceof DomainError && !rechecked) {
          rechecked = true;
          if (await this.cache.moved(handle)) continue;
        }
        throw e;
      }
      if (result !== RETRY) return result;
      // Let this session's in-flight writes settle before trying again (no busy spinning).
      await handle.read(() => undefined);
    }
    throw retriesExhausted(sessionId, 'retry the request');
  }

  /** Appends crash-repair closers; idempotent. */
  async repair(ctx: CallContext, id: string): Promise<SessionEvent[]> {
    const key = storageKey(ctx.tenant, id);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // The committed head (waits for this session's in-flight writes), so that concurrent
      // repairs see each other's closers instead of spinning on HEAD_MISMATCH.
      const nextSeq = await this.cache.withRead(ctx, id, (h) => h.engine.nextSeq);
      // The repair scan resets at every turn/start, so the log from the last one is enough.
      const lastStart = await this.store.readEvents(key, { fromSeq: Math.max(nextSeq - 1, 0), direction: 'backward', limit: 1, types: ['turn/start'] });
      const from = lastStart[0]?.seq ?? 0;
      const tail: SessionEvent[] = [];
      for await (const batch of this.store.scanEvents(key, from, STORE_READ_BATCH)) tail.push(...batch);
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
    throw retriesExhausted(id, 'retry the repair');
  }
}

function replayed(sessionId: string, key: string, stored: IdempotentResult, hash: string): AppendResult {
  if (stored.requestHash !== hash) {
    throw new DomainError('IDEMPOTENCY_KEY_REUSED',
      `idempotency key ${JSON.stringify(key)} was already used with different events; use a new key for a new request`,
      { sessionId, idempotencyKey: key });
  }
  return { seqs: [...stored.seqs], replayed: true, surfaceLength: stored.surfaceLength };
}
