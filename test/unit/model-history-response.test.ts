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
});
