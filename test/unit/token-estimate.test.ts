/**
 * The token estimator follows the reference's token meter
 * (toninfo/deepseek-harness packages/llm/token-meter/src/estimate.ts, `estimateContent` and
 * `estimateMessage`): per content block, text/reasoning ceil(len/4) + 4, a tool call
 * ceil(name/4) + ceil(arguments/4) + 4, a tool result its inner content + 4, any other block
 * 4 + ceil(JSON/4); plus 4 per message. Lengths are UTF-16 code units (JS `length`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { decodeJsonl } from '../../src/domain/jsonl-reader.js';
import { messageOf } from '../../src/domain/message-view.js';
import { estimateContentTokens, estimateMessageTokens } from '../../src/domain/token-estimate.js';
import type { Json, SessionEvent } from '../../src/domain/event.js';

const msg = (content: Json[]): Json => ({ role: 'user', content });

describe('estimateMessageTokens (reference estimate.ts estimateMessage)', () => {
  it('two one-character text blocks are 14 (the reference), not 9 (the old whole-message count)', () => {
    expect(estimateMessageTokens(msg([{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }]))).toBe(14);
  });

  it('a single text block is ceil(len/4) + 4 + 4', () => {
    expect(estimateMessageTokens(msg([{ type: 'text', text: 'x'.repeat(9) }]))).toBe(3 + 4 + 4);
    expect(estimateMessageTokens(msg([{ type: 'text', text: '' }]))).toBe(8);
  });

  it('a reasoning block is priced as text', () => {
    expect(estimateMessageTokens(msg([{ type: 'reasoning', text: 'abcde' }]))).toBe(2 + 4 + 4);
  });

  it('a tool call rounds its name and its arguments separately', () => {
    // ceil(5/4)=2 + ceil(5/4)=2 + 4 = 8, + 4 for the message (one ceil over 10 chars would give 3)
    expect(estimateMessageTokens({ role: 'assistant', content: [{ type: 'tool-call', id: 'c1', name: 'abcde', arguments: '{"a":' }] })).toBe(12);
  });

  it('a tool result is its inner content + 4, recursively', () => {
    const inner: Json[] = [{ type: 'text', text: 'abcd' }, { type: 'text', text: 'e' }];
    // inner: (1 + 4) + (1 + 4) = 10; block +4 = 14; message +4 = 18
    expect(estimateMessageTokens(msg([{ type: 'tool-result', toolCallId: 'c1', content: inner }]))).toBe(18);
  });

  it('an image (or any other block) is 4 + ceil(JSON.stringify(block).length / 4)', () => {
    const image: Json = { type: 'image', mediaType: 'image/png', data: 'QUJD' };
    const json = JSON.stringify(image).length;
    expect(estimateMessageTokens(msg([image]))).toBe(4 + Math.ceil(json / 4) + 4);
    const other: Json = { type: 'custom-x', value: [1, 2, 3] };
    expect(estimateContentTokens([other])).toBe(4 + Math.ceil(JSON.stringify(other).length / 4));
  });

  it('counts UTF-16 code units like the reference (an astral character is 2)', () => {
    expect(estimateMessageTokens(msg([{ type: 'text', text: '😀😀😀' }]))).toBe(Math.ceil(6 / 4) + 8);
  });

  it('a message without content is its role framing only', () => {
    expect(estimateMessageTokens({ role: 'user' })).toBe(4);
    expect(estimateMessageTokens(msg([]))).toBe(4);
  });

  it('gives the same answer twice for the same object (cached) and for an equal copy', () => {
    const m = msg([{ type: 'text', text: 'hello world' }, { type: 'tool-call', id: 'x', name: 'n', arguments: '{}' }]);
    const a = estimateMessageTokens(m);
    expect(estimateMessageTokens(m)).toBe(a);
    expect(estimateMessageTokens(JSON.parse(JSON.stringify(m)) as Json)).toBe(a);
  });
});

describe('the recorded shadowedTokenCount of every reference session (token-meter estimate.ts, as the pruner and compaction-basic price shadowed nodes)', () => {
  const dir = new URL('../fixtures/reference-sessions/', import.meta.url);
  const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl'));
  let checked = 0;
  it.each(files)('%s: each compaction/summary and compaction/prune equals the estimate of its shadowed messages', (file) => {
    const { header, events } = decodeJsonl(readFileSync(new URL(file, dir), 'utf8'));
    const bySeq = new Map(events.map((e) => [(e as { seq: number }).seq, e as unknown as SessionEvent]));
    for (const e of events) {
      if (e.type !== 'compaction/summary' && e.type !== 'compaction/prune') continue;
      const d = e.data as { shadowedSeqs: number[]; shadowedTokenCount: number };
      const sum = d.shadowedSeqs.reduce((a, s) => a + estimateMessageTokens(messageOf(bySeq.get(s) as SessionEvent, header.id)), 0);
      expect(sum, `${file} seq ${(e as { seq: number }).seq}`).toBe(d.shadowedTokenCount);
      checked++;
    }
  });
  it('checked at least one recorded count', () => {
    expect(checked).toBeGreaterThan(0);
  });
});
