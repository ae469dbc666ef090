/**
 * The divergences found by running the reference's own session code side by side (issue #16),
 * one block per item: the reference's answer, the log left untouched on a rejection, and the
 * accepted twin next to it.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import type { CandidateEvent } from '../../src/domain/event.js';
import fc from 'fast-check';
import { JsonlCommittedLines } from '../../src/domain/jsonl-committed-lines.js';
import { canonicalData } from '../../src/domain/message-view.js';
import { deriveMessages } from '../../src/domain/derive.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import { Harness, logEvent, rep, toolResult, user } from '../support/engine-harness.js';

let h: Harness;
beforeEach(() => {
  h = new Harness();
});

describe('item 7: an empty type string is a string', () => {
  it('given type "" on live append and on import, then accepted (the reference requires only typeof type === "string")', () => {
    expect(h.add(logEvent('')).events[0]?.type).toBe('');
    const imp = new Harness();
    expect(imp.add([{ type: '', seq: 0, time: 1, data: {} }], 'import').events[0]?.type).toBe('');
  });

  it('given a non-string type, then still ENVELOPE_INVALID and nothing changes', () => {
    h.expectReject([logEvent('ok'), { type: 5, data: {} } as CandidateEvent], 'ENVELOPE_INVALID', 1);
    h.expectReject([{ data: {} } as unknown as CandidateEvent], 'ENVELOPE_INVALID', 0);
  });
});

const header = (config: Record<string, unknown>, adapterDefaults?: unknown): CandidateEvent =>
  logEvent('request/header', { header: { config, ...(adapterDefaults === undefined ? {} : { adapterDefaults }) }, reason: 'initial' });

describe('item 3: request/header adapterDefaults', () => {
  const config = { provider: 'p', model: 'm', reasoningEffort: 'high', maxTokens: 8192 };
  it.each<[string, CandidateEvent]>([
    ['null', header(config, null)],
    ['an array', header(config, [])],
    ['an unknown key', header(config, { unknown: true })],
    ['a marker that is false', header(config, { maxTokens: false })],
    ['a marker that is 1', header(config, { maxTokens: 1 })],
    ['a marker whose value is absent from config', header({ provider: 'p', model: 'm', maxTokens: 1 }, { reasoningEffort: true })],
  ])('given adapterDefaults %s, when appended or imported, then REQUEST_HEADER_SHAPE and nothing changes', (_name, bad) => {
    h.expectReject([logEvent('ok'), bad], 'REQUEST_HEADER_SHAPE', 1);
    h.expectReject([{ ...bad, seq: 0, time: 1 }], 'REQUEST_HEADER_SHAPE', 0, 'import');
  });

  it('given markers that are exactly true for values present in config (or none at all), then accepted', () => {
    expect(h.plan([header(config, { reasoningEffort: true, maxTokens: true }), header(config, {}), header(config), header({ provider: 'p', model: 'm', maxTokens: 2 }, { maxTokens: true })]).events).toHaveLength(4);
  });
});

describe('item 6 and friction: legacy tool/result upgrade needs callId, content and isError', () => {
  const legacyResult = (extra: Record<string, unknown>): CandidateEvent => ({ type: 'tool/result', data: { turn: 1, step: 1, ...extra }, surfaceOp: 'append' });

  it.each<[string, Record<string, unknown>, string]>([
    ['no isError', { callId: 'c1', content: [] }, 'isError'],
    ['no content', { callId: 'c1', isError: false }, 'content'],
    ['no callId', { content: [], isError: false }, 'callId'],
  ])('given an unwrapped tool/result with %s, when appended or imported, then MESSAGE_SHAPE naming the data.message wrapper and the missing key; nothing changes', (_name, extra, missing) => {
    for (const mode of ['append', 'import'] as const) {
      const c = mode === 'import' ? { ...legacyResult(extra), seq: 0, time: 1 } : legacyResult(extra);
      const err = h.expectReject([c], 'MESSAGE_SHAPE', 0, mode);
      expect(err.message).toContain('data.message');
      expect(err.message).toContain(`missing: ${missing}`);
      expect(err.message).not.toContain('must have tool source');
    }
  });

  it('given an unwrapped tool/result with callId, content and isError, then accepted and upgraded with the reference key order', () => {
    const p = h.add(legacyResult({ callId: 'c1', content: [{ type: 'text', text: 'out' }], isError: false }));
    expect(p.events).toHaveLength(1);
  });

  it('given a user/message that has a message key but no id (not the legacy shape), then MESSAGE_SHAPE (the reference upgrades only {content, source} without id, role and message)', () => {
    h.expectReject([{ type: 'user/message', data: { content: [], source: { kind: 'user' }, message: {} }, surfaceOp: 'append' }], 'MESSAGE_SHAPE', 0);
    expect(h.add({ type: 'user/message', data: { content: [], source: { kind: 'user' } }, surfaceOp: 'append' }).events).toHaveLength(1);
  });

  it('given a misspelled content key (in the message or in the tool-result block), then MESSAGE_SHAPE names the key', () => {
    const err = h.expectReject([{ type: 'user/message', data: { id: 'u', role: 'user', contnet: [], source: { kind: 'user' } }, surfaceOp: 'append' }], 'MESSAGE_SHAPE', 0);
    expect(err.message).toContain('"contnet"');
    const block = { turn: 1, step: 1, message: { id: 'r', role: 'user', source: { kind: 'tool', callId: 'c' }, content: [{ type: 'tool-result', toolCallId: 'c', contnet: [] }] } };
    expect(h.expectReject([{ type: 'tool/result', data: block, surfaceOp: 'append' }], 'MESSAGE_SHAPE', 0).message).toContain('"contnet"');
  });

  it('given a tool/result whose block has an unknown type, then MESSAGE_SHAPE names the type; an unknown block type in a user message is accepted (as the reference)', () => {
    const data = { turn: 1, step: 1, message: { id: 'r', role: 'user', source: { kind: 'tool', callId: 'c' }, content: [{ type: 'txt', toolCallId: 'c', content: [] }] } };
    const err = h.expectReject([{ type: 'tool/result', data, surfaceOp: 'append' }], 'MESSAGE_SHAPE', 0);
    expect(err.message).toContain('"txt"');
    expect(h.add({ type: 'user/message', data: { id: 'u', role: 'user', content: [{ type: 'txt', text: 'x' }], source: { kind: 'user' } }, surfaceOp: 'append' }).events).toHaveLength(1);
  });
});

describe('legacy upgrades build the reference key order', () => {
  it('given legacy user, assistant and tool-result data, then the canonical views have the keys in the order the reference writes them', () => {
    const user = canonicalData({ type: 'user/message', seq: 3, data: { content: [], source: { kind: 'user' } }, surfaceOp: 'append' }, 's');
    expect(JSON.stringify(user)).toBe('{"content":[],"source":{"kind":"user"},"id":"legacy-message:s:3","role":"user"}');
    const asst = canonicalData({ type: 'assistant/message', seq: 4, data: { turn: 1, step: 1, content: [], provenance: { provider: 'p', model: 'm' }, usage: {} }, surfaceOp: 'append' }, 's');
    expect(JSON.stringify(asst)).toBe('{"turn":1,"step":1,"usage":{},"message":{"id":"legacy-message:s:4","role":"assistant","content":[],"source":{"provider":"p","model":"m","kind":"model"}}}');
    const tool = canonicalData({ type: 'tool/result', seq: 5, data: { turn: 1, step: 1, callId: 'c', content: [], isError: false, meta: 1 }, surfaceOp: 'append' }, 's');
    expect(JSON.stringify(tool)).toBe('{"turn":1,"step":1,"meta":1,"message":{"id":"legacy-message:s:5","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[],"isError":false}],"source":{"kind":"tool","callId":"c"}}}');
  });
});

describe('item 10: seq gaps on import are refused unless allowed', () => {
  const note = (seq: number): CandidateEvent => ({ type: 'note', seq, time: 1, data: {} });
  const gapCtx = (allowSeqGaps: boolean) => ({ ...h.ctx('import'), allowSeqGaps });

  it('given an imported log missing seq 1, then SEQ_NOT_CONTIGUOUS naming the missing seq; nothing changes', () => {
    const err = h.expectReject([note(0), note(2)], 'SEQ_NOT_CONTIGUOUS', 1, 'import');
    expect(err.metadata).toMatchObject({ seq: '2', expectedSeq: '1', missingSeq: '1' });
    expect(err.message).toContain('allow_seq_gaps');
  });

  it('given an imported log that does not start at 0, then SEQ_NOT_CONTIGUOUS (the reference seeds from 0)', () => {
    h.expectReject([note(3)], 'SEQ_NOT_CONTIGUOUS', 0, 'import');
  });

  it('given allowSeqGaps, then the same logs are accepted; seqs must still increase', () => {
    expect(h.engine.plan([note(3), note(5)], gapCtx(true)).events.map((e) => e.seq)).toEqual([3, 5]);
    expect(() => h.engine.plan([note(3), note(3)], gapCtx(true))).toThrow(/seqs must increase/);
    expect(h.engine.plan([note(0), note(1)], gapCtx(false)).events).toHaveLength(2);
  });

  it('given allowSeqGaps, then a replacement sees the earlier events of its own batch by seq (gaps between them)', () => {
    const at = (seq: number, c: CandidateEvent): CandidateEvent => ({ ...c, seq, time: 1 });
    const batch = [
      at(2, logEvent('tool/call', { turn: 1, step: 1, callId: 'c', name: 'bash', arguments: '{}' })),
      at(5, toolResult('c', 'long', { sourceEventSeqs: [2] })),
      at(9, toolResult('c', 'short', { surfaceOp: rep(5, 5), sourceEventSeqs: [5] })),
    ];
    const plan = h.engine.plan(batch, gapCtx(true));
    expect(plan.deltas.map((d) => d.kind)).toEqual(['none', 'append', 'replace']);
    // The replaced target must be a tool/result: a user message at seq 5 instead is refused.
    expect(() => h.engine.plan([batch[0]!, at(5, user('u')), batch[2]!], gapCtx(true))).toThrow(expect.objectContaining({ reason: 'TOOL_RESULT_REPLACE_WRONG_TARGET', index: 2 }));
  });
});

describe('item 12: JsonlCommittedLines (committed lines of a byte stream)', () => {
  it('property: however the bytes are chunked, the committed lines are the newline-terminated ones and the tail is the rest, in bytes', () => {
    fc.assert(fc.property(fc.array(fc.string({ unit: 'grapheme', maxLength: 8 }).map((s) => s.replace(/\n/g, '')), { maxLength: 8 }), fc.string({ unit: 'grapheme', maxLength: 6 }).map((s) => s.replace(/\n/g, '')), fc.array(fc.nat({ max: 60 }), { maxLength: 10 }), (lines, tail, cuts) => {
      const bytes = new TextEncoder().encode(lines.map((l) => `${l}\n`).join('') + tail);
      const s = new JsonlCommittedLines();
      const out: string[] = [];
      let at = 0;
      for (const c of [...cuts].sort((x, y) => x - y)) {
        const to = Math.min(c, bytes.length);
        if (to > at) out.push(...s.push(bytes.subarray(at, to)));
        at = Math.max(at, to);
      }
      out.push(...s.push(bytes.subarray(at)));
      expect([out, s.end()]).toEqual([lines, new TextEncoder().encode(tail).length]);
    }));
  });

  it('given invalid UTF-8 in a committed line or a line over the limit, then JSONL_INVALID with the line', () => {
    const s = new JsonlCommittedLines(10);
    expect(s.push(new TextEncoder().encode('ok\n'))).toEqual(['ok']);
    expect(() => s.push(Uint8Array.from([0xc3, 0x0a]))).toThrow(expect.objectContaining({ reason: 'JSONL_INVALID', metadata: { line: '2' } }));
    expect(() => new JsonlCommittedLines(3).push(new TextEncoder().encode('abcd'))).toThrow(expect.objectContaining({ reason: 'JSONL_INVALID', metadata: { line: '1', limit: '3' } }));
  });
});

describe('item 9: steering/message (retired 2026-08) is upgraded to a user/message on import', () => {
  const steering = (seq: number, data: unknown, extra: Record<string, unknown> = { surfaceOp: 'append' }): CandidateEvent => ({ type: 'steering/message', seq, time: 1, data, ...extra });
  const content = [{ type: 'text', text: 'steer' }];

  it('given the unwrapped and the wrapped shape on import, then both are stored verbatim, on the surface, and seen as user messages', () => {
    const p = h.add([steering(0, { turn: 1, content, source: { kind: 'user' } }), steering(1, { turn: 1, message: { id: 'm1', role: 'user', content, source: { kind: 'user' } } })], 'import');
    expect(p.events.map((e) => [e.type, e.data])).toEqual([
      ['steering/message', { turn: 1, content, source: { kind: 'user' } }],
      ['steering/message', { turn: 1, message: { id: 'm1', role: 'user', content, source: { kind: 'user' } } }],
    ]);
    expect(h.engine.surface()).toEqual([0, 1]);
    const messages = deriveMessages(h.engine.surface(), (s) => h.events.get(s), 'sess-1');
    expect(JSON.stringify(messages)).toBe(JSON.stringify([
      { content, source: { kind: 'user' }, id: 'legacy-message:sess-1:0', role: 'user' },
      { id: 'm1', role: 'user', content, source: { kind: 'user' } },
    ]));
    const cold = SessionEngine.create();
    cold.loadStructural(p.events);
    expect(cold.surface()).toEqual([0, 1]);
  });

  it.each<[string, CandidateEvent, string]>([
    ['an extra key', steering(0, { turn: 1, content, source: { kind: 'user' }, envelope: {} }), 'MESSAGE_SHAPE'],
    ['a string turn', steering(0, { turn: '1', content, source: { kind: 'user' } }), 'MESSAGE_SHAPE'],
    ['no source', steering(0, { turn: 1, content }), 'MESSAGE_SHAPE'],
    ['a wrapped message without id', steering(0, { turn: 1, message: { role: 'user', content, source: { kind: 'user' } } }), 'MESSAGE_SHAPE'],
    ['no surfaceOp', steering(0, { turn: 1, content, source: { kind: 'user' } }, {}), 'SURFACE_OP_REQUIRED'],
  ])('given a steering/message with %s on import, then %s and nothing changes', (_name, bad, reason) => {
    h.expectReject([bad], reason, 0, 'import');
  });

  it('given steering/message on live append, or context/message on import, then LEGACY_VOCABULARY (the reference\'s load path refuses context/message too)', () => {
    h.expectReject([{ type: 'steering/message', data: { turn: 1, content, source: { kind: 'user' } }, surfaceOp: 'append' }], 'LEGACY_VOCABULARY', 0);
    h.expectReject([{ type: 'context/message', seq: 0, time: 1, data: { content, source: { kind: 'plugin', plugin: 'x' } }, surfaceOp: 'append' }], 'LEGACY_VOCABULARY', 0, 'import');
  });
});

describe('item 8: the older turn/start and turn/end shapes the reference\'s load path refuses', () => {
  const load = (type: string, data: unknown): CandidateEvent => ({ type, seq: 0, time: 1, data });
  const fileCtx = () => ({ ...h.ctx('import'), referenceLoad: true });
  const reject = (c: CandidateEvent): void => {
    const before = h.engine.surface();
    expect(() => h.engine.plan([c], fileCtx())).toThrow(expect.objectContaining({ reason: 'TURN_SHAPE', index: 0 }));
    expect([h.engine.nextSeq, h.engine.surface()]).toEqual([0, before]);
  };

  it.each<[string, CandidateEvent]>([
    ['turn/start with a trigger and turn 0', load('turn/start', { turn: 0, trigger: { kind: 'message' } })],
    ['turn/start with a trigger and an extra key', load('turn/start', { turn: 1, trigger: { kind: 'message' }, x: 1 })],
    ['turn/start with a trigger without kind', load('turn/start', { turn: 1, trigger: { source: {} } })],
    ['turn/end without reason', load('turn/end', { turn: 1 })],
    ['turn/end with turn 0', load('turn/end', { turn: 0, reason: { kind: 'completed' } })],
    ['turn/end with an extra key', load('turn/end', { turn: 1, reason: { kind: 'completed' }, x: 1 })],
    ['turn/end reason completed with extra keys', load('turn/end', { turn: 1, reason: { kind: 'completed', at: 1 } })],
    ['turn/end reason aborted (legacy) with extra keys', load('turn/end', { turn: 1, reason: { kind: 'aborted', by: 'user' } })],
    ['turn/end reason error (legacy) without step', load('turn/end', { turn: 1, reason: { kind: 'error', message: 'm' } })],
    ['turn/end reason error (legacy) with a numeric code', load('turn/end', { turn: 1, reason: { kind: 'error', step: 1, message: 'm', code: 5 } })],
  ])('given %s in an imported file, then TURN_SHAPE and nothing changes', (_name, bad) => {
    reject(bad);
  });

  it.each<[string, CandidateEvent]>([
    ['turn/start without trigger', load('turn/start', { turn: 0 })],
    ['turn/start with a trigger', load('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })],
    ['turn/end completed', load('turn/end', { turn: 1, reason: { kind: 'completed' } })],
    ['turn/end aborted (current)', load('turn/end', { turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } })],
    ['turn/end aborted (legacy)', load('turn/end', { turn: 1, reason: { kind: 'aborted' } })],
    ['turn/end error (current)', load('turn/end', { turn: 1, reason: { kind: 'error', error: { message: 'm', code: 'X' } } })],
    ['turn/end error (legacy message)', load('turn/end', { turn: 1, reason: { kind: 'error', step: 1, message: 'm', code: 'X' } })],
    ['turn/end error (legacy failure)', load('turn/end', { turn: 1, reason: { kind: 'error', step: 0, failure: { message: 'm', code: 'X', status: 500 } } })],
    ['turn/end with an unknown reason kind', load('turn/end', { turn: 1, reason: { kind: 'later', x: 1 } })],
    ['turn/end with non-object data', load('turn/end', 'x')],
  ])('given %s in an imported file, then accepted', (_name, ok) => {
    expect(h.engine.plan([ok], fileCtx()).events).toHaveLength(1);
  });

  it('given the same malformed turn/end on live append, then accepted (only the reference\'s load path checks it)', () => {
    expect(h.plan([logEvent('turn/end', { turn: 1 })]).events).toHaveLength(1);
  });
});
