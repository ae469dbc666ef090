/** Strict mode (dsh-semantics 2.6): one test per INV_* reason, rejecting next to accepting. */
import { beforeEach, describe, expect, it } from 'vitest';
import type { CandidateEvent } from '../../src/domain/event.js';
import { Harness, assistant, logEvent, rep, toolResult, user } from '../support/engine-harness.js';

const turnStart = (turn: number): CandidateEvent => logEvent('turn/start', { turn });
const turnEnd = (turn: number): CandidateEvent => logEvent('turn/end', { turn, reason: { kind: 'completed' } });
const stepStart = (turn: number, step: number): CandidateEvent => logEvent('step/start', { turn, step });
const stepEnd = (turn: number, step: number): CandidateEvent => logEvent('step/end', { turn, step });
const call = (callId: string, turn = 1, step = 1): CandidateEvent => logEvent('tool/call', { turn, step, callId, name: 'bash', arguments: '{}' });

let h: Harness;
beforeEach(() => {
  h = new Harness({ strict: true });
});

describe('strict mode', () => {
  it('a well-formed turn passes and non-strict engines accept anything structural', () => {
    h.add([turnStart(1), user('q'), stepStart(1, 1), logEvent('request/header', { header: { config: { provider: 'p', model: 'm' } }, reason: 'initial' }), logEvent('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'finish', reason: 'stop' } }), assistant('a', { sourceEventSeqs: [4] }), call('c'), toolResult('c', 'out', { sourceEventSeqs: [6] }), stepEnd(1, 1), turnEnd(1), turnStart(2)]);
    expect(h.engine.nextSeq).toBe(11);
    const lax = new Harness();
    lax.add([turnEnd(7), stepEnd(1, 1)]);
  });

  it('INV_TURN_ALREADY_OPEN: turn/start while a turn is open', () => {
    h.add(turnStart(1));
    h.expectReject([user('x'), turnStart(2)], 'INV_TURN_ALREADY_OPEN', 1);
    h.add([turnEnd(1), turnStart(2)]);
  });

  it('INV_TURN_NUMBER: turn/start that is not the next number', () => {
    h.expectReject([turnStart(2)], 'INV_TURN_NUMBER', 0);
    h.add([turnStart(1), turnEnd(1)]);
    h.expectReject([turnStart(1)], 'INV_TURN_NUMBER', 0);
    h.add(turnStart(2));
  });

  it('INV_TURN_NOT_OPEN: turn/end or step/start outside the open turn', () => {
    h.expectReject([turnEnd(1)], 'INV_TURN_NOT_OPEN', 0);
    h.expectReject([stepStart(1, 1)], 'INV_TURN_NOT_OPEN', 0);
    h.add(turnStart(1));
    h.expectReject([turnEnd(2)], 'INV_TURN_NOT_OPEN', 0);
    h.expectReject([stepStart(2, 1)], 'INV_TURN_NOT_OPEN', 0);
    h.add([stepStart(1, 1), stepEnd(1, 1), turnEnd(1)]);
  });

  it('INV_STEP_OPEN: turn/end or step/start while a step is open', () => {
    h.add([turnStart(1), stepStart(1, 1)]);
    h.expectReject([turnEnd(1)], 'INV_STEP_OPEN', 0);
    h.expectReject([stepStart(1, 2)], 'INV_STEP_OPEN', 0);
    h.add([stepEnd(1, 1), stepStart(1, 2)]);
  });

  it('INV_STEP_NUMBER: steps count 1, 2, … and restart per turn', () => {
    h.add(turnStart(1));
    h.expectReject([stepStart(1, 2)], 'INV_STEP_NUMBER', 0);
    h.add([stepStart(1, 1), stepEnd(1, 1)]);
    h.expectReject([stepStart(1, 1)], 'INV_STEP_NUMBER', 0);
    h.add([stepStart(1, 2), stepEnd(1, 2), turnEnd(1), turnStart(2), stepStart(2, 1)]);
  });

  it('INV_NOT_OPEN_STEP: chunks, assistant messages, tool calls, appended results and step/end must name the open step', () => {
    h.add([turnStart(1), stepStart(1, 1)]);
    h.expectReject([logEvent('assistant/chunk', { turn: 1, step: 2, chunk: {} })], 'INV_NOT_OPEN_STEP', 0);
    h.expectReject([assistant('a', {}, 1, 2)], 'INV_NOT_OPEN_STEP', 0);
    h.expectReject([call('c', 2, 1)], 'INV_NOT_OPEN_STEP', 0);
    h.expectReject([stepEnd(1, 2)], 'INV_NOT_OPEN_STEP', 0);
    h.add([call('c'), stepEnd(1, 1)]);
    h.expectReject([toolResult('c', 'late')], 'INV_NOT_OPEN_STEP', 0);
    h.add([stepStart(1, 2), assistant('b', {}, 1, 2)]);
  });

  it('INV_RESULT_WITHOUT_CALL: an appended result needs a pending call of the same step, except a not-started closer', () => {
    h.add([turnStart(1), stepStart(1, 1), call('c')]);
    h.expectReject([toolResult('zzz', 'x')], 'INV_RESULT_WITHOUT_CALL', 0);
    h.add(toolResult('c', 'x'));
    h.expectReject([toolResult('c', 'again')], 'INV_RESULT_WITHOUT_CALL', 0);
    const notStarted: CandidateEvent = { ...toolResult('n', 'never started', {}, { isError: true }) };
    (notStarted.data as Record<string, unknown>)['error'] = { name: 'ToolNotStartedError', code: 'TOOL_NOT_STARTED' };
    h.add(notStarted);
  });

  it('INV_OUTSIDE_TURN: tool/result replacements, todo/write, request/header and request/context need an open turn', () => {
    h.add([turnStart(1), stepStart(1, 1), call('c'), toolResult('c', 'long'), stepEnd(1, 1), turnEnd(1)]);
    h.expectReject([toolResult('c', 'short', { surfaceOp: rep(3, 3), sourceEventSeqs: [3] })], 'INV_OUTSIDE_TURN', 0);
    h.expectReject([logEvent('todo/write', { todos: [] })], 'INV_OUTSIDE_TURN', 0);
    h.expectReject([logEvent('request/header', { header: { config: { provider: 'p', model: 'm' } }, reason: 'change' })], 'INV_OUTSIDE_TURN', 0);
    h.expectReject([logEvent('request/context', { provider: 'p', model: 'm' })], 'INV_OUTSIDE_TURN', 0);
    h.add([user('free'), logEvent('session/end-seed'), turnStart(2), toolResult('c', 'short', { surfaceOp: rep(3, 3), sourceEventSeqs: [3] }), logEvent('todo/write', { todos: [] })]);
  });

  it('INV_SEQ_ORDER guards strictly increasing seqs (unreachable after acceptance, so only reachable through the trace directly)', async () => {
    const { InvariantTrace } = await import('../../src/domain/invariants.js');
    const t = new InvariantTrace();
    t.check({ type: 'x', seq: 5, time: 0, data: {} });
    expect(() => t.check({ type: 'x', seq: 5, time: 0, data: {} })).toThrow(expect.objectContaining({ reason: 'INV_SEQ_ORDER' }) as Error);
  });

  it('acceptance rules are checked before invariants', () => {
    h.expectReject([logEvent('turn/end', { turn: 9 }, { surfaceOp: 'append' })], 'SURFACE_OP_FORBIDDEN', 0);
  });
});
