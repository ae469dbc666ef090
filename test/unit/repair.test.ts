import { describe, expect, it } from 'vitest';
import type { CandidateEvent, Json, SessionEvent } from '../../src/domain/event.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import {
  interruptedTurnClosers,
  TOOL_NOT_STARTED_TEXT,
  TOOL_OUTCOME_UNKNOWN_TEXT,
} from '../../src/domain/repair.js';

/** Builds a contiguous log from [type, data, extra?] triples; time = 1000 + seq. */
function log(...specs: Array<[string, Json, Partial<SessionEvent>?]>): SessionEvent[] {
  return specs.map(([type, data, extra], seq) => ({ type, seq, time: 1000 + seq, data, ...(extra ?? {}) }));
}

const userMsg = (id: string): [string, Json, Partial<SessionEvent>] => [
  'user/message',
  { id, role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } },
  { surfaceOp: 'append' },
];
const assistant = (turn: number, step: number, callIds: string[], id = `a-${turn}-${step}`): [string, Json, Partial<SessionEvent>] => [
  'assistant/message',
  {
    turn,
    step,
    message: {
      id,
      role: 'assistant',
      content: [{ type: 'text', text: 'ok' }, ...callIds.map((c) => ({ type: 'tool-call', id: c, name: 'bash', arguments: '{}' }))],
      source: { kind: 'model', provider: 'p', model: 'm' },
    },
  },
  { surfaceOp: 'append', sourceEventSeqs: [] },
];
const toolCall = (turn: number, step: number, callId: string): [string, Json] => ['tool/call', { turn, step, callId, name: 'bash', arguments: '{}' }];
const toolResult = (turn: number, step: number, callId: string, citing?: number): [string, Json, Partial<SessionEvent>] => [
  'tool/result',
  {
    turn,
    step,
    message: {
      id: `r-${callId}`,
      role: 'user',
      source: { kind: 'tool', callId },
      content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: 'done' }] }],
    },
  },
  { surfaceOp: 'append', ...(citing === undefined ? {} : { sourceEventSeqs: [citing] }) },
];

function unknownCloser(seq: number, time: number, turn: number, step: number, callId: string, callSeq: number): SessionEvent {
  return {
    type: 'tool/result',
    seq,
    time,
    data: {
      turn,
      step,
      message: {
        id: `interrupted-tool-result-${callId}-${seq}`,
        role: 'user',
        source: { kind: 'tool', callId },
        content: [{ type: 'tool-result', toolCallId: callId, isError: true, content: [{ type: 'text', text: TOOL_OUTCOME_UNKNOWN_TEXT }] }],
      },
      error: { name: 'ToolOutcomeUnknownError', code: 'TOOL_OUTCOME_UNKNOWN' },
    },
    sourceEventSeqs: [callSeq],
    surfaceOp: 'append',
  };
}

function notStartedCloser(seq: number, time: number, turn: number, step: number, callId: string): SessionEvent {
  return {
    type: 'tool/result',
    seq,
    time,
    data: {
      turn,
      step,
      message: {
        id: `interrupted-tool-result-${callId}-${seq}`,
        role: 'user',
        source: { kind: 'tool', callId },
        content: [{ type: 'tool-result', toolCallId: callId, isError: true, content: [{ type: 'text', text: TOOL_NOT_STARTED_TEXT }] }],
      },
      error: { name: 'ToolNotStartedError', code: 'TOOL_NOT_STARTED' },
    },
    surfaceOp: 'append',
  };
}

const stepEnd = (seq: number, time: number, turn: number, step: number): SessionEvent => ({ type: 'step/end', seq, time, data: { turn, step } });
const turnEnd = (seq: number, time: number, turn: number): SessionEvent => ({
  type: 'turn/end',
  seq,
  time,
  data: { turn, reason: { kind: 'interrupted' } },
});

/**
 * Imports `events`, computes the closers and plans them in 'append' mode with their given seqs;
 * returns the closers after checking the engine accepted them unchanged.
 */
function acceptClosers(events: readonly SessionEvent[], strict: boolean): SessionEvent[] {
  const engine = SessionEngine.create({ strict });
  const ctx = { now: () => 0, sessionId: 's', lookup: (seq: number) => events.find((e) => e.seq === seq) };
  engine.commit(engine.plan(events as unknown as CandidateEvent[], { ...ctx, mode: 'import', allowSeqGaps: true }));
  const closers = interruptedTurnClosers(events, 's');
  const plan = engine.plan(closers as unknown as CandidateEvent[], { ...ctx, mode: 'append' });
  engine.commit(plan);
  expect(plan.events).toStrictEqual(closers);
  return closers;
}

describe('interruptedTurnClosers', () => {
  it('has the reference texts verbatim', () => {
    expect(TOOL_OUTCOME_UNKNOWN_TEXT).toBe(
      'The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.',
    );
    expect(TOOL_NOT_STARTED_TEXT).toBe('The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.');
  });

  it('given an empty log, emits nothing', () => {
    expect(interruptedTurnClosers([])).toStrictEqual([]);
  });

  it('given a balanced log, emits nothing', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      userMsg('u1'),
      ['step/start', { turn: 1, step: 1 }],
      assistant(1, 1, ['c1']),
      toolCall(1, 1, 'c1'),
      toolResult(1, 1, 'c1', 4),
      ['step/end', { turn: 1, step: 1 }],
      ['turn/end', { turn: 1, reason: { kind: 'completed' } }],
    );
    expect(interruptedTurnClosers(events)).toStrictEqual([]);
  });

  it('given a recorded and an unrecorded orphan, emits both results in advertised order, then step/end and turn/end', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      userMsg('u1'),
      ['step/start', { turn: 1, step: 1 }],
      assistant(1, 1, ['c1', 'c2']),
      toolCall(1, 1, 'c1'),
    );
    expect(interruptedTurnClosers(events, 'sess')).toStrictEqual([
      unknownCloser(5, 1004, 1, 1, 'c1', 4),
      notStartedCloser(6, 1004, 1, 1, 'c2'),
      stepEnd(7, 1004, 1, 1),
      turnEnd(8, 1004, 1),
    ]);
  });

  it('given several orphans with one answered, emits only the unanswered ones (recorded, unrecorded)', () => {
    const events = log(
      ['turn/start', { turn: 2 }],
      ['step/start', { turn: 2, step: 3 }],
      assistant(2, 3, ['a', 'b', 'c', 'd']),
      toolCall(2, 3, 'a'),
      toolCall(2, 3, 'b'),
      toolResult(2, 3, 'a', 3),
      toolCall(2, 3, 'd'),
      ['tool/call', { turn: 2, step: 3, callId: 'never-advertised', name: 'x', arguments: '{}' }],
    );
    expect(interruptedTurnClosers(events)).toStrictEqual([
      unknownCloser(8, 1007, 2, 3, 'b', 4),
      notStartedCloser(9, 1007, 2, 3, 'c'),
      unknownCloser(10, 1007, 2, 3, 'd', 6),
      stepEnd(11, 1007, 2, 3),
      turnEnd(12, 1007, 2),
    ]);
  });

  it('given orphans in an already-closed step, emits no results (just the turn/end, or the open step’s end)', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      ['step/start', { turn: 1, step: 1 }],
      assistant(1, 1, ['c1']),
      toolCall(1, 1, 'c1'),
      ['step/end', { turn: 1, step: 1 }],
    );
    expect(interruptedTurnClosers(events)).toStrictEqual([turnEnd(5, 1004, 1)]);
    const withNextStep = [...events, { type: 'step/start', seq: 5, time: 1005, data: { turn: 1, step: 2 } }];
    expect(interruptedTurnClosers(withNextStep)).toStrictEqual([stepEnd(6, 1005, 1, 2), turnEnd(7, 1005, 1)]);
  });

  it('given orphans of an earlier turn, emits nothing for them', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      ['step/start', { turn: 1, step: 1 }],
      assistant(1, 1, ['old']),
      ['turn/end', { turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } }],
    );
    expect(interruptedTurnClosers(events)).toStrictEqual([]);
    // a second turn that crashed right after starting: only its own closers
    const next = [...events, { type: 'turn/start', seq: 4, time: 1004, data: { turn: 2 } }];
    expect(interruptedTurnClosers(next)).toStrictEqual([turnEnd(5, 1004, 2)]);
  });

  it('given a new turn/start without a turn/end, forgets the previous turn’s pending calls', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      ['step/start', { turn: 1, step: 1 }],
      assistant(1, 1, ['old']),
      ['turn/start', { turn: 2 }],
      ['step/start', { turn: 2, step: 1 }],
    );
    expect(interruptedTurnClosers(events)).toStrictEqual([stepEnd(5, 1004, 2, 1), turnEnd(6, 1004, 2)]);
  });

  it('given an open step without orphans, emits just step/end and turn/end', () => {
    const events = log(['turn/start', { turn: 1 }], userMsg('u1'), ['step/start', { turn: 1, step: 1 }], ['assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'x' } }]);
    expect(interruptedTurnClosers(events)).toStrictEqual([stepEnd(4, 1003, 1, 1), turnEnd(5, 1003, 1)]);
  });

  it('given an open turn without an open step, emits just turn/end', () => {
    const events = log(['turn/start', { turn: 7 }], userMsg('u1'));
    expect(interruptedTurnClosers(events)).toStrictEqual([turnEnd(2, 1001, 7)]);
  });

  it('uses the last event’s time (even if earlier than others) and continues from the last seq across gaps', () => {
    const events: SessionEvent[] = [
      { type: 'turn/start', seq: 10, time: 5000, data: { turn: 1 } },
      { type: 'step/start', seq: 14, time: 4000, data: { turn: 1, step: 1 } },
    ];
    expect(interruptedTurnClosers(events)).toStrictEqual([stepEnd(15, 4000, 1, 1), turnEnd(16, 4000, 1)]);
  });

  it('treats replacement tool/results like appended ones', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      ['step/start', { turn: 1, step: 1 }],
      assistant(1, 1, ['c1']),
      toolResult(1, 1, 'c1'),
    );
    events[3] = { ...(events[3] as SessionEvent), surfaceOp: { op: 'replace', start: 2, end: 2 }, sourceEventSeqs: [2] };
    expect(interruptedTurnClosers(events)).toStrictEqual([stepEnd(4, 1003, 1, 1), turnEnd(5, 1003, 1)]);
  });

  it('understands legacy unwrapped assistant/message and tool/result shapes', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      ['step/start', { turn: 1, step: 2 }],
      [
        'assistant/message',
        { turn: 1, step: 2, content: [{ type: 'tool-call', id: 'L1', name: 'read', arguments: '{}' }, { type: 'tool-call', id: 'L2', name: 'read', arguments: '{}' }], provenance: {} },
        { surfaceOp: 'append' },
      ],
      ['tool/call', { turn: 1, step: 2, callId: 'L1', name: 'read', arguments: '{}' }],
      ['tool/call', { turn: 1, step: 2, callId: 'L2', name: 'read', arguments: '{}' }],
      ['tool/result', { turn: 1, step: 2, callId: 'L1', content: [{ type: 'text', text: 'x' }], isError: false }, { surfaceOp: 'append' }],
    );
    expect(interruptedTurnClosers(events)).toStrictEqual([unknownCloser(6, 1005, 1, 2, 'L2', 4), stepEnd(7, 1005, 1, 2), turnEnd(8, 1005, 1)]);
  });

  it('gives the same closers from the suffix starting at the last turn/start (the app’s input)', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      ['step/start', { turn: 1, step: 1 }],
      assistant(1, 1, ['x']),
      ['step/end', { turn: 1, step: 1 }],
      ['turn/end', { turn: 1, reason: { kind: 'completed' } }],
      ['turn/start', { turn: 2 }],
      ['step/start', { turn: 2, step: 1 }],
      assistant(2, 1, ['y', 'z']),
      toolCall(2, 1, 'z'),
    );
    const full = interruptedTurnClosers(events);
    expect(full).toHaveLength(4);
    expect(interruptedTurnClosers(events.slice(5))).toStrictEqual(full);
  });

  it('is idempotent: the repaired log needs no further closers', () => {
    const events = log(['turn/start', { turn: 1 }], ['step/start', { turn: 1, step: 1 }], assistant(1, 1, ['c1', 'c2']), toolCall(1, 1, 'c2'));
    const closers = interruptedTurnClosers(events);
    expect(closers.length).toBe(4);
    expect(interruptedTurnClosers([...events, ...closers])).toStrictEqual([]);
  });

  it('accepts any iterable (a generator) and returns plain JSON', () => {
    const events = log(['turn/start', { turn: 1 }]);
    function* gen(): Generator<SessionEvent> {
      yield* events;
    }
    const closers = interruptedTurnClosers(gen());
    expect(JSON.parse(JSON.stringify(closers))).toStrictEqual(closers);
  });

  describe('closers pass engine acceptance (planned in append mode with their own seqs)', () => {
    const wellFormed = log(
      ['turn/start', { turn: 1 }],
      userMsg('u1'),
      ['step/start', { turn: 1, step: 1 }],
      assistant(1, 1, ['c1', 'c2', 'c3']),
      toolCall(1, 1, 'c1'),
      toolResult(1, 1, 'c1', 4),
      toolCall(1, 1, 'c2'),
    );

    it.each([false, true])('strict=%s: recorded and unrecorded orphans, step/end and turn/end', (strict) => {
      const closers = acceptClosers(wellFormed, strict);
      expect(closers.map((c) => c.type)).toStrictEqual(['tool/result', 'tool/result', 'step/end', 'turn/end']);
    });

    it.each([false, true])('strict=%s: an open turn without a step', (strict) => {
      expect(acceptClosers(log(['turn/start', { turn: 1 }], userMsg('u1')), strict)).toHaveLength(1);
    });

    it('legacy shapes and seq gaps (non-strict)', () => {
      const events: SessionEvent[] = [
        { type: 'turn/start', seq: 3, time: 1, data: { turn: 1 } },
        { type: 'step/start', seq: 7, time: 2, data: { turn: 1, step: 1 } },
        {
          type: 'assistant/message',
          seq: 9,
          time: 3,
          data: { turn: 1, step: 1, content: [{ type: 'tool-call', id: 'L', name: 'read', arguments: '{}' }], provenance: { provider: 'p', model: 'm' } },
          surfaceOp: 'append',
        },
        { type: 'tool/call', seq: 10, time: 4, data: { turn: 1, step: 1, callId: 'L', name: 'read', arguments: '{}' } },
      ];
      expect(acceptClosers(events, false).map((c) => c.seq)).toStrictEqual([11, 12, 13]);
    });

    it('the surface after repair is the old surface plus the closer results', () => {
      const engine = SessionEngine.create();
      const ctx = { now: () => 0, sessionId: 's', lookup: () => undefined };
      engine.commit(engine.plan(wellFormed as unknown as CandidateEvent[], { ...ctx, mode: 'import' }));
      const before = engine.surface();
      const closers = interruptedTurnClosers(wellFormed);
      engine.commit(engine.plan(closers as unknown as CandidateEvent[], { ...ctx, mode: 'append' }));
      expect(engine.surface()).toStrictEqual([...before, 7, 8]);
    });
  });
});

describe('interruptedTurnClosers: null turn and step (issue #16 item 4)', () => {
  const ev = (seq: number, type: string, data: Json): SessionEvent => ({ type, seq, time: 100 + seq, data });

  it('given step/start with step null, then the step counts as not open: turn/end only, no step/end', () => {
    const closers = interruptedTurnClosers([ev(0, 'turn/start', { turn: 1 }), ev(1, 'step/start', { turn: 1, step: null })]);
    expect(closers).toEqual([{ type: 'turn/end', seq: 2, time: 101, data: { turn: 1, reason: { kind: 'interrupted' } } }]);
  });

  it('given step/start with a numeric step, then step/end and turn/end (the twin)', () => {
    const closers = interruptedTurnClosers([ev(0, 'turn/start', { turn: 1 }), ev(1, 'step/start', { turn: 1, step: 1 })]);
    expect(closers.map((c) => [c.type, c.data])).toEqual([['step/end', { turn: 1, step: 1 }], ['turn/end', { turn: 1, reason: { kind: 'interrupted' } }]]);
  });

  it('given turn/start with turn null, then no turn counts as open and nothing is written', () => {
    expect(interruptedTurnClosers([ev(0, 'turn/start', { turn: null }), ev(1, 'step/start', { turn: 1, step: 1 })])).toEqual([]);
  });
});
