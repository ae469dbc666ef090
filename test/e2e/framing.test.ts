/**
 * gRPC framing errors (issue #17, finding 6), sent over a raw HTTP/2 connection: what the
 * interceptor can see becomes INVALID_ARGUMENT with details (a request stream without a complete
 * message, with two messages, or ending inside a frame, which grpc-js used to drop silently: a
 * cut import could be published without its last frame); what grpc-js answers before any
 * interceptor runs is pinned here, as listed (for both ports) at the top of
 * test/e2e/transport-conformance.test.ts, the contract docs/operations.md states.
 */
import http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { ImportSessionRequest } from '../../gen/palimpsest/v1/service.js';
import { ErrorInfo } from '../../gen/google/rpc/error_details.js';
import { Status } from '../../gen/google/rpc/status.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { api, failure, type Api } from '../support/e2e.js';

let t: TestServer;
let a: Api;
let session: http2.ClientHttp2Session;
beforeAll(async () => {
  t = await startTestServer();
  a = api(t.client);
  session = http2.connect(`http://${t.server.address}`);
});
afterAll(async () => {
  session?.close();
  await t?.stop();
});

interface Answer { httpStatus: number; code: number | undefined; message: string; reason: string; metadata: Record<string, string> }

function frame(body: Uint8Array, flag = 0, length = body.length): Buffer {
  const h = Buffer.alloc(5);
  h[0] = flag;
  h.writeUInt32BE(length, 1);
  return Buffer.concat([h, body]);
}

function send(method: string, data: Buffer | undefined, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ':method': 'POST', ':path': `/palimpsest.v1.SessionService/${method}`, 'content-type': 'application/grpc', te: 'trailers', ...headers });
    const seen: http2.IncomingHttpHeaders = {};
    let httpStatus = 0;
    req.on('response', (h) => {
      httpStatus = Number(h[':status']);
      Object.assign(seen, h);
    });
    req.on('trailers', (h) => Object.assign(seen, h));
    req.on('data', () => undefined);
    req.on('error', reject);
    req.on('close', () => {
      const raw = seen['grpc-status-details-bin'];
      let reason = '';
      let metadata: Record<string, string> = {};
      if (typeof raw === 'string') {
        for (const d of Status.decode(Buffer.from(raw, 'base64')).details) {
          if (d.typeUrl.endsWith('google.rpc.ErrorInfo')) ({ reason, metadata } = ErrorInfo.decode(d.value));
        }
      }
      const code = seen['grpc-status'] === undefined ? undefined : Number(seen['grpc-status']);
      resolve({ httpStatus, code, message: decodeURIComponent(String(seen['grpc-message'] ?? '')), reason, metadata });
    });
    req.end(data);
  });
}

const getSession = Buffer.from([0x0a, 0x02, 0x6b, 0x6b]); // GetSessionRequest{session_id: "kk"}

describe('framing errors the interceptor sees: INVALID_ARGUMENT with details', () => {
  it('a unary request stream with no message, a truncated frame, or two messages', async () => {
    const cases: [string, Buffer | undefined, RegExp][] = [
      ['no message', undefined, /ended without a complete message/],
      ['a truncated frame', frame(getSession, 0, 100), /ended inside a message/],
      ['a truncated length prefix', Buffer.from([0, 0, 0]), /ended inside a message/],
      ['two messages', Buffer.concat([frame(getSession), frame(getSession)]), /more than one message/],
    ];
    for (const [what, data, message] of cases) {
      const r = await send('GetSession', data);
      expect(r, what).toMatchObject({ httpStatus: 200, code: status.INVALID_ARGUMENT, reason: 'INVALID_ARGUMENT', metadata: { field: 'request' } });
      expect(r.message, what).toMatch(message);
    }
    // A well-formed request on the same connection is answered normally.
    expect(await send('GetSession', frame(getSession))).toMatchObject({ code: status.NOT_FOUND, reason: 'SESSION_NOT_FOUND' });
  });

  it('an import whose last frame is cut is refused, never published without it', async () => {
    const options = ImportSessionRequest.encode({ part: { $case: 'options', value: { sessionId: 'cut', labels: {}, strict: false, allowSeqGaps: false, pairingGuard: false } } }).finish();
    const lines = ['{"type":"session","version":0,"id":"cut","createdAt":1}', '{"type":"x/y","seq":0,"time":1,"data":{}}'];
    const chunk = (text: string) => ImportSessionRequest.encode({ part: { $case: 'chunk', value: Buffer.from(text) } }).finish();
    const whole = chunk(`${lines[0]}\n${lines[1]}\n`);
    const last = chunk('{"type":"x/y","seq":1,"time":1,"data":{}}\n');
    const cut = frame(last).subarray(0, 12);
    const r = await send('ImportSession', Buffer.concat([frame(options), frame(whole), cut]));
    expect(r).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_ARGUMENT', metadata: { field: 'request' } });
    expect(r.message).toMatch(/ended inside a message/);
    expect((await failure(a.getSession({ sessionId: 'cut' }))).reason).toBe('SESSION_NOT_FOUND');
    // The same frames, complete, import both events.
    const ok = await send('ImportSession', Buffer.concat([frame(options), frame(whole), frame(last)]));
    expect(ok.code).toBe(status.OK);
    expect((await a.getSession({ sessionId: 'cut' })).session?.eventCount).toBe(2);
  });
});

describe('framing errors grpc-js answers before any interceptor runs (its own codes, no details)', () => {
  it('unsupported encoding, undecompressable body, bad grpc-timeout, non-gRPC content type, unknown method', async () => {
    expect(await send('GetSession', frame(getSession, 1), { 'grpc-encoding': 'br' })).toMatchObject({ code: status.UNIMPLEMENTED, reason: '' });
    expect(await send('GetSession', frame(getSession, 1), { 'grpc-encoding': 'gzip' })).toMatchObject({ code: status.INTERNAL, reason: '', message: 'Failed to decompress message' });
    expect(await send('GetSession', frame(getSession), { 'grpc-timeout': 'soon' })).toMatchObject({ code: status.INTERNAL, reason: '' });
    expect(await send('GetSession', frame(getSession), { 'content-type': 'text/plain' })).toMatchObject({ httpStatus: 415, code: undefined });
    expect(await send('NoSuchMethod', frame(getSession))).toMatchObject({ code: status.UNIMPLEMENTED });
    // A supported compression is fine.
    expect(await send('GetSession', frame(gzipSync(getSession), 1), { 'grpc-encoding': 'gzip' })).toMatchObject({ code: status.NOT_FOUND, reason: 'SESSION_NOT_FOUND' });
  });
});
