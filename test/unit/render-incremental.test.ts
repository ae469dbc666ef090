/**
 * renderAppended (domain/render/incremental.ts): for random histories split at a random point,
 * rendering the whole history reusing the rendering of the prefix equals rendering it afresh, in
 * every format, with and without drop_unpaired (some results left out, so calls go unanswered);
 * and the messages before the cut are the very objects of the previous rendering.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Json } from '../../src/domain/event.js';
import { PROVIDER_FORMATS, renderHistory, type HistoryEntry } from '../../src/domain/render/index.js';
import { renderAppended } from '../../src/domain/render/incremental.js';

const text = fc.oneof(fc.constant(''), fc.string({ minLength: 1, maxLength: 6 }));
const turn = fc.record({
  user: fc.array(text, { minLength: 1, maxLength: 2 }),
  steps: fc.array(fc.record({ text: fc.option(text), calls: fc.nat({ max: 2 }), answered: fc.array(fc.boolean(), { minLength: 2, maxLength: 2 }), reasoning: fc.boolean() }), { minLength: 1, maxLength: 3 }),
});

interface Turn { user: string[]; steps: { text: string | null; calls: number; answered: boolean[]; reasoning: boolean }[] }

function build(turns: Turn[]): HistoryEntry[] {
  const out: HistoryEntry[] = [];
  let seq = 0;
  let n = 0;
  for (const t of turns) {
    out.push({ seq: seq++, message: { id: `u${seq}`, role: 'user', content: t.user.map((x) => ({ type: 'text', text: x })), source: { kind: 'user' } } });
    for (const s of t.steps) {
      const ids = Array.from({ length: s.calls }, () => `c${++n}`);
      const content: Json[] = [];
      if (s.reasoning) content.push({ type: 'reasoning', text: 'r' });
      if (s.text !== null) content.push({ type: 'text', text: s.text });
      for (const id of ids) content.push({ type: 'tool-call', id, name: 'f', arguments: '{}' });
      out.push({ seq: seq++, message: { id: `a${seq}`, role: 'assistant', content, source: { kind: 'model' } } });
      ids.forEach((id, i) => {
        if (s.answered[i] !== false) out.push({ seq: seq++, message: { id: `r${seq}`, role: 'user', content: [{ type: 'tool-result', toolCallId: id, content: [{ type: 'text', text: 'o' }] }], source: { kind: 'tool', callId: id } } });
      });
    }
  }
  return out;
}

const attempt = (f: () => unknown): unknown => {
  try {
    return f();
  } catch (e) {
    return (e as { reason?: string; metadata?: unknown }).reason === undefined ? e : { refused: (e as { metadata: unknown }).metadata };
  }
};

describe('renderAppended == renderHistory', () => {
  it.each(PROVIDER_FORMATS)('%s', (format) => {
    fc.assert(fc.property(fc.array(turn, { minLength: 1, maxLength: 5 }), fc.nat(), fc.boolean(), (turns, at, dropUnpaired) => {
      const all = build(turns);
      const prefix = all.slice(0, at % (all.length + 1));
      const opts = { dropUnpaired };
      let prev;
      try {
        prev = renderHistory(format, prefix, opts);
      } catch {
        return; // a prefix that does not render has no rendering to reuse
      }
      expect(attempt(() => renderAppended(format, all, prefix.length, prev, opts))).toEqual(attempt(() => renderHistory(format, all, opts)));
    }), { numRuns: 300 });
  });

  it('reuses the objects before the cut', () => {
    const all = build([{ user: ['a'], steps: [{ text: 'b', calls: 1, answered: [true, true], reasoning: false }] }, { user: ['c'], steps: [{ text: 'd', calls: 0, answered: [], reasoning: false }] }]);
    const prefix = all.slice(0, 4);
    const prev = renderHistory('anthropic', prefix);
    const next = renderAppended('anthropic', [...all, { seq: 99, message: { id: 'u99', role: 'user', content: [{ type: 'text', text: 'e' }], source: { kind: 'user' } } }], prefix.length, prev);
    // The cut is the assistant message at seq 1: the user message before it is reused.
    expect(next[0]).toBe(prev[0]);
    expect(next[1]).not.toBe(prev[1]);
    expect(next).toEqual(renderHistory('anthropic', [...all, { seq: 99, message: { id: 'u99', role: 'user', content: [{ type: 'text', text: 'e' }], source: { kind: 'user' } } }]));
  });
});
