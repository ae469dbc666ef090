/**
 * Invalid UTF-8 in proto string fields (issue #17, finding 5): grpc-js + ts-proto decoding
 * replaced invalid bytes with U+FFFD silently, so the server stored a value the client never
 * sent. Sent as raw protobuf bytes (no client library would encode them), each request is now
 * refused with INVALID_ARGUMENT / INVALID_UTF8 naming the field, and nothing is stored; a valid
 * U+FFFD (EF BF BD) is still accepted as the character it is.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, credentials, status, type ServiceError } from '@grpc/grpc-js';
import { decodeError, type DecodedError } from '../../src/client/error-details.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { api, failure, type Api } from '../support/e2e.js';

let t: TestServer;
let a: Api;
let raw: Client;

beforeAll(async () => {
  t = await startTestServer();
  a = api(t.client);
  raw = new Client(t.server.address, credentials.createInsecure());
  await a.createSession({ sessionId: 'keep', labels: { team: 'a' } });
});
afterAll(async () => {
  raw?.close();
  await t?.stop();
});

function rawCall(method: string, body: Buffer): Promise<DecodedError> {
  return new Promise((resolve) => {
    raw.makeUnaryRequest(`/palimpsest.v1.SessionService/${method}`, (b: Buffer) => b, (b: Buffer) => b, body, { deadline: Date.now() + 10_000 }, (err: ServiceError | null) => {
      resolve(err ? decodeError(err) : { code: status.OK, message: '', reason: '', domain: '', metadata: {} });
    });
  });
}

const varint = (n: number): number[] => {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
};
const lenDelim = (field: number, body: number[]): number[] => [...varint((field << 3) | 2), ...varint(body.length), ...body];
const bytes = (s: string): number[] => [...Buffer.from(s)];
/** "ok" followed by a lone continuation byte and an overlong encoding: invalid UTF-8. */
const BAD = [0x6f, 0x6b, 0x80, 0xc0, 0xaf];

/** AppendEventsRequest{session_id, events: [EventInput{type, data: EventData{json}}]} (x/y takes no surface op) */
function appendRequest(sessionId: number[], type: number[], json: number[]): Buffer {
  const event = [...lenDelim(1, type), ...lenDelim(2, lenDelim(1, json))];
  return Buffer.from([...lenDelim(1, sessionId), ...lenDelim(2, event)]);
}

describe('invalid UTF-8 in string fields', () => {
  it('is refused with INVALID_UTF8 naming the field, and nothing is stored', async () => {
    const before = await a.exportSession('keep');
    const cases: [string, Buffer, string][] = [
      ['AppendEvents', appendRequest(bytes('keep'), bytes('x/y'), [...bytes('{"t":"'), ...BAD, ...bytes('"}')]), 'events[0].data.json'],
      ['AppendEvents', appendRequest(bytes('keep'), [...bytes('x/'), ...BAD], bytes('{}')), 'events[0].type'],
      ['AppendEvents', appendRequest([...bytes('ke'), ...BAD], bytes('x/y'), bytes('{}')), 'session_id'],
      // CreateSessionRequest{session_id: "u1", labels: {BAD: "v"}} and {labels: {"k": BAD}}
      ['CreateSession', Buffer.from([...lenDelim(1, bytes('u1')), ...lenDelim(2, [...lenDelim(1, BAD), ...lenDelim(2, bytes('v'))])]), 'labels'],
      ['CreateSession', Buffer.from([...lenDelim(1, bytes('u2')), ...lenDelim(2, [...lenDelim(1, bytes('k')), ...lenDelim(2, BAD)])]), 'labels.k'],
      // CreateSessionRequest{session_id: "u3", cwd: "/" + BAD}
      ['CreateSession', Buffer.from([...lenDelim(1, bytes('u3')), ...lenDelim(3, [0x2f, ...BAD])]), 'cwd'],
    ];
    for (const [method, body, field] of cases) {
      const e = await rawCall(method, body);
      expect(e, `${method} ${field}`).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_UTF8', domain: 'palimpsest.dev', metadata: { field } });
      expect(e.badRequest?.fieldViolations[0]?.field).toBe(field);
      expect(e.message).toMatch(/not valid UTF-8/);
    }
    expect(await a.exportSession('keep')).toBe(before);
    for (const id of ['u1', 'u2', 'u3']) expect((await failure(a.getSession({ sessionId: id }))).reason).toBe('SESSION_NOT_FOUND');
    expect((await a.getSession({ sessionId: 'keep' })).session?.eventCount).toBe(0);
  });

  it('valid multi-byte text, U+FFFD included, is stored exactly', async () => {
    const text = 'é ✓ 𝄞 \uFFFD';
    const body = appendRequest(bytes('keep'), bytes('x/y'), bytes(JSON.stringify({ t: text })));
    const r = await rawCall('AppendEvents', body);
    expect(r, r.message).toMatchObject({ code: status.OK });
    const [event] = (await a.listEvents({ sessionId: 'keep' })).events;
    expect(event?.data?.kind).toEqual({ $case: 'json', value: JSON.stringify({ t: text }) });
  });
});
