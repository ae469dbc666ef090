/**
 * The app side of the tool-pairing guard (domain/tool-pairing.ts): which batches are checked, and
 * the per-session index of pairing facts the engine checks against.
 *
 * A session with the guard on (or a server-built compaction/prune batch, which is always checked)
 * has its batches with a replace checked. The index is hydrated on the first such batch from the
 * data of the surface events only (one `getEvents` of the surface, never a log scan), then kept
 * per planned batch in the write pipeline, exactly like the engine (so pipelined batches see each
 * other). It lives on the hot session's handle (SessionHandle.pairing): a dropped handle drops it.
 */
import type { CandidateEvent, SessionEvent } from '../domain/event.js';
import type { BatchPlan } from '../domain/session-engine.js';
import { PairingIndex, type OpenCalls, type PairingInfo } from '../domain/tool-pairing.js';
import type { SessionHandle } from './session-handle.js';
import type { SessionStore } from './store-port.js';

/** True iff some candidate carries a replace surfaceOp (only those batches can break pairing). */
export function batchHasReplace(candidates: readonly CandidateEvent[]): boolean {
  return candidates.some((c) => typeof c.surfaceOp === 'object' && c.surfaceOp !== null);
}

/** True iff some candidate is appended to the surface (`surfaceOp: "append"`). */
export function batchHasSurfaceAppend(candidates: readonly CandidateEvent[]): boolean {
  return candidates.some((c) => c.surfaceOp === 'append');
}

/** Whether the appends of this batch are checked (TOOL_RESULT_ORPHANED / TOOL_RESULT_MISSING): the session's guard only. */
export function appendGuardApplies(handle: SessionHandle, candidates: readonly CandidateEvent[]): boolean {
  return handle.record.pairingGuard && batchHasSurfaceAppend(candidates);
}

/**
 * Whether this batch is checked: its replaces with the session's guard or `force` (server-built
 * batches), its appends with the session's guard.
 */
export function guardApplies(handle: SessionHandle, candidates: readonly CandidateEvent[], force: boolean | undefined): boolean {
  return ((force === true || handle.record.pairingGuard) && batchHasReplace(candidates)) || appendGuardApplies(handle, candidates);
}

/**
 * Hydrates the handle's pairing index from the committed surface when it is missing or behind.
 * Waits for the session's in-flight writes (reads committed state only).
 */
export async function ensurePairingIndex(store: SessionStore, handle: SessionHandle): Promise<void> {
  const have = handle.pairing;
  // In step with the engine (kept per planned batch): no wait, so pipelined appends of a guarded
  // session stay pipelined (handle.read would wait for the batches in flight).
  if (have !== undefined && have.nextSeq === handle.engine.nextSeq) return;
  const snap = await handle.read(() => (have?.nextSeq === handle.engine.nextSeq ? undefined : { seqs: handle.engine.surface(), nextSeq: handle.engine.nextSeq }));
  if (snap === undefined) return;
  const events: SessionEvent[] = snap.seqs.length === 0 ? [] : await store.getEvents(handle.id, snap.seqs);
  await handle.read(() => {
    if (!handle.valid || handle.engine.nextSeq !== snap.nextSeq) return;
    const index = new PairingIndex(handle.sessionId);
    index.hydrate(events, snap.nextSeq);
    handle.pairing = index;
  });
}

/** What the engine checks a batch against (PlanContext.pairing and PlanContext.openCalls). */
export interface PairingCheck {
  readonly pairing: (seq: number) => PairingInfo;
  readonly openCalls: (() => OpenCalls) | undefined;
}

/**
 * The facts the engine checks a batch against, 'stale' when the index does not reflect the
 * engine (re-hydrate and retry), or undefined when the batch is not checked.
 */
export function pairingLookup(handle: SessionHandle, candidates: readonly CandidateEvent[], force: boolean | undefined): PairingCheck | 'stale' | undefined {
  if (!guardApplies(handle, candidates, force)) return undefined;
  const index = handle.pairing;
  if (index === undefined || index.nextSeq !== handle.engine.nextSeq) return 'stale';
  const engine = handle.engine;
  return { pairing: index.lookup, openCalls: appendGuardApplies(handle, candidates) ? () => index.openCalls(() => engine.surface()) : undefined };
}

/** Keeps the index (if any) in step with a plan the engine just took. */
export function pairingPlanned(handle: SessionHandle, plan: BatchPlan): void {
  const index = handle.pairing;
  if (index !== undefined && !index.apply(plan)) handle.pairing = undefined;
}
