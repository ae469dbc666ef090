/**
 * Builders and a tiny harness for the surface engine tests: an engine plus an in-memory event map
 * standing in for the store (so ctx.lookup works), and helpers asserting that a rejection carries
 * the right reason and index and leaves the engine untouched.
 */
import { expect } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent, SessionEvent } from '../../src/domain/event.js';
import { SessionEngine, type BatchPlan, type PlanContext, type PlanMode } from '../../src/domain/session-engine.js';

export type Op = 'append' | { op: 'replace'; start: number; end: number };

/** A replace op. */
export const rep = (start: number, end: number): Op => ({ op: 'replace', start, end });

/** A canonical user/message candidate. */
export function user(text: string, surfaceOp: unknown = 'append', extra: Record<string, unknown> = {}): CandidateEvent {
  return {
    type: 'user/message',
    data: { id: `u-${text}`, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
    surfaceOp,
    ...extra,
  };
}

/** A canonical assistant/message candidate. */
export function assistant(text: string, extra: Record<string, unknown> = {}, turn = 1, step = 1): CandidateEvent {
  return {
    type: 'assistant/message',
    data: {
      turn,
      step,
      message: {
        id: `a-${text}`,
        role: 'assistant',
        content: text === '' ? [] : [{ type: 'text', text }],
        source: { kind: 'model', provider: 'p', model: 'm' },
      },
      usage: { inputTokens: 1, outputTokens: 1 },
    },
    surfaceOp: 'append',
    ...extra,
  };
}

/** Canonical tool/result data. */
export function toolResultData(callId: string, text: string, opts: { id?: string; isError?: boolean; turn?: number; step?: number } = {}): Record<string, unknown> {
  const block: Record<string, unknown> = { type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text }] };
  if (opts.isError !== undefined) block['isError'] = opts.isError;
  return {
    turn: opts.turn ?? 1,
    step: opts.step ?? 1,
    message: { id: opts.id ?? `r-${callId}`, role: 'user', source: { kind: 'tool', callId }, content: [block] },
  };
}

/** A canonical tool/result candidate. */
export function toolResult(callId: string, text: string, extra: Record<string, unknown> = {}, opts: { id?: string; isError?: boolean } = {}): CandidateEvent {
  return { type: 'tool/result', data: toolResultData(callId, text, opts), surfaceOp: 'append', ...extra };
}

/** A log-only event candidate. */
export function logEvent(type: string, data: unknown = {}, extra: Record<string, unknown> = {}): CandidateEvent {
  return { type, data, ...extra };
}

/** Observable engine state, to prove a rejection changed nothing. */
export function snapshot(engine: SessionEngine): unknown {
  return {
    nextSeq: engine.nextSeq,
    eventCount: engine.eventCount,
    replaceGeneration: engine.replaceGeneration,
    surfaceLength: engine.surfaceLength,
    surface: engine.surface(),
  };
}

/** An engine plus the committed events (the store stand-in). */
export class Harness {
  readonly engine: SessionEngine;
  readonly events = new Map<number, SessionEvent>();
  readonly log: SessionEvent[] = [];
  time = 1_000;
  /** Import mode only: accept seq gaps (PlanContext.allowSeqGaps). */
  allowSeqGaps = false;

  constructor(opts: { strict?: boolean } = {}) {
    this.engine = SessionEngine.create(opts);
  }

  ctx(mode: PlanMode = 'append'): PlanContext {
    return { mode, now: () => this.time, sessionId: 'sess-1', lookup: (seq) => this.events.get(seq), allowSeqGaps: this.allowSeqGaps };
  }

  plan(candidates: readonly CandidateEvent[], mode: PlanMode = 'append'): BatchPlan {
    return this.engine.plan(candidates, this.ctx(mode));
  }

  commit(plan: BatchPlan): BatchPlan {
    this.engine.commit(plan);
    for (const e of plan.events) {
      this.events.set(e.seq, e);
      this.log.push(e);
    }
    return plan;
  }

  /** Plans and commits; returns the plan. */
  add(candidates: readonly CandidateEvent[] | CandidateEvent, mode: PlanMode = 'append'): BatchPlan {
    return this.commit(this.plan(Array.isArray(candidates) ? candidates : [candidates as CandidateEvent], mode));
  }

  /** Appends one candidate and returns its seq. */
  seqOf(candidate: CandidateEvent): number {
    const p = this.add(candidate);
    return (p.events[0] as SessionEvent).seq;
  }

  /** Asserts that planning `candidates` fails with `reason` at `index` and changes nothing. */
  expectReject(candidates: readonly CandidateEvent[] | CandidateEvent, reason: string, index = -1, mode: PlanMode = 'append'): DomainError {
    const list = Array.isArray(candidates) ? candidates : [candidates as CandidateEvent];
    const at = index < 0 ? list.length - 1 : index;
    const before = snapshot(this.engine);
    let err: unknown;
    try {
      this.engine.plan(list, this.ctx(mode));
    } catch (e) {
      err = e;
    }
    expect(err, `expected ${reason}`).toBeInstanceOf(DomainError);
    const de = err as DomainError;
    expect({ reason: de.reason, index: de.index }, de.message).toEqual({ reason, index: at });
    expect(de.metadata['index']).toBe(String(at));
    expect(snapshot(this.engine)).toEqual(before);
    return de;
  }
}
