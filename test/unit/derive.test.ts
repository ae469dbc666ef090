/** Model history and human transcript (dsh-semantics 3). */
import { describe, expect, it } from 'vitest';
import { deriveMessages, deriveTranscript, MessageProjection, messageJsonText } from '../../src/domain/derive.js';
import type { Json, SessionEvent } from '../../src/domain/event.js';
import { Harness, assistant, logEvent, rep, toolResult, toolResultData, user } from '../support/engine-harness.js';

function setup(): Harness {
  const h = new Harness();
  h.add([
    user('q1'), // 0
    assistant('', { sourceEventSeqs: [] }), // 1 empty content: on surface, no message
    assistant('calling'), // 2
    logEvent('tool/call', { turn: 1, step: 1, callId: 'c', name: 'bash', arguments: '{}' }), // 3
    toolResult('c', 'very long output', { sourceEventSeqs: [3] }), // 4
  ]);
  return h;
}

describe('model history', () => {
  it('projects user data, assistant data.message (skipping empty content) and tool/result data.message, in surface order', () => {
    const h = setup();
    const lookup = (s: number): SessionEvent | undefined => h.events.get(s);
    const msgs = deriveMessages(h.engine.surface(), lookup, 'sess-1');
    expect(h.engine.surface()).toEqual([0, 1, 2, 4]);
    expect(msgs.map((m) => m['id'])).toEqual(['u-q1', 'a-calling', 'r-c']);
    // Shared frozen objects of the log, not copies.
    expect(msgs[0]).toBe(h.events.get(0)?.data);
  });

  it('after a prune the same message id appears with the new content at the same position', () => {
    const h = setup();
    const p = new MessageProjection('sess-1');
    p.hydrate(h.engine.surface().map((s) => h.events.get(s) as SessionEvent), h.engine.nextSeq);
    const plan = h.add(toolResult('c', 'very…put', { surfaceOp: rep(4, 4), sourceEventSeqs: [4] }));
    expect(p.apply(plan)).toBe(true);
    const hist = p.history();
    expect(hist.map((m) => m['id'])).toEqual(['u-q1', 'a-calling', 'r-c']);
    expect(hist[2]).toEqual((toolResultData('c', 'very…put') as { message: unknown }).message);
    expect(p.surface()).toEqual(h.engine.surface());
  });

  it('after a compaction the summary sits where the first shadowed node was; history() returns fresh arrays', () => {
    const h = setup();
    const h2 = new Harness();
    const p2 = new MessageProjection('sess-1');
    p2.hydrate([], 0);
    for (const e of h.log) p2.apply(h2.add({ ...e }));
    p2.apply(h2.add(user('sum', rep(1, 2), { sourceEventSeqs: [1, 2] })));
    const a = p2.history();
    expect(a.map((m) => m['id'])).toEqual(['u-q1', 'u-sum', 'r-c']);
    a.pop();
    expect(p2.history()).toHaveLength(3);
  });

  it('a plan that does not continue the projection un-hydrates it; history() then throws until hydrate', () => {
    const h = setup();
    const p = new MessageProjection('sess-1');
    p.hydrate([], 0);
    expect(p.apply(h.plan([user('x')]))).toBe(false);
    expect(p.isHydrated).toBe(false);
    expect(() => p.history()).toThrow(/not hydrated/);
  });
});

describe('human transcript', () => {
  it('lists append-origin surface events in log order, including later-shadowed ones, without replacement copies', () => {
    const h = setup();
    h.add(toolResult('c', 'pruned', { surfaceOp: rep(4, 4), sourceEventSeqs: [4] })); // 5
    h.add(user('summary', rep(0, 5), { sourceEventSeqs: [0, 1, 2, 4, 5] })); // 6
    h.add(user('q2')); // 7
    const t = deriveTranscript(h.log, 'sess-1');
    expect(t.map((e) => e.seq)).toEqual([0, 2, 4, 7]);
    expect(t[2]?.message['content']).toEqual([{ type: 'tool-result', toolCallId: 'c', content: [{ type: 'text', text: 'very long output' }] }]);
    expect(deriveMessages(h.engine.surface(), (s) => h.events.get(s), 'sess-1').map((m) => m['id'])).toEqual(['u-summary', 'u-q2']);
  });

  it('upgrades legacy shapes with legacy-message ids', () => {
    const h = new Harness();
    h.add({ type: 'user/message', data: { content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, surfaceOp: 'append' });
    h.add({ type: 'assistant/message', data: { turn: 1, step: 1, content: [{ type: 'text', text: 'yo' }], provenance: { provider: 'p', model: 'm' } }, surfaceOp: 'append' });
    const t = deriveTranscript(h.log, 'S');
    expect(t.map((e) => e.message)).toEqual([
      { id: 'legacy-message:S:0', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } },
      { id: 'legacy-message:S:1', role: 'assistant', content: [{ type: 'text', text: 'yo' }], source: { kind: 'model', provider: 'p', model: 'm' } },
    ]);
  });
});

describe('messageJsonText', () => {
  it('is JSON.stringify of the message, computed once per message object', () => {
    const m: { [key: string]: Json } = { id: 'm', role: 'user', content: [{ type: 'text', text: 'a"b' }] };
    const first = messageJsonText(m);
    expect(first).toBe(JSON.stringify(m));
    expect(messageJsonText(m)).toBe(first);
    const other = { ...m, id: 'n' };
    expect(messageJsonText(other)).toBe(JSON.stringify(other));
    expect(messageJsonText(null)).toBe('null');
    expect(messageJsonText('x')).toBe('"x"');
  });
});
