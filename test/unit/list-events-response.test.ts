/**
 * The hand-encoded ListEvents response (json data form) and AppendEvents response are byte for
 * byte the generated encodings.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppendEventsResponse, ListEventsResponse } from '../../gen/palimpsest/v1/service.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { eventToProto } from '../../src/server/convert.js';
import { SessionEvent as PbSessionEvent } from '../../gen/palimpsest/v1/event.js';
import { encodeAppendEventsResponse, encodeListEventsResponse, fastEncodable } from '../../src/server/wire/event-encode.js';

type Envelope = Omit<SessionEvent, 'data'>;

const expected = (events: { event: Envelope; text: string }[], token: string): Buffer =>
  Buffer.from(ListEventsResponse.encode({ events: events.map((x) => eventToProto({ ...x.event, data: null } as SessionEvent, 'json', x.text)), nextPageToken: token }).finish());

function encode(events: { event: Envelope; text: string }[], token: string): Buffer {
  const slow = new Map<number, Uint8Array>();
  events.forEach((x, i) => {
    if (!fastEncodable(x.event)) slow.set(i, PbSessionEvent.encode(eventToProto({ ...x.event, data: null } as SessionEvent, 'json', x.text)).finish());
  });
  return encodeListEventsResponse(events.map((x) => ({ ...x, textBytes: Buffer.byteLength(x.text) })), token, slow);
}

const num = fc.oneof(fc.constant(0), fc.nat({ max: 300 }), fc.nat({ max: 2 ** 36 }), fc.maxSafeNat());
// time is an int64: negative times go through the generated encoder.
const time = fc.oneof(num, fc.integer({ min: -(2 ** 40), max: -1 }));
const envelope: fc.Arbitrary<Envelope> = fc.record(
  {
    seq: num,
    time,
    type: fc.oneof(fc.constant(''), fc.constant('tool/result'), fc.string({ unit: 'grapheme', maxLength: 20 }), fc.string({ unit: 'binary', maxLength: 8 })),
    sourceEventSeqs: fc.array(num, { maxLength: 5 }),
    surfaceOp: fc.oneof(fc.constant('append' as const), fc.record({ op: fc.constant('replace' as const), start: num, end: num })),
    ignorable: fc.constant(true as const),
  },
  { requiredKeys: ['seq', 'time', 'type'] },
);

describe('encodeListEventsResponse', () => {
  it('equals the generated encoding', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ event: envelope, text: fc.oneof(fc.constant(''), fc.json(), fc.string({ unit: 'binary', maxLength: 300 }), fc.string({ minLength: 200, maxLength: 20000 })) }), { maxLength: 12 }),
        fc.oneof(fc.constant(''), fc.base64String(), fc.string({ unit: 'binary' })),
        (events, token) => {
          expect(encode(events, token).equals(expected(events, token))).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('equals the generated encoding at every varint length boundary and the 32-bit split', () => {
    const edges = [0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 53 - 1, 1_760_000_000_000];
    for (let k = 1; k <= 7; k++) edges.push(2 ** (7 * k) - 1, 2 ** (7 * k), 2 ** (7 * k) + 1);
    const events = edges.filter((v) => Number.isSafeInteger(v)).map((v) => ({
      event: { seq: v, time: v, type: 't', sourceEventSeqs: [v, 0, v], surfaceOp: { op: 'replace' as const, start: v, end: v } },
      text: '{}',
    }));
    expect(events.every((x) => fastEncodable(x.event))).toBe(true);
    expect(encode(events, '').equals(expected(events, ''))).toBe(true);
  });

  it('writes ASCII held in a two-byte string (sliced from non-ASCII text) exactly', () => {
    const line = 'ASCII type\u00e9 and text {"a":"plain"}\u{1f600}';
    const type = line.slice(0, 10);
    const text = line.slice(line.indexOf('{'), line.indexOf('}') + 1);
    const events = [{ event: { seq: 1, time: 2, type }, text }, { event: { seq: 2, time: 3, type: 'é' }, text: '"ü😀"' }];
    expect(encode(events, '').equals(expected(events, ''))).toBe(true);
  });

  it('falls back to the generated encoder only for numbers it does not encode itself', () => {
    expect(fastEncodable({ seq: 2 ** 40, time: 1_760_000_000_000, type: 't', sourceEventSeqs: [0, 1, 2 ** 50], surfaceOp: { op: 'replace', start: 0, end: 3 } })).toBe(true);
    expect(fastEncodable({ seq: 1, time: -5, type: 't' })).toBe(false);
  });
});

describe('encodeAppendEventsResponse', () => {
  it('equals the generated encoding', () => {
    fc.assert(
      fc.property(fc.array(num, { maxLength: 10 }), fc.boolean(), num, (seqs, replayed, surfaceLength) => {
        const expected = Buffer.from(AppendEventsResponse.encode({ seqs, replayed, surfaceLength }).finish());
        expect(encodeAppendEventsResponse(seqs, replayed, surfaceLength)?.equals(expected)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('declines numbers it does not encode (the generated encoder then decides)', () => {
    expect(encodeAppendEventsResponse([-1], false, 3)).toBeUndefined();
    expect(encodeAppendEventsResponse([1], false, 2 ** 60)).toBeUndefined();
  });
});
