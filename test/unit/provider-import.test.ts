/**
 * ImportMessages' domain half (issue #34): for every history in the canonical subset of a format
 * (what its renderer writes), render(import(x)) == x, as a fast-check property over random
 * histories with text, images, signed reasoning, parallel calls answered in any order and error
 * results; the events written are the reference's (user/message, assistant/message citing [],
 * tool/call, tool/result citing its tool/call) and pass the engine's live-append rules; what has
 * no place in a model history is refused with IMPORT_MESSAGES_INVALID naming the message.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MessageProjection } from '../../src/domain/derive.js';
import { DomainError } from '../../src/domain/errors.js';
import type { Json, SessionEvent } from '../../src/domain/event.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import { PROVIDER_FORMATS, renderHistory, type HistoryEntry, type ProviderFormat } from '../../src/domain/render/index.js';
import { importProviderMessages } from '../../src/domain/render/provider-import.js';
import { PNG } from '../support/rich-session.js';

const text = fc.string({ minLength: 1, maxLength: 12 });
const image: fc.Arbitrary<Json> = fc.constantFrom<Json>({ type: 'image', attachment: { mimeType: 'image/png', data: PNG } }, { type: 'image', attachment: { url: 'https://example.com/a.png' } });
const userBlocks = fc.array(fc.oneof({ weight: 3, arbitrary: text.map((t): Json => ({ type: 'text', text: t })) }, { weight: 1, arbitrary: image }), { minLength: 1, maxLength: 3 });
const args = fc.dictionary(fc.constantFrom('path', 'cmd', 'n'), fc.oneof(fc.string({ maxLength: 5 }), fc.integer())).map((o) => JSON.stringify(o));

/** A random valid history: rounds of a user message, then assistant steps whose calls are all answered. */
const history = fc.array(
  fc.record({
    user: userBlocks,
    steps: fc.array(fc.record({
      reasoning: fc.option(text),
      text: fc.option(text),
      calls: fc.array(fc.record({ name: fc.constantFrom('read', 'bash'), args, out: fc.array(fc.oneof({ weight: 4, arbitrary: text.map((t): Json => ({ type: 'text', text: t })) }, { weight: 1, arbitrary: image }), { maxLength: 2 }), isError: fc.boolean() }), { maxLength: 3 }),
      order: fc.nat(),
    }), { minLength: 1, maxLength: 3 }),
  }),
  { minLength: 1, maxLength: 4 },
).map((rounds) => {
  const out: HistoryEntry[] = [];
  let seq = 0;
  let callN = 0;
  for (const round of rounds) {
    out.push({ seq: seq++, message: { id: `u${seq}`, role: 'user', content: round.user, source: { kind: 'user' } } });
    for (const st of round.steps) {
      const content: Json[] = [];
      if (st.reasoning !== null) content.push({ type: 'reasoning', text: st.reasoning, signature: `sig${seq}` });
      if (st.text !== null || st.calls.length === 0) content.push({ type: 'text', text: st.text ?? 'ok' });
      const calls = st.calls.map((c) => ({ ...c, id: `call_${++callN}` }));
      for (const c of calls) content.push({ type: 'tool-call', id: c.id, name: c.name, arguments: c.args });
      out.push({ seq: seq++, message: { id: `a${seq}`, role: 'assistant', content, source: { kind: 'model', provider: 'p', model: 'm' } } });
      // Results in a rotated order (parallel calls answer in any order).
      const k = calls.length === 0 ? 0 : st.order % calls.length;
      for (const c of [...calls.slice(k), ...calls.slice(0, k)]) {
        const block: Record<string, Json> = { type: 'tool-result', toolCallId: c.id, content: c.out };
        if (c.isError) block['isError'] = true;
        out.push({ seq: seq++, message: { id: `r${seq}`, role: 'user', content: [block], source: { kind: 'tool', callId: c.id } } });
      }
    }
  }
  return out;
});

/** import(x) through the engine's live-append path, then the model history rendered again. */
function roundTrip(format: ProviderFormat, x: Json[]): { rendered: Json[]; events: SessionEvent[] } {
  const candidates = importProviderMessages(format, x, { sessionId: 's', nextSeq: 0 });
  const engine = SessionEngine.create();
  const plan = engine.plan(candidates, { mode: 'append', now: () => 0, sessionId: 's', lookup: () => undefined });
  engine.commit(plan);
  const p = new MessageProjection('s');
  p.hydrate([], 0);
  p.apply(plan);
  return { rendered: renderHistory(format, p.entries()).map((r) => r.json), events: [...plan.events] };
}

describe('render(import(x)) == x for the canonical subset', () => {
  it.each(PROVIDER_FORMATS)('%s', (format) => {
    fc.assert(fc.property(history, (h) => {
      const x = renderHistory(format, h).map((r) => r.json);
      expect(roundTrip(format, x).rendered).toEqual(x);
    }), { numRuns: 150 });
  });
});

describe('the events ImportMessages writes', () => {
  it('are the reference shapes: assistant/message citing [], tool/call per call, tool/result citing its tool/call', () => {
    const x: Json[] = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{"p":1}' } }, { id: 'c2', type: 'function', function: { name: 'read', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c2', content: 'two' },
      { role: 'tool', tool_call_id: 'c1', content: 'one' },
      { role: 'assistant', content: 'done' },
    ];
    const { events } = roundTrip('openai-chat', x);
    expect(events.map((e) => [e.seq, e.type, e.sourceEventSeqs ?? null])).toEqual([
      [0, 'user/message', null], [1, 'assistant/message', []], [2, 'tool/call', null], [3, 'tool/call', null], [4, 'tool/result', [3]], [5, 'tool/result', [2]], [6, 'assistant/message', []],
    ]);
    expect(events[2]!.data).toEqual({ turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{"p":1}' });
    expect((events[1]!.data as { message: { source: unknown } }).message.source).toEqual({ kind: 'model', provider: 'openai', model: 'imported' });
    expect((events[6]!.data as { step: number }).step).toBe(2);
  });

  it.each([
    ['openai-chat', [{ role: 'system', content: 'be brief' }], '0'],
    ['openai-chat', [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'ghost', content: 'x' }], '1'],
    ['anthropic', [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'ghost', content: 'x' }] }], '0'],
    ['openai-responses', [{ type: 'function_call_output', call_id: 'ghost', output: 'x' }], '0'],
    ['gemini', [{ role: 'user', parts: [{ functionResponse: { name: 'f', response: {} } }] }], '0'],
    ['gemini', ['not an object'], '0'],
  ] as const)('%s: refuses %j with IMPORT_MESSAGES_INVALID at message %s', (format, x, index) => {
    let err: unknown;
    try {
      importProviderMessages(format, x as unknown as Json, { sessionId: 's', nextSeq: 0 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).reason).toBe('IMPORT_MESSAGES_INVALID');
    expect((err as DomainError).metadata['index']).toBe(index);
  });

  it('gemini: calls without ids get generated ones and responses pair by name', () => {
    const x: Json[] = [
      { role: 'user', parts: [{ text: 'hi' }] },
      { role: 'model', parts: [{ functionCall: { name: 'read', args: { p: 1 } } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'read', response: { output: 'ok' } } }] },
    ];
    const { rendered } = roundTrip('gemini', x);
    expect(rendered[2]).toEqual({ role: 'user', parts: [{ functionResponse: { id: 'gemini-call-1', name: 'read', response: { output: 'ok' } } }] });
  });
});
