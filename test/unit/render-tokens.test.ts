/**
 * Token counts of rendered provider messages (issue #34 item 4, domain/render/rendered-tokens.ts):
 * the one estimator over the blocks a provider message carries plus its role framing. Checked by
 * hand on a small history in every format, as a property (a history of text, calls and text
 * results: the counts add up to the DSH counts + 4 per extra rendered message), and over the 36
 * reference sessions (the DSH counts, less the reasoning a format leaves out, + 4 per extra
 * rendered message, + the difference of arguments sent as compact JSON for Anthropic and Gemini).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MessageProjection } from '../../src/domain/derive.js';
import type { Json } from '../../src/domain/event.js';
import { decodeJsonl } from '../../src/domain/jsonl-reader.js';
import { argumentsObject, type Block } from '../../src/domain/render/history-steps.js';
import { PROVIDER_FORMATS, renderedMessageTokens, renderHistory, type HistoryEntry, type ProviderFormat } from '../../src/domain/render/index.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import { estimateContentTokens, estimateMessageTokens } from '../../src/domain/token-estimate.js';

const user = (seq: number, content: Json[]): HistoryEntry => ({ seq, message: { id: `m${seq}`, role: 'user', content, source: { kind: 'user' } } });
const assistant = (seq: number, content: Json[]): HistoryEntry => ({ seq, message: { id: `m${seq}`, role: 'assistant', content, source: { kind: 'model' } } });
const result = (seq: number, callId: string, text: string): HistoryEntry => ({ seq, message: { id: `m${seq}`, role: 'user', content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text }] }], source: { kind: 'tool', callId } } });

const dshTotal = (h: readonly HistoryEntry[]): number => h.reduce((s, e) => s + estimateMessageTokens(e.message), 0);

describe('rendered message tokens by hand', () => {
  // user 'hello world': 4 + ceil(11/4) + 4 = 11
  // assistant reasoning 'think' (2 + 4 = 6, left out unless signed), text 'ok!' (1 + 4 = 5),
  //   call lookup (ceil(6/4) = 2) {"q":"x"} (ceil(9/4) = 3) + 4 = 9: 4 + 5 + 9 = 18 as rendered
  // result 'found': 4 + (4 + (2 + 4)) = 14
  const h = [
    user(0, [{ type: 'text', text: 'hello world' }]),
    assistant(1, [{ type: 'reasoning', text: 'think' }, { type: 'text', text: 'ok!' }, { type: 'tool-call', id: 'c1', name: 'lookup', arguments: '{"q":"x"}' }]),
    result(2, 'c1', 'found'),
  ];

  it('the DSH counts are 11, 24 and 14', () => {
    expect(h.map((e) => estimateMessageTokens(e.message))).toEqual([11, 24, 14]);
  });

  it.each<[ProviderFormat, number[]]>([
    ['openai-chat', [11, 18, 14]],
    // The assistant text and the call are two items, each with its framing: 4 + 5 and 4 + 9.
    ['openai-responses', [11, 9, 13, 14]],
    ['anthropic', [11, 18, 14]],
    ['gemini', [11, 18, 14]],
  ])('%s: %j (reasoning left out, not counted)', (format, tokens) => {
    const r = renderHistory(format, h);
    expect(r.map((m) => m.tokens)).toEqual(tokens);
    // Counted from the rendered JSON alone: a copy of it (no object shared with the rendering) counts the same.
    for (const m of r) expect(renderedMessageTokens(format, JSON.parse(JSON.stringify(m.json)) as Json)).toBe(m.tokens);
  });

  it('anthropic: signed reasoning goes back as thinking and is counted as reasoning (+6)', () => {
    const signed = [h[0]!, assistant(1, [{ type: 'reasoning', text: 'think', signature: 'sig' }, { type: 'text', text: 'ok!' }, { type: 'tool-call', id: 'c1', name: 'lookup', arguments: '{"q":"x"}' }]), h[2]!];
    expect(renderHistory('anthropic', signed).map((m) => m.tokens)).toEqual([11, 24, 14]);
  });

  it('merged messages save their framing: two parallel results in one Anthropic/Gemini user turn are 4 + 10 + 10', () => {
    const par = [
      user(0, [{ type: 'text', text: 'hello world' }]),
      assistant(1, [{ type: 'tool-call', id: 'a', name: 'f', arguments: '{}' }, { type: 'tool-call', id: 'b', name: 'f', arguments: '{}' }]),
      result(2, 'a', 'found'),
      result(3, 'b', 'found'),
    ];
    expect(renderHistory('anthropic', par).map((m) => m.tokens)).toEqual([11, 4 + 2 * (1 + 1 + 4), 24]);
    expect(renderHistory('gemini', par).map((m) => m.tokens)).toEqual([11, 16, 24]);
    expect(renderHistory('openai-chat', par).map((m) => m.tokens)).toEqual([11, 16, 14, 14]);
  });

  it('an image part is an other block (4 + its JSON length / 4); a result written by drop_unpaired counts its text', () => {
    const img = [user(0, [{ type: 'image', attachment: { mimeType: 'image/png', data: 'AAAA' } }]), assistant(1, [{ type: 'tool-call', id: 'c9', name: 'f', arguments: '{}' }])];
    const [u, a, r] = renderHistory('openai-chat', img, { dropUnpaired: true });
    const part = { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } };
    expect(u!.tokens).toBe(4 + 4 + Math.ceil(JSON.stringify(part).length / 4));
    expect(a!.tokens).toBe(4 + 1 + 1 + 4);
    const text = (r!.json as { content: string }).content;
    expect(r!.tokens).toBe(4 + 4 + Math.ceil(text.length / 4) + 4);
  });
});

describe('rendered tokens add up', () => {
  const word = fc.string({ minLength: 1, maxLength: 12 });
  const turn = fc.record({ user: fc.array(word, { minLength: 1, maxLength: 2 }), steps: fc.array(fc.record({ text: fc.option(word), calls: fc.array(fc.dictionary(fc.string({ minLength: 1, maxLength: 3 }), word, { maxKeys: 2 }), { maxLength: 2 }) }), { minLength: 1, maxLength: 3 }) });

  it.each(PROVIDER_FORMATS)('%s: text, calls and text results: the DSH counts + 4 per extra rendered message', (format) => {
    fc.assert(fc.property(fc.array(turn, { minLength: 1, maxLength: 4 }), (turns) => {
      const h: HistoryEntry[] = [];
      let n = 0;
      for (const t of turns) {
        h.push(user(h.length, t.user.map((x) => ({ type: 'text', text: x }))));
        for (const s of t.steps) {
          const content: Json[] = s.text === null ? [] : [{ type: 'text', text: s.text }];
          const ids = s.calls.map(() => `c${++n}`);
          s.calls.forEach((args, i) => content.push({ type: 'tool-call', id: ids[i]!, name: 'f', arguments: JSON.stringify(args) }));
          if (content.length === 0) continue;
          h.push(assistant(h.length, content));
          for (const id of ids) h.push(result(h.length, id, 'out'));
        }
      }
      const r = renderHistory(format, h);
      expect(r.reduce((s, m) => s + m.tokens, 0)).toBe(dshTotal(h) + 4 * (r.length - h.length));
    }), { numRuns: 200 });
  });
});

const DIR = new URL('../fixtures/reference-sessions', import.meta.url).pathname;

function history(file: string): HistoryEntry[] {
  const { header, events } = decodeJsonl(readFileSync(join(DIR, file), 'utf8'));
  const engine = SessionEngine.create();
  const plan = engine.plan(events, { mode: 'import', now: () => 0, sessionId: header.id, lookup: () => undefined, allowSeqGaps: true });
  engine.commit(plan);
  const projection = new MessageProjection(header.id);
  projection.hydrate([], 0);
  projection.apply(plan);
  return projection.entries();
}

/** What the estimator counts differently in `format`: reasoning left out, arguments sent as compact JSON. */
function adjustment(format: ProviderFormat, h: readonly HistoryEntry[]): number {
  let d = 0;
  for (const { message } of h) {
    for (const b of (Array.isArray(message['content']) ? message['content'] : []) as Block[]) {
      if (b['type'] === 'reasoning' && !(format === 'anthropic' && typeof b['signature'] === 'string')) d -= estimateContentTokens([b]);
      if (b['type'] === 'tool-call' && (format === 'anthropic' || format === 'gemini')) {
        d += Math.ceil(JSON.stringify(argumentsObject(b)).length / 4) - Math.ceil(String(b['arguments']).length / 4);
      }
    }
  }
  return d;
}

describe('the 36 reference sessions', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.jsonl')).sort();
  it.each(PROVIDER_FORMATS)('%s: every message counted; the counts add up to the DSH counts as adjusted', (format) => {
    expect(files).toHaveLength(36);
    for (const file of files) {
      const h = history(file);
      const r = renderHistory(format, h);
      for (const m of r) expect(m.tokens).toBeGreaterThan(4);
      expect(r.reduce((s, m) => s + m.tokens, 0), file).toBe(dshTotal(h) + adjustment(format, h) + 4 * (r.length - h.length));
    }
  });
});
