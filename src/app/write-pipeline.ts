/**
 * The write pipeline of one hot session: a batch is planned against the session's engine (which
 * runs ahead of the store: it already holds every planned batch) and handed to the store at once,
 * without waiting for earlier batches to commit (the store may group-commit them). Each batch is a
 * compare-and-set on the head and on the writer token of the batch it was planned on (see the
 * store port), so a batch behind one that failed never commits, whatever the call order.
 *
 * After a durable commit the message projection is kept in step and the batch is published to
 * local subscribers; any failed or refused batch drops the handle (its speculative engine state
 * is wrong) and the caller re-plans on a fresh load.
 */
import { randomUUID } from 'node:crypto';
import type { CandidateEvent, SessionEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { dataDependencies } from '../domain/replace-chains.js';
import type { BatchPlan } from '../domain/session-engine.js';
import { notFound, type AppendOptions, type AppendResult, type AppLimits, type AppLogger } from './app-types.js';
import type { ChangeFeed } from './change-feed.js';
import { pairingLookup, pairingPlanned } from './pairing-guard.js';
import { byteQuota, quotaError } from './quotas.js';
import type { SessionCache } from './session-cache.js';
import type { SessionHandle } from './session-handle.js';
import { type ByteQuota, type SessionStore } from './store-port.js';
import { utf8Length } from '../domain/utf8.js';

/** The batch must be planned again on a fresh load (another writer moved the session). */
export const RETRY = Symbol('retry');

/** Plans and writes batches of hot sessions. */
export class WritePipeline {
  constructor(
    private readonly store: SessionStore,
    private readonly cache: SessionCache,
    private readonly feed: ChangeFeed,
    private readonly limits: AppLimits,
    private readonly clock: () => number,
    private readonly log: AppLogger | undefined,
  ) {}

  /**
   * Plans `candidates` on the handle's engine and writes them; resolves once committed, or with
   * RETRY when the plan turned out to be based on a stale state.
   *
   * @param lookup data of earlier events the plan needs (prefetched from the store)
   */
  submit(handle: SessionHandle, candidates: readonly CandidateEvent[], opts: AppendOptions, key: string | undefined, hash: string, lookup: Map<number, SessionEvent>): Promise<AppendResult | typeof RETRY> {
    return new Promise((resolve, reject) => {
      handle.enqueue(() => {
        if (!handle.valid) {
          resolve(RETRY);
          return undefined;
        }
        const engine = handle.engine;
        const head = engine.nextSeq - 1;
        if (opts.expectedLastSeq !== undefined && opts.expectedLastSeq !== head) {
          // The head may still move back: batches planned ahead of this one and not settled yet
          // can fail (a pipelined writer's batch that counted on them failing, or not, gets its
          // answer from what they did). Plan again once they settled (RETRY waits for that).
          if (opts.expectedLastSeq < head && opts.expectedLastSeq >= handle.settledHead) {
            resolve(RETRY);
            return undefined;
          }
          reject(new DomainError('HEAD_MISMATCH',
            `expected_last_seq ${opts.expectedLastSeq} does not match the session head ${head}; re-read and retry`,
            { sessionId: handle.sessionId, expected: String(opts.expectedLastSeq), actual: String(head) }));
          return undefined;
        }
        // Data the plan needs (tool/result replace targets) may belong to batches planned but not
        // yet committed (pipelined), or may have been committed after the prefetch: take them
        // from the handle, or retry with a fresh prefetch.
        const need = (s: number): SessionEvent | undefined => lookup.get(s) ?? handle.plannedEvent(s);
        if (dataDependencies(engine, candidates).some((s) => need(s) === undefined)) {
          resolve(RETRY);
          return undefined;
        }
        // The tool-pairing guard's facts of the surface (pairing-guard.ts), kept per planned batch
        // like the engine; 'stale' when a batch planned since the prefetch moved the engine.
        const pairing = pairingLookup(handle, candidates, opts.pairingGuard);
        if (pairing === 'stale') {
          resolve(RETRY);
          return undefined;
        }
        let plan: BatchPlan;
        try {
          plan = engine.plan(candidates, { mode: 'append', now: this.clock, sessionId: handle.sessionId, lookup: need, pairing: pairing?.pairing, openCalls: pairing?.openCalls, parsedData: opts.parsedData });
        } catch (e) {
          reject(e);
          return undefined;
        }
        engine.commit(plan);
        pairingPlanned(handle, plan);
        // This batch's own surface length (later pipelined batches move the engine on).
        const surfaceLength = engine.surfaceLength;
        handle.addPlanned(plan.events);
        // The compare-and-set base: the token of the batch this plan sits on (committed or still
        // in flight); a failed base never stores its token, so this batch cannot commit either.
        const expectedWriter = handle.writer;
        const writer = randomUUID();
        handle.writer = writer;
        const quota = byteQuota(this.limits, handle.record.tenant);
        const written = this.store.append(handle.id, {
          expectedNextSeq: plan.baseNextSeq,
          expectedWriter,
          writer,
          events: plan.events,
          ...(plan.dataTexts ? { dataTexts: plan.dataTexts } : {}),
          surfaceLength,
          ...(key ? { idempotency: { key, requestHash: hash } } : {}),
          ...(quota ? { quota } : {}),
        });
        opts.onPlanned?.();
        return written.then(
          (outcome) => {
            handle.removePlanned(plan.events);
            if (outcome.kind === 'appended') {
              resolve({ seqs: plan.events.map((e) => e.seq), replayed: false, surfaceLength });
              this.#committed(handle, plan);
            } else {
              // Another writer moved the head, the key was used meanwhile, or the quota refused
              // the batch: the speculative engine state is wrong; reload (and re-plan).
              this.cache.invalidate(handle);
              if (outcome.kind === 'not-found') reject(notFound(handle.sessionId));
              else if (outcome.kind === 'quota-exceeded') reject(quotaError(handle.record.tenant, outcome));
              else if (outcome.kind === 'conflict' && quota !== undefined) this.#overQuota(quota, plan).then((over) => (over ? reject(over) : resolve(RETRY)), reject);
              else resolve(RETRY);
            }
          },
          (err: unknown) => {
            handle.removePlanned(plan.events);
            this.cache.invalidate(handle);
            reject(err);
          },
        );
      });
    });
  }

  /**
   * A batch refused as a conflict under a byte quota: QUOTA_EXCEEDED when the tenant's stored
   * bytes plus the batch's would pass the quota (so it would be refused for the quota once
   * re-planned), else undefined (re-plan). Without this, the batches planned behind one the quota
   * refused (they name its writer token, which never committed) were re-planned until
   * CONFLICT_RETRIES_EXHAUSTED when many crossed the quota at once (issue #33 item 2).
   */
  async #overQuota(quota: ByteQuota, plan: BatchPlan): Promise<DomainError | undefined> {
    let bytes = 0;
    for (let i = 0; i < plan.events.length; i++) bytes += utf8Length(plan.dataTexts?.[i] ?? JSON.stringify(plan.events[i]!.data));
    if (bytes === 0) return undefined;
    const used = (await this.store.getTenantUsage(quota.tenant)).dataBytes;
    if (used + bytes <= quota.maxBytes) return undefined;
    return quotaError(quota.tenant, { kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: quota.maxBytes, actual: used + bytes });
  }

  /** After a durable commit: keep the projection in step and publish to subscribers. */
  #committed(handle: SessionHandle, plan: BatchPlan): void {
    this.cache.added(plan.events.length);
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
}
