/**
 * The CLI's envelope conversion (issue #16 items 1 and 2): data goes out as written, the proto
 * carries what it can, and what it cannot is judged by the domain's stateless rules in batch order.
 */
import { describe, expect, it } from 'vitest';
import { envelopesToEventInputs, parseEnvelopeLine } from '../../src/client/event-input.js';
import { memberTexts } from '../../src/domain/json-member-text.js';

const batch = (...lines: string[]) => envelopesToEventInputs(lines.map((l, i) => parseEnvelopeLine(l, i, i + 1)));

describe('memberTexts', () => {
  it('given an object text, then each member value is its source text (whitespace around it dropped, escaped keys decoded, the last duplicate kept)', () => {
    const m = memberTexts(' { "type" : "a\\"b" , "d\\u0061ta" :{"v": 1e400 ,"s":"}]"} , "n":-0,"x":[1,[2]],"t":true,"x":null}');
    expect(Object.fromEntries(m)).toEqual({ type: '"a\\"b"', data: '{"v": 1e400 ,"s":"}]"}', n: '-0', x: 'null', t: 'true' });
  });
});

describe('envelopesToEventInputs', () => {
  it('given data with 1e400 and -0, then it is sent exactly as written (for the server to refuse), never as null and 0', () => {
    const [e] = batch('{"type":"note","data":{"v":1e400,"z":-0}}');
    expect(e?.data?.kind).toEqual({ $case: 'json', value: '{"v":1e400,"z":-0}' });
  });

  it('given unrepresentable markers on a log-only type, then representable stand-ins that the server refuses for the same reason', () => {
    const [e] = batch('{"type":"turn/start","data":{"turn":1},"surfaceOp":null,"sourceEventSeqs":"x"}');
    expect([e?.surfaceOp, e?.sourceEventSeqs]).toEqual([{ $case: 'append', value: {} }, { seqs: [] }]);
  });

  it('given an unrepresentable envelope after one with a stateless fault, then the earlier fault is reported with its index and line (batch order, as the server)', () => {
    expect(() => batch('{"type":"user/message","data":{},"surfaceOp":"append"}', '{"type":"user/message","data":{},"surfaceOp":null}'))
      .toThrow(expect.objectContaining({ reason: 'MESSAGE_SHAPE', index: 0, metadata: expect.objectContaining({ line: '1', index: '0' }) }));
  });

  it('given an invalid marker and invalid citations on a surface type, then REPLACE_OP_INVALID (the marker first)', () => {
    expect(() => batch('{"type":"tool/result","data":{"turn":1,"step":1,"callId":"c","content":[],"isError":false},"surfaceOp":{"op":"append"},"sourceEventSeqs":"x"}'))
      .toThrow(expect.objectContaining({ reason: 'REPLACE_OP_INVALID', index: 0 }));
  });

  it('given -0 as a seq, time or citation, then NOT_JSON (the proto would turn it into 0)', () => {
    for (const l of ['{"type":"note","data":{},"seq":-0}', '{"type":"note","data":{},"time":-0}', '{"type":"user/message","data":{},"surfaceOp":"append","sourceEventSeqs":[-0]}']) {
      expect(() => batch(l)).toThrow(expect.objectContaining({ reason: 'NOT_JSON' }));
    }
  });
});
