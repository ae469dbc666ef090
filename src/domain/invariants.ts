/**
 * Strict mode: the reference's optional invariant companion (dsh-semantics 2.6), enabled per
 * session. It is not part of acceptance: the engine checks it in `plan()` after every acceptance
 * rule of an event passed, against a per-session trace of turns, steps and pending tool calls.
 *
 * | Reason | Raised when |
 * |---|---|
 * | `INV_SEQ_ORDER` | an event's seq is not greater than the previous event's seq (cannot happen after acceptance; kept as a guard) |
 * | `INV_TURN_ALREADY_OPEN` | `turn/start` while a turn is open |
 * | `INV_TURN_NUMBER` | `turn/start` whose `turn` is not the previous turn number + 1 (the first turn is 1) |
 * | `INV_TURN_NOT_OPEN` | `turn/end` or `step/start` when no turn is open or its `turn` is not the open turn |
 * | `INV_STEP_OPEN` | `turn/end` while a step is open, or `step/start` while a step is open |
 * | `INV_STEP_NUMBER` | `step/start` whose `step` is not the previous step of the turn + 1 (steps restart at 1 per turn) |
 * | `INV_NOT_OPEN_STEP` | `step/end`, `assistant/chunk`, `assistant/message`, `tool/call` or an appended `tool/result` whose `turn`/`step` are not the open turn and step |
 * | `INV_RESULT_WITHOUT_CALL` | an appended `tool/result` whose `callId` is not pending from a `tool/call` of the same step (a synthetic not-started result, `isError: true` with `error.code === "TOOL_NOT_STARTED"`, is exempt) |
 * | `INV_OUTSIDE_TURN` | a `tool/result` replacement, `todo/write`, `request/header` or `request/context` while no turn is open |
 *
 * `user/message`, `session/end-seed` and every other type are unconstrained. A `tool/call` adds its
 * `callId` to the pending set of the step; an appended `tool/result` removes it; `step/end`,
 * `turn/start` and `turn/end` clear it.
 */
import { DomainError } from './errors.js';
import type { Json, SessionEvent } from './event.js';
import { isJsonObject } from './json.js';
import { messageOf } from './message-view.js';
import { Reason } from './reasons.js';

function field(data: Json, key: string): Json | undefined {
  return isJsonObject(data) ? data[key] : undefined;
}

function fail(reason: string, event: SessionEvent, message: string): DomainError {
  return new DomainError(reason, `${event.type} at seq ${event.seq} breaks a strict-mode invariant: ${message}`, {
    seq: String(event.seq),
    type: event.type,
  });
}

/** The per-session trace of strict mode. */
export class InvariantTrace {
  private lastSeq = -1;
  private turn: number | null = null;
  private lastTurn = 0;
  private step: number | null = null;
  private lastStep = 0;
  private pending = new Set<string>();

  /** An independent copy (plans check against a copy). */
  clone(): InvariantTrace {
    const t = new InvariantTrace();
    t.lastSeq = this.lastSeq;
    t.turn = this.turn;
    t.lastTurn = this.lastTurn;
    t.step = this.step;
    t.lastStep = this.lastStep;
    t.pending = new Set(this.pending);
    return t;
  }

  /**
   * Checks `event` against the trace and, if it passes, records it.
   *
   * @throws DomainError with an `INV_*` reason (see the module table); the trace is unchanged then
   */
  check(event: SessionEvent): void {
    if (event.seq <= this.lastSeq) throw fail(Reason.INV_SEQ_ORDER, event, `seq must be greater than ${this.lastSeq}`);
    const d = event.data;
    const inStep = (): boolean =>
      this.turn !== null && this.step !== null && field(d, 'turn') === this.turn && field(d, 'step') === this.step;
    const openStep = (): string => (this.turn === null ? 'no turn is open' : this.step === null ? `no step of turn ${this.turn} is open` : `the open step is turn ${this.turn} step ${this.step}`);
    switch (event.type) {
      case 'turn/start': {
        if (this.turn !== null) throw fail(Reason.INV_TURN_ALREADY_OPEN, event, `turn ${this.turn} is still open; end it first`);
        const n = field(d, 'turn');
        if (n !== this.lastTurn + 1) throw fail(Reason.INV_TURN_NUMBER, event, `expected turn ${this.lastTurn + 1}, got ${JSON.stringify(n)}`);
        break;
      }
      case 'turn/end':
        if (this.turn === null || field(d, 'turn') !== this.turn) throw fail(Reason.INV_TURN_NOT_OPEN, event, `it must name the open turn (${openStep()})`);
        if (this.step !== null) throw fail(Reason.INV_STEP_OPEN, event, `step ${this.step} is still open; end it first`);
        break;
      case 'step/start': {
        if (this.turn === null || field(d, 'turn') !== this.turn) throw fail(Reason.INV_TURN_NOT_OPEN, event, `it must be inside the open turn (${openStep()})`);
        if (this.step !== null) throw fail(Reason.INV_STEP_OPEN, event, `step ${this.step} is still open; end it first`);
        const n = field(d, 'step');
        if (n !== this.lastStep + 1) throw fail(Reason.INV_STEP_NUMBER, event, `expected step ${this.lastStep + 1}, got ${JSON.stringify(n)}`);
        break;
      }
      case 'step/end':
      case 'assistant/chunk':
      case 'assistant/message':
      case 'tool/call':
        if (!inStep()) throw fail(Reason.INV_NOT_OPEN_STEP, event, `it must name the open turn and step (${openStep()})`);
        break;
      case 'tool/result':
        if (event.surfaceOp === 'append') {
          if (!inStep()) throw fail(Reason.INV_NOT_OPEN_STEP, event, `it must name the open turn and step (${openStep()})`);
          const callId = resultCallId(event);
          if (!(callId !== undefined && this.pending.has(callId)) && !isNotStartedResult(event)) {
            throw fail(Reason.INV_RESULT_WITHOUT_CALL, event, `call ${JSON.stringify(callId)} has no pending tool/call in this step`);
          }
        } else if (this.turn === null) {
          throw fail(Reason.INV_OUTSIDE_TURN, event, 'a tool/result replacement needs an open turn');
        }
        break;
      case 'todo/write':
      case 'request/header':
      case 'request/context':
        if (this.turn === null) throw fail(Reason.INV_OUTSIDE_TURN, event, 'it needs an open turn');
        break;
      default:
        break;
    }
    this.apply(event);
  }

  /** Records `event` without checking (rebuilding the trace from a trusted log). */
  apply(event: SessionEvent): void {
    this.lastSeq = event.seq;
    const d = event.data;
    switch (event.type) {
      case 'turn/start': {
        const n = field(d, 'turn');
        this.turn = typeof n === 'number' ? n : this.lastTurn + 1;
        this.lastTurn = this.turn;
        this.step = null;
        this.lastStep = 0;
        this.pending.clear();
        break;
      }
      case 'turn/end':
        this.turn = null;
        this.step = null;
        this.pending.clear();
        break;
      case 'step/start': {
        const n = field(d, 'step');
        this.step = typeof n === 'number' ? n : this.lastStep + 1;
        this.lastStep = this.step;
        break;
      }
      case 'step/end':
        this.step = null;
        this.pending.clear();
        break;
      case 'tool/call': {
        const id = field(d, 'callId');
        if (typeof id === 'string') this.pending.add(id);
        break;
      }
      case 'tool/result':
        if (event.surfaceOp === 'append') {
          const id = resultCallId(event);
          if (id !== undefined) this.pending.delete(id);
        }
        break;
      default:
        break;
    }
  }
}

function resultCallId(event: SessionEvent): string | undefined {
  const m = messageOf(event, '-');
  const source = m?.['source'];
  const id = isJsonObject(source) ? source['callId'] : undefined;
  return typeof id === 'string' ? id : undefined;
}

function isNotStartedResult(event: SessionEvent): boolean {
  const m = messageOf(event, '-');
  const content = m?.['content'];
  const block = Array.isArray(content) ? content[0] : undefined;
  const error = field(event.data, 'error');
  return isJsonObject(block) && block['isError'] === true && isJsonObject(error) && error['code'] === 'TOOL_NOT_STARTED';
}
