/**
 * The web port's binary pass-through (grpc-call-bridge.ts passThrough): a handler's encoded
 * response reaches a binary Connect / gRPC-Web client byte for byte, without a decode.
 */
import { describe, expect, it } from 'vitest';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { passThrough } from '../../src/server/web/connect-adapter.js';
import { GetMessagesResponseSchema, SubscribeSurfaceResponseSchema } from '../../gen/es/palimpsest/v1/service_pb.js';
import { GetMessagesResponse, SubscribeSurfaceResponse } from '../../gen/palimpsest/v1/service.js';

describe('passThrough', () => {
  const cases: [string, Uint8Array, typeof SubscribeSurfaceResponseSchema | typeof GetMessagesResponseSchema][] = [
    ['a replace delta with its event', SubscribeSurfaceResponse.encode({
      cursor: 300, kind: { $case: 'replace', value: { start: 1, end: 200, seq: 300, shadowedSeqs: [1, 2, 200] } },
      event: { seq: 300, time: 1_790_000_000_000, type: 'user/message', data: { kind: { $case: 'json', value: '{"id":"k"}' } }, sourceEventSeqs: { seqs: [1] }, surfaceOp: { $case: 'replace', value: { start: 1, end: 200 } }, ignorable: false },
      message: { seq: 300, messageJson: '{"id":"k"}', message: undefined, tokens: 4 },
    }).finish(), SubscribeSurfaceResponseSchema],
    ['a caught-up signal with no cursor', SubscribeSurfaceResponse.encode({ cursor: undefined, kind: { $case: 'caughtUp', value: {} }, event: undefined, message: undefined }).finish(), SubscribeSurfaceResponseSchema],
    ['an empty message', new Uint8Array(0), GetMessagesResponseSchema],
    ['a large page', GetMessagesResponse.encode({ messages: Array.from({ length: 500 }, (_, i) => ({ seq: i, messageJson: `{"id":"m${i}","text":"${'x'.repeat(i)}"}`, message: undefined, tokens: i })), headSeq: 499, nextPageToken: 't', rendered: [] }).finish(), GetMessagesResponseSchema],
    ['a field number with a two-byte tag (unknown to the schema)', Uint8Array.from([0xa2, 0x01, 0x02, 0x68, 0x69]), GetMessagesResponseSchema],
  ];
  for (const [name, bytes, schema] of cases) {
    it(`writes ${name} exactly as encoded`, () => {
      const out = toBinary(schema, passThrough(schema, bytes) as never);
      expect(Buffer.from(out).equals(Buffer.from(bytes))).toBe(true);
      expect(fromBinary(schema, out)).toEqual(fromBinary(schema, bytes));
    });
  }
});
