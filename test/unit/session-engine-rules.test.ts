/**
 * One block per rule ID of dsh-semantics 0.2: the rejecting case (right reason, right batch index,
 * engine untouched) next to the accepting case.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import type { CandidateEvent } from '../../src/domain/event.js';
import { Harness, assistant, logEvent, rep, toolResult, toolResultData, user } from '../support/engine-harness.js';

const header = (config: Record<string, unknown>, extra: Record<string, unknown> = {}, reason = 'initial'): CandidateEvent =>
  logEvent('request/header', { header: { config, system: 'sys', tools: [], ...extra }, reason });

let h: Harness;
beforeEach(() => {
  h = new Harness();
});

describe('NOT_JSON', () => {
  it('given data with NaN at batch index 1, when planned, then NOT_JSON at index 1; the JSON twin is accepted', () => {
    h.expectReject([user('ok'), logEvent('note', { n: NaN })], 'NOT_JSON', 1);
    h.expectReject([user('ok'), logEvent('note', { n: [1, , 2] })], 'NOT_JSON', 1);
    h.expectReject([logEvent('note', { d: new Date(0) })], 'NOT_JSON', 0);
    h.expectReject([{ ...user('x'), sourceEventSeqs: [0n] }], 'NOT_JSON', 0);
    h.expectReject([{ ...user('x'), surfaceOp: { op: 'replace', start: 0, end: -0 } }], 'NOT_JSON', 0);
    const p = h.plan([user('ok'), logEvent('note', { n: 1 })]);
    expect(p.events).toHaveLength(2);
  });

  it('given a class-instance candidate or an unknown key holding a function, then NOT_JSON before the envelope check', () => {
    class Candidate {
      type = 'note';
      data = {};
    }
    h.expectReject([new Candidate() as unknown as CandidateEvent], 'NOT_JSON', 0);
    h.expectReject([{ type: 'note', data: {}, extra: () => 1 }], 'NOT_JSON', 0);
  });

  it('given top-level keys whose value is undefined, then they count as absent', () => {
    const p = h.plan([{ type: 'note', data: {}, seq: undefined, surfaceOp: undefined, sourceEventSeqs: undefined }]);
    expect(Object.keys(p.events[0] ?? {}).sort()).toEqual(['data', 'seq', 'time', 'type']);
  });
});

describe('ENVELOPE_INVALID', () => {
  it.each<[string, CandidateEvent]>([
    ['an unknown key', { type: 'note', data: {}, extra: 1 }],
    ['a non-string type', { type: 5, data: {} }],
    ['a fractional time', { type: 'note', data: {}, time: 1.5 }],
    ['a string seq', { type: 'note', data: {}, seq: '0' }],
    ['a negative seq', { type: 'note', data: {}, seq: -1 }],
    ['ignorable false', { type: 'note', data: {}, ignorable: false }],
    ['missing data', { type: 'note' } as CandidateEvent],
    ['a type with a lone surrogate (no UTF-8 form)', { type: 'note\ud800', data: {} }],
    ['a type with a lone low surrogate', { type: '\udc00note', data: {} }],
  ])('given %s, when planned, then ENVELOPE_INVALID', (_name, bad) => {
    h.expectReject([logEvent('ok'), bad], 'ENVELOPE_INVALID', 1);
  });

  it('given a type with a surrogate pair (well-formed), then accepted', () => {
    expect(h.plan([{ type: 'note\ud83d\ude00', data: { s: 'lone \ud800 in data is JSON-escaped' } }]).events[0]!.type).toBe('note\u{1f600}');
  });

  it('given import without seq or time, then ENVELOPE_INVALID; with both it is accepted', () => {
    h.expectReject([{ type: 'note', data: {}, time: 1 }], 'ENVELOPE_INVALID', 0, 'import');
    h.expectReject([{ type: 'note', data: {}, seq: 0 }], 'ENVELOPE_INVALID', 0, 'import');
    expect(h.plan([{ type: 'note', data: {}, seq: 0, time: 1 }], 'import').events).toHaveLength(1);
  });

  it('given ignorable exactly true and data null, then accepted and stored as given', () => {
    const p = h.plan([{ type: 'future/thing', data: null, ignorable: true, time: -5 }]);
    expect(p.events[0]).toEqual({ type: 'future/thing', seq: 0, time: -5, data: null, ignorable: true });
  });
});

describe('LEGACY_VOCABULARY', () => {
  it.each(['request/header-delta', 'mode/set', 'context/message', 'steering/message'])('given type %s, then LEGACY_VOCABULARY', (type) => {
    const e = h.expectReject([logEvent('ok'), logEvent(type, { content: [], source: { kind: 'user' } })], 'LEGACY_VOCABULARY', 1);
    if (type === 'context/message') expect(e.message).toMatch(/retired surface type and is not imported/);
    if (type === 'steering/message') expect(e.message).toMatch(/retired surface type \(2026-08\) and cannot be appended/);
  });

  it('given a context/message with surfaceOp, then LEGACY_VOCABULARY (not SURFACE_OP_FORBIDDEN)', () => {
    h.expectReject([logEvent('context/message', { content: [], source: { kind: 'plugin' } }, { surfaceOp: 'append' })], 'LEGACY_VOCABULARY', 0);
  });

  it('given request/header reason fallback, then LEGACY_VOCABULARY; reasons initial/resume/change are accepted', () => {
    h.expectReject([header({ provider: 'p', model: 'm' }, {}, 'fallback')], 'LEGACY_VOCABULARY', 0);
    for (const reason of ['initial', 'resume', 'change']) expect(h.plan([header({ provider: 'p', model: 'm' }, {}, reason)]).events).toHaveLength(1);
  });
});

describe('REQUEST_HEADER_SHAPE', () => {
  it.each<[string, CandidateEvent]>([
    ['no header', logEvent('request/header', { reason: 'initial' })],
    ['no config', logEvent('request/header', { header: {}, reason: 'initial' })],
    ['no model', header({ provider: 'p' })],
    ['an empty provider', header({ provider: '', model: 'm' })],
    ['a numeric reasoningEffort', header({ provider: 'p', model: 'm', reasoningEffort: 5 })],
    ['non-boolean adapterDefaults', header({ provider: 'p', model: 'm' }, { adapterDefaults: { maxTokens: 'yes' } })],
    ['array adapterDefaults', header({ provider: 'p', model: 'm' }, { adapterDefaults: [] })],
    ['a zero maxTokens', header({ provider: 'p', model: 'm', maxTokens: 0 })],
  ])('given %s, then REQUEST_HEADER_SHAPE', (_name, bad) => {
    h.expectReject([logEvent('ok'), bad], 'REQUEST_HEADER_SHAPE', 1);
  });

  it('given a header with reasoningEffort, maxTokens and adapterDefaults as the reference writes them, then accepted', () => {
    const ok = header({ provider: 'deepseek-official', model: 'v4', reasoningEffort: 'high', maxTokens: 8192 }, { adapterDefaults: { reasoningEffort: true, maxTokens: true } });
    expect(h.plan([ok]).events).toHaveLength(1);
  });

  it('given a header shape error and reason fallback, then the shape error wins (reference order)', () => {
    h.expectReject([header({ provider: 'p' }, {}, 'fallback')], 'REQUEST_HEADER_SHAPE', 0);
  });
});

describe('MESSAGE_SHAPE (on live append too)', () => {
  const userData = { id: 'u1', role: 'user', content: [], source: { kind: 'user' } };
  const tr = toolResultData('c1', 'out');
  const trMessage = tr['message'] as Record<string, unknown>;
  it.each<[string, CandidateEvent]>([
    ['a user message without id', { type: 'user/message', data: { role: 'user', content: [], source: { kind: 'user' } }, surfaceOp: 'append' }],
    ['a user message with an empty id', { type: 'user/message', data: { ...userData, id: '' }, surfaceOp: 'append' }],
    ['a user message with role assistant', { type: 'user/message', data: { ...userData, role: 'assistant' }, surfaceOp: 'append' }],
    ['a user message with a string source', { type: 'user/message', data: { ...userData, source: 'user' }, surfaceOp: 'append' }],
    ['a user message with source.kind empty', { type: 'user/message', data: { ...userData, source: { kind: '' } }, surfaceOp: 'append' }],
    ['a user message with string content', { type: 'user/message', data: { ...userData, content: 'hi' }, surfaceOp: 'append' }],
    ['a non-object user message', { type: 'user/message', data: 'hi', surfaceOp: 'append' }],
    ['an assistant message without message', { type: 'assistant/message', data: { turn: 1, step: 1, message: null }, surfaceOp: 'append' }],
    [
      'an assistant message with a user source',
      { type: 'assistant/message', data: { turn: 1, step: 1, message: { id: 'a', role: 'assistant', content: [], source: { kind: 'user' } } }, surfaceOp: 'append' },
    ],
    [
      'an assistant message without model',
      { type: 'assistant/message', data: { turn: 1, step: 1, message: { id: 'a', role: 'assistant', content: [], source: { kind: 'model', provider: 'p' } } }, surfaceOp: 'append' },
    ],
    ['a tool result with a model source', { type: 'tool/result', data: { ...tr, message: { ...trMessage, source: { kind: 'model', callId: 'c1' } } }, surfaceOp: 'append' }],
    ['a tool result with two blocks', { type: 'tool/result', data: { ...tr, message: { ...trMessage, content: [...(trMessage['content'] as unknown[]), { type: 'text', text: 'x' }] } }, surfaceOp: 'append' }],
    ['a tool result with a text block', { type: 'tool/result', data: { ...tr, message: { ...trMessage, content: [{ type: 'text', text: 'x' }] } }, surfaceOp: 'append' }],
    ['a tool result with mismatched call ids', { type: 'tool/result', data: toolResultData('c1', 'x', {}), surfaceOp: 'append', _swap: true } as CandidateEvent],
    ['a legacy assistant message without provenance', { type: 'assistant/message', data: { turn: 1, step: 1, content: [] }, surfaceOp: 'append' }],
    ['a legacy tool result without callId', { type: 'tool/result', data: { turn: 1, step: 1, content: [], isError: false }, surfaceOp: 'append' }],
    ['a legacy user message with string content', { type: 'user/message', data: { content: 'x', source: { kind: 'user' } }, surfaceOp: 'append' }],
  ])('given %s, then MESSAGE_SHAPE', (_name, bad) => {
    let candidate = bad;
    if ('_swap' in bad) {
      const data = toolResultData('c1', 'x') as { message: { content: Record<string, unknown>[] } };
      data.message.content = [{ ...(data.message.content[0] as Record<string, unknown>), toolCallId: 'other' }];
      candidate = { type: 'tool/result', data, surfaceOp: 'append' };
    }
    h.expectReject([user('ok'), candidate], 'MESSAGE_SHAPE', 1);
  });

  it('given the legacy unwrapped shapes of the reference fixtures, then accepted on live append and stored verbatim', () => {
    const legacyUser = { content: [{ type: 'text', text: 'hi' }], source: { kind: 'user', rpcId: 'r' } };
    const legacyAssistant = { turn: 1, step: 1, content: [{ type: 'text', text: 'yo' }], provenance: { provider: 'p', model: 'm' }, usage: { inputTokens: 1, outputTokens: 2 } };
    const legacyTool = { turn: 1, step: 1, callId: 'c', content: [{ type: 'text', text: 'out' }], isError: false, meta: { logs: [] } };
    const p = h.plan([
      { type: 'user/message', data: legacyUser, surfaceOp: 'append' },
      { type: 'assistant/message', data: legacyAssistant, surfaceOp: 'append', sourceEventSeqs: [] },
      { type: 'tool/result', data: legacyTool, surfaceOp: 'append' },
    ]);
    expect(p.events.map((e) => e.data)).toEqual([legacyUser, legacyAssistant, legacyTool]);
  });

  it('given a shape error and a wrong seq, then the shape error wins (reference order)', () => {
    h.expectReject([{ type: 'user/message', data: { role: 'user' }, surfaceOp: 'append', seq: 9 }], 'MESSAGE_SHAPE', 0);
  });
});

describe('SEQ_NOT_CONTIGUOUS', () => {
  it('given append with a seq other than nextSeq, then SEQ_NOT_CONTIGUOUS; nextSeq itself or an omitted seq is accepted', () => {
    h.add([logEvent('a'), logEvent('b')]);
    h.expectReject([logEvent('c', {}, { seq: 3 })], 'SEQ_NOT_CONTIGUOUS', 0);
    h.expectReject([logEvent('c', {}, { seq: 2 }), logEvent('d', {}, { seq: 2 })], 'SEQ_NOT_CONTIGUOUS', 1);
    const p = h.plan([logEvent('c', {}, { seq: 2 }), logEvent('d')]);
    expect(p.events.map((e) => e.seq)).toEqual([2, 3]);
    expect(p.events[1]?.time).toBe(h.time);
  });

  it('given import with an equal or decreasing seq, then SEQ_NOT_CONTIGUOUS; with allowSeqGaps increasing seqs with gaps are accepted', () => {
    h.allowSeqGaps = true;
    h.expectReject([logEvent('a', {}, { seq: 0, time: 1 }), logEvent('b', {}, { seq: 0, time: 1 })], 'SEQ_NOT_CONTIGUOUS', 1, 'import');
    h.add([logEvent('a', {}, { seq: 3, time: 1 }), logEvent('b', {}, { seq: 10, time: 1 })], 'import');
    expect([h.engine.nextSeq, h.engine.eventCount]).toEqual([11, 2]);
    h.expectReject([logEvent('c', {}, { seq: 7, time: 1 })], 'SEQ_NOT_CONTIGUOUS', 0, 'import');
    h.add([logEvent('c', {}, { seq: 11, time: 1 })], 'import');
    expect(h.engine.typeOf(10)).toBe('b');
    expect(h.engine.typeOf(5)).toBeUndefined();
    // Live append continues after the gap.
    expect(h.plan([logEvent('d')]).events[0]?.seq).toBe(12);
  });
});

describe('SURFACE_OP_FORBIDDEN', () => {
  it('given a non-surface event with surfaceOp (even null), then SURFACE_OP_FORBIDDEN; without it, accepted', () => {
    h.expectReject([user('a'), logEvent('turn/start', { turn: 1 }, { surfaceOp: 'append' })], 'SURFACE_OP_FORBIDDEN', 1);
    h.expectReject([logEvent('turn/start', { turn: 1 }, { surfaceOp: null })], 'SURFACE_OP_FORBIDDEN', 0);
    h.expectReject([logEvent('turn/start', { turn: 1 }, { surfaceOp: 'append', sourceEventSeqs: 'x' })], 'SURFACE_OP_FORBIDDEN', 0);
    expect(h.plan([logEvent('turn/start', { turn: 1 })]).deltas).toEqual([{ kind: 'none', seq: 0 }]);
  });
});

describe('SOURCES_FORBIDDEN', () => {
  it('given a non-surface event with sourceEventSeqs, then SOURCES_FORBIDDEN', () => {
    h.add(logEvent('turn/start', { turn: 1 }));
    h.expectReject([logEvent('step/start', { turn: 1, step: 1 }, { sourceEventSeqs: [0] })], 'SOURCES_FORBIDDEN', 0);
    h.expectReject([logEvent('step/start', { turn: 1, step: 1 }, { sourceEventSeqs: [] })], 'SOURCES_FORBIDDEN', 0);
    expect(h.plan([logEvent('step/start', { turn: 1, step: 1 })]).events).toHaveLength(1);
  });
});

describe('SURFACE_OP_REQUIRED', () => {
  it('given a surface type without surfaceOp, then SURFACE_OP_REQUIRED', () => {
    h.expectReject([user('a'), { ...user('b'), surfaceOp: undefined }], 'SURFACE_OP_REQUIRED', 1);
    h.expectReject([{ type: 'assistant/message', data: (assistant('x').data), sourceEventSeqs: [] }], 'SURFACE_OP_REQUIRED', 0);
    h.expectReject([{ ...toolResult('c', 'x'), surfaceOp: undefined }], 'SURFACE_OP_REQUIRED', 0);
    expect(h.plan([user('b')]).deltas).toEqual([{ kind: 'append', seq: 0 }]);
  });
});

describe('SURFACE_OP_INVALID', () => {
  it.each<[string, unknown]>([
    ['null', null],
    ['another string', 'prepend'],
    ['a number', 3],
    ['an array', ['append']],
    ['a boolean', true],
  ])('given surfaceOp %s, then SURFACE_OP_INVALID', (_name, op) => {
    h.expectReject([user('a'), user('b', op)], 'SURFACE_OP_INVALID', 1);
  });
});

describe('REPLACE_OP_INVALID', () => {
  it.each<[string, unknown]>([
    ['{op:"append"}', { op: 'append' }],
    ['an extra key', { op: 'replace', start: 0, end: 0, note: 1 }],
    ['a missing end', { op: 'replace', start: 0 }],
    ['a negative start', { op: 'replace', start: -1, end: 0 }],
    ['a fractional end', { op: 'replace', start: 0, end: 0.5 }],
    ['a string endpoint', { op: 'replace', start: '0', end: 0 }],
    ['an empty object', {}],
  ])('given surfaceOp %s, then REPLACE_OP_INVALID', (_name, op) => {
    h.add(user('a'));
    h.expectReject([user('b', op, { sourceEventSeqs: [0] })], 'REPLACE_OP_INVALID', 0);
  });

  it('given a well-formed replace, then accepted', () => {
    h.add(user('a'));
    expect(h.plan([user('b', rep(0, 0), { sourceEventSeqs: [0] })]).deltas[0]).toEqual({ kind: 'replace', seq: 1, start: 0, end: 0, shadowed: [0], index: 0 });
  });
});

describe('SOURCES_NOT_ARRAY', () => {
  it.each<[string, unknown]>([
    ['a number', 3],
    ['an object', { 0: 0 }],
    ['null', null],
    ['a string', '0'],
  ])('given sourceEventSeqs %s, then SOURCES_NOT_ARRAY', (_name, sources) => {
    h.add(logEvent('a'));
    h.expectReject([user('b', 'append', { sourceEventSeqs: sources })], 'SOURCES_NOT_ARRAY', 0);
  });
});

describe('SOURCES_EMPTY', () => {
  it('given [] on user/message or tool/result, then SOURCES_EMPTY; [] on assistant/message is accepted', () => {
    h.expectReject([user('a', 'append', { sourceEventSeqs: [] })], 'SOURCES_EMPTY', 0);
    h.expectReject([toolResult('c', 'x', { sourceEventSeqs: [] })], 'SOURCES_EMPTY', 0);
    const p = h.plan([assistant('hi', { sourceEventSeqs: [] })]);
    expect(p.events[0]?.sourceEventSeqs).toEqual([]);
  });
});

describe('SOURCES_NOT_SEQ', () => {
  it.each<[string, unknown[]]>([
    ['a negative', [-1]],
    ['a string', ['0']],
    ['a fraction', [0.5]],
    ['a null', [null]],
    ['an unsafe integer', [2 ** 53]],
    ['a non-seq before a duplicate', [0, 0, 'x']],
  ])('given %s element, then SOURCES_NOT_SEQ', (_name, sources) => {
    h.add([logEvent('a'), logEvent('b')]);
    h.expectReject([user('c', 'append', { sourceEventSeqs: sources })], 'SOURCES_NOT_SEQ', 0);
  });
});

describe('SOURCES_DUPLICATE', () => {
  it('given a duplicate citation, then SOURCES_DUPLICATE (before SOURCES_NOT_EARLIER); distinct earlier seqs in any order are accepted', () => {
    h.add([logEvent('a'), logEvent('b')]);
    h.expectReject([user('c', 'append', { sourceEventSeqs: [1, 0, 1] })], 'SOURCES_DUPLICATE', 0);
    h.expectReject([user('c', 'append', { sourceEventSeqs: [9, 9] })], 'SOURCES_DUPLICATE', 0);
    expect(h.plan([user('c', 'append', { sourceEventSeqs: [1, 0] })]).events).toHaveLength(1);
  });
});

describe('SOURCES_NOT_EARLIER', () => {
  it('given a citation of the event itself or a later seq, then SOURCES_NOT_EARLIER; any earlier seq of any type is accepted', () => {
    h.add([logEvent('a'), logEvent('b')]);
    h.expectReject([user('c', 'append', { sourceEventSeqs: [2] })], 'SOURCES_NOT_EARLIER', 0);
    h.expectReject([user('c', 'append', { sourceEventSeqs: [0, 7] })], 'SOURCES_NOT_EARLIER', 0);
    // The first offending seq is the one reported (as upstream), ascending list or not.
    expect(h.expectReject([user('c', 'append', { sourceEventSeqs: [2, 3] })], 'SOURCES_NOT_EARLIER', 0).metadata.seq).toBe('2');
    expect(h.expectReject([user('c', 'append', { sourceEventSeqs: [5, 0, 2] })], 'SOURCES_NOT_EARLIER', 0).metadata.seq).toBe('5');
    h.expectReject([logEvent('x'), user('c', 'append', { sourceEventSeqs: [3] })], 'SOURCES_NOT_EARLIER', 1);
    expect(h.plan([logEvent('x'), user('c', 'append', { sourceEventSeqs: [0, 1, 2] })]).events).toHaveLength(2);
  });

  it('given an imported log with seq gaps (allowSeqGaps), then citing an elided (never stored) earlier seq is accepted, as upstream', () => {
    h.allowSeqGaps = true;
    h.add([logEvent('a', {}, { seq: 0, time: 1 }), { ...assistant('x', { sourceEventSeqs: [3, 4, 5] }), seq: 6, time: 1 }], 'import');
    expect(h.engine.surface()).toEqual([6]);
  });
});

describe('REPLACE_START_NOT_ON_SURFACE', () => {
  it('given a start that is non-surface, shadowed, future or the event itself, then REPLACE_START_NOT_ON_SURFACE', () => {
    h.add([logEvent('turn/start', { turn: 1 }), user('a'), user('b')]); // 0 1 2
    h.add(user('s', rep(1, 1), { sourceEventSeqs: [1] })); // 3 shadows 1
    h.expectReject([user('x', rep(0, 2), { sourceEventSeqs: [0, 2] })], 'REPLACE_START_NOT_ON_SURFACE', 0);
    h.expectReject([user('x', rep(1, 2), { sourceEventSeqs: [1, 2] })], 'REPLACE_START_NOT_ON_SURFACE', 0);
    h.expectReject([user('x', rep(9, 2), { sourceEventSeqs: [2] })], 'REPLACE_START_NOT_ON_SURFACE', 0);
    h.expectReject([user('x', rep(4, 4), { sourceEventSeqs: [2] })], 'REPLACE_START_NOT_ON_SURFACE', 0);
    // Range checks come before citation checks.
    h.expectReject([user('x', rep(0, 2), { sourceEventSeqs: 'bad' })], 'REPLACE_START_NOT_ON_SURFACE', 0);
    expect(h.plan([user('x', rep(3, 2), { sourceEventSeqs: [3, 2] })]).deltas[0]).toMatchObject({ shadowed: [3, 2] });
  });
});

describe('REPLACE_END_NOT_ON_SURFACE', () => {
  it('given an end that is not on the surface, then REPLACE_END_NOT_ON_SURFACE', () => {
    h.add([user('a'), logEvent('note'), user('b')]);
    h.expectReject([user('x', rep(0, 1), { sourceEventSeqs: [0, 1] })], 'REPLACE_END_NOT_ON_SURFACE', 0);
    h.expectReject([user('x', rep(0, 3), { sourceEventSeqs: [0] })], 'REPLACE_END_NOT_ON_SURFACE', 0);
    expect(h.plan([user('x', rep(0, 2), { sourceEventSeqs: [0, 2] })]).deltas[0]).toMatchObject({ shadowed: [0, 2] });
  });
});

describe('REPLACE_START_AFTER_END', () => {
  it('given start after end by surface position, then REPLACE_START_AFTER_END; start > end numerically after nested replaces is accepted', () => {
    h.add([user('a'), user('b'), user('c')]); // surface [0,1,2]
    h.expectReject([user('x', rep(2, 0), { sourceEventSeqs: [0, 1, 2] })], 'REPLACE_START_AFTER_END', 0);
    h.add(user('s', rep(0, 0), { sourceEventSeqs: [0] })); // surface [3,1,2]
    expect(h.engine.surface()).toEqual([3, 1, 2]);
    const p = h.add(user('t', rep(3, 1), { sourceEventSeqs: [3, 1] })); // start 3 > end 1 numerically
    expect(p.deltas[0]).toEqual({ kind: 'replace', seq: 4, start: 3, end: 1, shadowed: [3, 1], index: 0 });
    expect(h.engine.surface()).toEqual([4, 2]);
    h.expectReject([user('y', rep(2, 4), { sourceEventSeqs: [2, 4] })], 'REPLACE_START_AFTER_END', 0);
  });
});

describe('REPLACE_SOURCES_INCOMPLETE', () => {
  it('given a replace that does not cite every shadowed node, then REPLACE_SOURCES_INCOMPLETE; extra citations are fine', () => {
    h.add([user('a'), user('b'), user('c')]);
    h.expectReject([user('x', rep(0, 2), { sourceEventSeqs: [0, 2] })], 'REPLACE_SOURCES_INCOMPLETE', 0);
    h.expectReject([user('x', rep(0, 0))], 'REPLACE_SOURCES_INCOMPLETE', 0);
    h.expectReject([assistant('x', { surfaceOp: rep(1, 1), sourceEventSeqs: [] })], 'REPLACE_SOURCES_INCOMPLETE', 0);
    expect(h.plan([user('x', rep(0, 2), { sourceEventSeqs: [2, 1, 0] })]).events).toHaveLength(1);
  });

  it('given a tool/result rewrite that both misses its target citation and changes isError, then REPLACE_SOURCES_INCOMPLETE wins', () => {
    h.add(toolResult('c1', 'long output'));
    h.expectReject([toolResult('c1', 'short', { surfaceOp: rep(0, 0) }, { isError: true })], 'REPLACE_SOURCES_INCOMPLETE', 0);
  });
});

describe('TOOL_RESULT_REPLACE_NOT_SINGLE', () => {
  it('given a tool/result replacement of two nodes, then TOOL_RESULT_REPLACE_NOT_SINGLE; a user/message may replace the same range', () => {
    h.add([toolResult('c1', 'one'), toolResult('c2', 'two')]);
    h.expectReject([toolResult('c1', 'x', { surfaceOp: rep(0, 1), sourceEventSeqs: [0, 1] })], 'TOOL_RESULT_REPLACE_NOT_SINGLE', 0);
    expect(h.plan([user('summary', rep(0, 1), { sourceEventSeqs: [0, 1] })]).events).toHaveLength(1);
  });
});

describe('TOOL_RESULT_REPLACE_WRONG_TARGET', () => {
  it('given a tool/result replacement of a user/message, then TOOL_RESULT_REPLACE_WRONG_TARGET', () => {
    h.add([user('a'), toolResult('c1', 'out')]);
    h.expectReject([toolResult('c1', 'x', { surfaceOp: rep(0, 0), sourceEventSeqs: [0] })], 'TOOL_RESULT_REPLACE_WRONG_TARGET', 0);
    expect(h.plan([toolResult('c1', 'x', { surfaceOp: rep(1, 1), sourceEventSeqs: [1] })]).events).toHaveLength(1);
  });
});

describe('TOOL_RESULT_REPLACE_NON_CONTENT', () => {
  const prune = (target: number, data: unknown): CandidateEvent => ({ type: 'tool/result', data, surfaceOp: rep(target, target), sourceEventSeqs: [target] });
  const base = (): Record<string, unknown> => ({ ...toolResultData('c1', 'x'.repeat(50), { isError: false }), meta: { path: '/a' } });
  const withMessage = (d: Record<string, unknown>, f: (m: Record<string, unknown>, b: Record<string, unknown>) => void): Record<string, unknown> => {
    const m = structuredClone(d['message']) as Record<string, unknown>;
    f(m, (m['content'] as Record<string, unknown>[])[0] as Record<string, unknown>);
    return { ...d, message: m };
  };

  beforeEach(() => {
    h.add({ type: 'tool/result', data: base(), surfaceOp: 'append' });
  });

  it.each<[string, (d: Record<string, unknown>) => Record<string, unknown>]>([
    ['a changed isError', (d) => withMessage(d, (_m, b) => (b['isError'] = true))],
    ['a removed isError', (d) => withMessage(d, (_m, b) => delete b['isError'])],
    ['a changed message id', (d) => withMessage(d, (m) => (m['id'] = 'new-id'))],
    ['a changed source', (d) => withMessage(d, (m, b) => ((m['source'] = { kind: 'tool', callId: 'c2' }), (b['toolCallId'] = 'c2')))],
    ['a changed turn', (d) => ({ ...d, turn: 2 })],
    ['an added error', (d) => ({ ...d, error: { name: 'E', code: 'X' } })],
    ['a removed meta', (d) => Object.fromEntries(Object.entries(d).filter(([k]) => k !== 'meta'))],
    ['an extra key', (d) => ({ ...d, extra: null })],
    ['an extra key in the block', (d) => withMessage(d, (_m, b) => (b['note'] = 1))],
  ])('given %s, then TOOL_RESULT_REPLACE_NON_CONTENT', (_name, change) => {
    h.expectReject([prune(0, change(base()))], 'TOOL_RESULT_REPLACE_NON_CONTENT', 0);
  });

  it('given only the inner content changed (even to []), with keys reordered, then accepted; pruning twice works', () => {
    const pruned = withMessage(base(), (_m, b) => (b['content'] = [{ type: 'text', text: 'xx…xx' }]));
    const reordered = Object.fromEntries(Object.entries(pruned).reverse());
    h.add(prune(0, reordered));
    expect(h.engine.surface()).toEqual([1]);
    h.add(prune(1, withMessage(base(), (_m, b) => (b['content'] = []))));
    expect(h.engine.surface()).toEqual([2]);
    expect(h.engine.replaceGeneration).toBe(2);
  });

  it('given legacy flat tool/results, then data minus content is compared', () => {
    const legacy = { turn: 1, step: 1, callId: 'L', content: [{ type: 'text', text: 'long' }], isError: false };
    h.add({ type: 'tool/result', data: legacy, surfaceOp: 'append' }); // seq 1
    h.expectReject([prune(1, { ...legacy, content: [], isError: true })], 'TOOL_RESULT_REPLACE_NON_CONTENT', 0);
    h.expectReject([prune(1, { ...legacy, content: [], meta: {} })], 'TOOL_RESULT_REPLACE_NON_CONTENT', 0);
    h.add(prune(1, { ...legacy, content: [] }));
    expect(h.engine.surface()).toEqual([0, 2]);
  });

  it('given a canonical rewrite of a legacy result, then it must keep the upgraded legacy id', () => {
    const legacy = { turn: 1, step: 1, callId: 'L', content: [{ type: 'text', text: 'long' }], isError: false };
    h.add({ type: 'tool/result', data: legacy, surfaceOp: 'append' }); // seq 1
    const canonical = toolResultData('L', 'short', { id: 'legacy-message:sess-1:1', isError: false });
    h.expectReject([prune(1, toolResultData('L', 'short', { id: 'other', isError: false }))], 'TOOL_RESULT_REPLACE_NON_CONTENT', 0);
    h.add(prune(1, canonical));
    expect(h.engine.surface()).toEqual([0, 2]);
  });
});
