/** The pre-encoded GetMessages model-history response is byte for byte GetMessagesResponse.encode. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GetMessagesResponse } from '../../gen/palimpsest/v1/service.js';
import type { Json } from '../../src/domain/event.js';
import { modelHistoryResponse } from '../../src/server/handlers.js';
import { estimateMessageTokens } from '../../src/domain/token-estimate.js';

const expected = (messages: { seq: number; message: Json }[], headSeq: number | undefined): Buffer =>
  Buffer.from(GetMessagesResponse.encode({ messages: messages.map((m) => ({ seq: m.seq, messageJson: JSON.stringify(m.message), message: undefined, tokens: estimateMessageTokens(m.message) })), headSeq, nextPageToken: '', rendered: [] }).finish());

describe('modelHistoryResponse', () => {
  it('equals the generated encoding, also when cached entries are reused or a message moves to another seq', () => {
    const shared = Object.freeze({ id: 'm', role: 'user', content: Object.freeze(['é ✓ 𝄞']) }) as unknown as Json;
    fc.assert(
      fc.property(
        fc.array(fc.record({ seq: fc.nat({ max: 2 ** 40 }), message: fc.oneof(fc.constant(shared), fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 }))) }), { maxLength: 20 }),
        fc.option(fc.nat({ max: 2 ** 40 }), { nil: undefined }),
        (messages, headSeq) => {
          const list = messages as { seq: number; message: Json }[];
          expect(modelHistoryResponse(list, headSeq).equals(expected(list, headSeq))).toBe(true);
          // Second call: every entry from the cache.
          expect(modelHistoryResponse(list, headSeq).equals(expected(list, headSeq))).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
    const a = [{ seq: 5, message: shared }];
    const b = [{ seq: 9, message: shared }];
    expect(modelHistoryResponse(a, 5).equals(expected(a, 5))).toBe(true);
    expect(modelHistoryResponse(b, 9).equals(expected(b, 9))).toBe(true);
    expect(modelHistoryResponse([], undefined).length).toBe(0);
  });

  it('answers an unchanged history with the same bytes, and any change (an entry, its seq, the head, the token) with fresh ones', () => {
    const m = (text: string): Json => ({ id: text, role: 'user', content: [{ type: 'text', text }] }) as unknown as Json;
    const list = [{ seq: 1, message: m('a') }, { seq: 3, message: m('b') }, { seq: 4, message: m('c') }];
    const first = modelHistoryResponse(list, 4);
    expect(first.equals(expected(list, 4))).toBe(true);
    // The same entries (a fresh array of the same objects, as the projection hands them): the same bytes.
    expect(modelHistoryResponse(list.map((e) => ({ ...e })), 4)).toBe(first);
    // Another object at one position (same seq, same text): encoded again, still right.
    const replaced = [list[0]!, { seq: 3, message: m('B') }, list[2]!];
    const second = modelHistoryResponse(replaced, 4);
    expect(second).not.toBe(first);
    expect(second.equals(expected(replaced, 4))).toBe(true);
    // The same objects at other seqs, another head, a page token: each its own response.
    const moved = list.map((e) => ({ seq: e.seq + 10, message: e.message }));
    expect(modelHistoryResponse(moved, 14).equals(expected(moved, 14))).toBe(true);
    expect(modelHistoryResponse(list, 9).equals(expected(list, 9))).toBe(true);
    const paged = modelHistoryResponse(list, 4, 'tok');
    expect(GetMessagesResponse.decode(paged).nextPageToken).toBe('tok');
    expect(paged.subarray(0, first.length - 2).equals(first.subarray(0, first.length - 2))).toBe(true);
    // The caller's array is its own: changing it after the call changes nothing kept.
    const mine = list.map((e) => ({ ...e }));
    const kept = modelHistoryResponse(mine, 4);
    mine[1] = { seq: 3, message: m('x') };
    expect(modelHistoryResponse(mine, 4).equals(expected(mine, 4))).toBe(true);
    expect(modelHistoryResponse(list, 4)).toBe(kept);
    // A longer or shorter history is never the cached one.
    expect(modelHistoryResponse(list.slice(0, 2), 4).equals(expected(list.slice(0, 2), 4))).toBe(true);
  });

  it('a read that does not keep (as of an earlier seq) neither takes a kept response nor pushes the kept ones out', () => {
    const m = (text: string): Json => ({ id: text, role: 'user', content: [{ type: 'text', text }] }) as unknown as Json;
    const hot = [{ seq: 1, message: m('hot') }];
    const kept = modelHistoryResponse(hot, 1);
    for (let i = 0; i < 20; i++) {
      const once = [{ seq: 1, message: m(`as-of ${i}`) }];
      expect(modelHistoryResponse(once, 1, '', false).equals(expected(once, 1))).toBe(true);
    }
    // Not taken from the kept ones either: fresh bytes, equal.
    const again = modelHistoryResponse(hot, 1, '', false);
    expect(again).not.toBe(kept);
    expect(again.equals(kept)).toBe(true);
    expect(modelHistoryResponse(hot, 1)).toBe(kept);
  });
});
