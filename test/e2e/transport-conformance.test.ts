/**
 * Transport conformance (issue #31 item 6, #33 items 6 and 7): ONE file, run against the gRPC
 * port (@grpc/grpc-js) and against the web port's gRPC protocol (connect-node, plaintext HTTP/2
 * with prior knowledge), with a raw gRPC client over node:http2 (test/support/raw-grpc.ts) that
 * chooses the wire bytes: message framing across DATA frames, grpc-timeout in every unit,
 * metadata and -bin values, trailers-only responses, status details, gzip/deflate requests,
 * cancellation by the client, backpressure on server and client streams, the message size limit,
 * the advertised and admitted concurrent streams, a 60,000-character session id.
 *
 * The same table, for operators, is in docs/operations.md ("The two ports").
 *
 * What the gRPC port's @grpc/grpc-js answers BY ITSELF, before any interceptor or handler of
 * ours runs (so without our google.rpc.Status details, and with grpc-js's own wording), pinned in
 * test/e2e/framing.test.ts and in the cases below; measured on @grpc/grpc-js 1.14.7:
 *
 * | request                                          | gRPC port (grpc-js)                                          | web port, gRPC protocol (connect-node)                       |
 * |--------------------------------------------------|--------------------------------------------------------------|--------------------------------------------------------------|
 * | grpc-encoding it does not support (e.g. br)      | UNIMPLEMENTED "Received message compressed with unsupported   | gzip and br are supported; deflate: UNIMPLEMENTED "unknown    |
 * |                                                  | encoding", trailers-only (identity, deflate, gzip supported) | compression" with grpc-accept-encoding: gzip,br              |
 * | a compressed message that does not decompress    | INTERNAL "Failed to decompress message", trailers-only       | INVALID_ARGUMENT (gzip) / INTERNAL (br) "decompression failed" |
 * | a grpc-timeout that does not parse               | INTERNAL "Invalid grpc-timeout value", trailers-only         | INVALID_ARGUMENT "protocol error: invalid grpc timeout value"  |
 * | a content-type that is not application/grpc*    | HTTP 415, no grpc-status                                     | HTTP 415, no grpc-status                                     |
 * | a method the server does not serve              | UNIMPLEMENTED "The server does not implement the method ..." | UNIMPLEMENTED, trailers-only (web-server.ts unknownMethod)   |
 * | a message above --max-message-bytes             | RESOURCE_EXHAUSTED "Received message larger than max (N vs M)" | RESOURCE_EXHAUSTED "message size N is larger than configured readMaxBytes M" |
 * | the deadline (grpc-timeout) passes               | DEADLINE_EXCEEDED "Deadline exceeded"                        | DEADLINE_EXCEEDED                                            |
 *
 * Everything else (a request stream with no message, two messages for a unary call, a cut frame,
 * bytes that are not the request message) reaches our interceptor and is INVALID_ARGUMENT with
 * details (framing.test.ts, safe-decode.ts).
 */
import http2 from 'node:http2';
import { deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import {
  ExportSessionRequest, ExportSessionResponse, GetSessionRequest, GetSessionResponse, ImportOptions,
  ImportSessionRequest, ImportSessionResponse, SubscribeSurfaceRequest, SubscribeSurfaceResponse,
} from '../../gen/palimpsest/v1/service.js';
import { ErrorInfo } from '../../gen/google/rpc/error_details.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { api, type Api } from '../support/e2e.js';
import { CountingProxy, grpcFrame, grpcMessages, RawGrpc, type RawCall } from '../support/raw-grpc.js';
import { waitFor } from '../support/poll.js';

/** The main server: default limits (16 MiB messages, 1,000 calls per connection). */
let t: TestServer;
/** A server with --max-message-bytes 65536 and --max-concurrent-streams 2. */
let small: TestServer;
let a: Api;

/** A session of about 4 MB (400 events of 10 KB) as a reference JSONL file. */
const BIG_EVENTS = 400;
function bigJsonl(id: string): Buffer {
  const lines = [JSON.stringify({ type: 'session', version: 0, id, createdAt: 1000 })];
  for (let seq = 0; seq < BIG_EVENTS; seq++) lines.push(JSON.stringify({ type: 'x/note', seq, time: 2000 + seq, data: { seq, text: `${seq % 10}`.repeat(10_000) } }));
  return Buffer.from(`${lines.join('\n')}\n`);
}
/** The export of 'big' through the generated grpc-js client (the reference for the raw reads). */
let bigExport: Buffer;

beforeAll(async () => {
  [t, small] = await Promise.all([
    startTestServer({ webListen: '127.0.0.1:0' }),
    startTestServer({ webListen: '127.0.0.1:0', maxMessageBytes: 65536, maxConcurrentStreams: 2 }),
  ]);
  a = api(t.client);
  await a.createSession({ sessionId: 'conf' });
  await a.importSession({ sessionId: 'big' }, bigJsonl('big'), 32 * 1024);
  bigExport = Buffer.from(await a.exportSession('big'));
  await api(small.client).createSession({ sessionId: 'conf' });
});
afterAll(async () => {
  await t?.stop();
  await small?.stop();
});

const getSession = (sessionId: string): Buffer => Buffer.from(GetSessionRequest.encode({ sessionId }).finish());
const subscribe = (sessionId: string): Buffer => grpcFrame(SubscribeSurfaceRequest.encode(SubscribeSurfaceRequest.fromPartial({ sessionId })).finish());
const importOptions = (sessionId: string): Buffer => Buffer.from(ImportSessionRequest.encode({ part: { $case: 'options', value: ImportOptions.fromPartial({ sessionId }) } }).finish());
const importChunk = (bytes: Uint8Array): Buffer => Buffer.from(ImportSessionRequest.encode({ part: { $case: 'chunk', value: Buffer.from(bytes) } }).finish());

/** The one message of a unary answer. */
function only<T>(data: Buffer, codec: { decode(b: Uint8Array): T }): T {
  const msgs = grpcMessages(data);
  expect(msgs).toHaveLength(1);
  return codec.decode(msgs[0]!.body);
}

interface Port {
  readonly name: string;
  readonly kind: 'grpc-js' | 'connect-node';
  /** host:port of this port on a server. */
  readonly address: (s: TestServer) => string;
}
const PORTS: readonly Port[] = [
  { name: 'gRPC port (@grpc/grpc-js)', kind: 'grpc-js', address: (s) => s.server.address },
  { name: 'web port, gRPC protocol (connect-node)', kind: 'connect-node', address: (s) => `127.0.0.1:${s.server.webPort!}` },
];

describe.each(PORTS)('$name', (port) => {
  let c: RawGrpc;
  beforeAll(async () => {
    c = await RawGrpc.connect(`http://${port.address(t)}`);
  });
  afterAll(() => c?.close());

  it('message framing: a request cut byte by byte into DATA frames, and several messages in one DATA frame of a client stream', async () => {
    // Through a byte-counting proxy: each request byte really went in a DATA frame of its own
    // (a 9-byte frame header per byte).
    const proxy = await CountingProxy.start(port.address(t));
    const viaProxy = await RawGrpc.connect(`http://${proxy.address}`);
    try {
      const request = grpcFrame(getSession('conf'));
      const before = proxy.toServer;
      const byByte = await viaProxy.call('GetSession', { body: request, chunkSize: 1 });
      expect(proxy.toServer - before).toBeGreaterThanOrEqual(10 * request.length);
      expect(byByte.code).toBe(status.OK);
      expect(only(byByte.data, GetSessionResponse).session?.id).toBe('conf');
    } finally {
      viaProxy.close();
      await proxy.close();
    }

    const id = `frames-${port.kind}`;
    const file = Buffer.from(`${JSON.stringify({ type: 'session', version: 0, id, createdAt: 1 })}\n${[0, 1, 2].map((seq) => JSON.stringify({ type: 'x/y', seq, time: 1, data: { seq } })).join('\n')}\n`);
    const lines = file.toString().split(/(?<=\n)/);
    // Options and one message per line, all in one DATA frame (one write far below 16 KiB).
    const body = Buffer.concat([grpcFrame(importOptions(id)), ...lines.map((l) => grpcFrame(importChunk(Buffer.from(l))))]);
    const one = await c.call('ImportSession', { body });
    expect(one.code, one.message).toBe(status.OK);
    expect(only(one.data, ImportSessionResponse).session?.eventCount).toBe(3);
    // The same stream byte by byte, under another id: the same session.
    const id2 = `${id}-bytes`;
    const body2 = Buffer.concat([grpcFrame(importOptions(id2)), ...lines.map((l) => grpcFrame(importChunk(Buffer.from(l))))]);
    const bytes = await c.call('ImportSession', { body: body2, chunkSize: 1 });
    expect(bytes.code, bytes.message).toBe(status.OK);
    expect(only(bytes.data, ImportSessionResponse).session?.eventCount).toBe(3);
    expect((await a.exportSession(id2)).split('\n').slice(1)).toEqual((await a.exportSession(id)).split('\n').slice(1));
  });

  it('grpc-timeout in every unit (H, M, S, m, u, n) is accepted', async () => {
    for (const timeout of ['1H', '2M', '30S', '20000m', '20000000u']) {
      const r = await c.call('GetSession', { body: grpcFrame(getSession('conf')), headers: { 'grpc-timeout': timeout } });
      expect(r.code, `${timeout}: ${r.message}`).toBe(status.OK);
    }
    // Eight digits are the most the spec allows, so nanoseconds reach only ~100 ms: on a loaded
    // machine the deadline may pass first. Either way the value was parsed (an unparsable one is
    // INTERNAL / INVALID_ARGUMENT, see the table at the top).
    const n = await c.call('GetSession', { body: grpcFrame(getSession('conf')), headers: { 'grpc-timeout': '99999999n' } });
    expect([status.OK, status.DEADLINE_EXCEEDED], n.message).toContain(n.code);
  });

  it('a short grpc-timeout on a server stream (SubscribeSurface) ends it with DEADLINE_EXCEEDED', async () => {
    const started = Date.now();
    const r = await c.call('SubscribeSurface', { body: subscribe('conf'), headers: { 'grpc-timeout': '300m' } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    // The stream was served (its caught-up message) before the deadline ended it.
    expect(grpcMessages(r.data).map((m) => SubscribeSurfaceResponse.decode(m.body).kind?.$case)).toContain('caughtUp');
    expect({ code: r.code, message: r.message }).toMatchObject({ code: status.DEADLINE_EXCEEDED });
  });

  it('what the transport answers by itself (the table at the top of this file)', async () => {
    const body = grpcFrame(getSession('conf'));
    const bad = async (headers: Record<string, string>, b: Buffer = body, method = 'GetSession') => {
      const r = await c.call(method, { body: b, headers });
      return { http: r.httpStatus, code: r.code, message: r.message, reason: r.reason };
    };
    const grpcJs = port.kind === 'grpc-js';
    // A compressed flag on bytes that are not compressed.
    expect(await bad({ 'grpc-encoding': 'gzip' }, grpcFrame(getSession('conf'), true))).toMatchObject(grpcJs
      ? { http: 200, code: status.INTERNAL, message: 'Failed to decompress message', reason: '' }
      : { http: 200, code: status.INVALID_ARGUMENT, message: 'decompression failed', reason: '' });
    expect(await bad({ 'grpc-encoding': 'br' }, grpcFrame(getSession('conf'), true))).toMatchObject(grpcJs
      ? { http: 200, code: status.UNIMPLEMENTED, message: 'Received message compressed with unsupported encoding "br"', reason: '' }
      : { http: 200, code: status.INTERNAL, message: 'decompression failed', reason: '' });
    expect(await bad({ 'grpc-timeout': 'soon' })).toMatchObject(grpcJs
      ? { http: 200, code: status.INTERNAL, message: 'Invalid grpc-timeout value "soon"', reason: '' }
      : { http: 200, code: status.INVALID_ARGUMENT, message: 'protocol error: invalid grpc timeout value: soon', reason: '' });
    expect(await bad({ 'content-type': 'text/plain' })).toMatchObject({ http: 415, code: undefined });
    // An unknown method is UNIMPLEMENTED for a gRPC client: grpc-status 12, or HTTP 404 (which the
    // gRPC HTTP-status mapping turns into UNIMPLEMENTED).
    const unknown = await bad({}, body, 'NoSuchMethod');
    expect(unknown.code === status.UNIMPLEMENTED || (unknown.code === undefined && unknown.http === 404), JSON.stringify(unknown)).toBe(true);
    // The connection still serves.
    expect((await c.call('GetSession', { body })).code).toBe(status.OK);
  });

  it('custom metadata and -bin metadata values (padded and unpadded base64) are accepted', async () => {
    const r = await c.call('GetSession', {
      body: grpcFrame(getSession('conf')),
      headers: {
        'x-conformance': 'a plain value',
        'x-conformance-bin': Buffer.from([0, 1, 2, 0xfe, 0xff]).toString('base64'),
        'x-unpadded-bin': Buffer.from([0xde, 0xad]).toString('base64').replace(/=+$/, ''),
      },
    });
    expect(r.code, r.message).toBe(status.OK);
    expect(only(r.data, GetSessionResponse).session?.id).toBe('conf');
  });

  it('an error before any message: the status without DATA (trailers-only on grpc-js)', async () => {
    const r = await c.call('GetSession', { body: grpcFrame(getSession('missing')) });
    expect(r.httpStatus).toBe(200);
    expect(r.data.length).toBe(0);
    expect(r.code).toBe(status.NOT_FOUND);
    if (port.kind === 'grpc-js') {
      // One HEADERS frame with END_STREAM carrying grpc-status.
      expect(r.trailersOnly).toBe(true);
      expect(r.headers['grpc-status']).toBe('5');
    } else {
      // connect-node always sends response headers and then trailers (no DATA in between); the
      // gRPC spec permits Trailers-Only for an immediate error but does not require it, and
      // every gRPC client reads the status from either.
      expect(r.trailersOnly).toBe(false);
      expect(r.trailers?.['grpc-status']).toBe('5');
    }
  });

  it('status details: grpc-status-details-bin is a google.rpc.Status with ErrorInfo SESSION_NOT_FOUND', async () => {
    const r = await c.call('GetSession', { body: grpcFrame(getSession('missing')) });
    expect(r.details).toBeDefined();
    expect(r.details!.code).toBe(status.NOT_FOUND);
    expect(r.details!.message).toBe(r.message);
    const infos = r.details!.details.filter((d) => d.typeUrl === 'type.googleapis.com/google.rpc.ErrorInfo').map((d) => ErrorInfo.decode(d.value));
    expect(infos).toHaveLength(1);
    expect(infos[0]).toMatchObject({ reason: 'SESSION_NOT_FOUND', domain: 'palimpsest.dev', metadata: { sessionId: 'missing' } });
    expect(r.reason).toBe('SESSION_NOT_FOUND');
  });

  it('compressed requests: gzip on both ports, deflate where the server implements it', async () => {
    const gz = await c.call('GetSession', { body: grpcFrame(gzipSync(getSession('conf')), true), headers: { 'grpc-encoding': 'gzip' } });
    expect(gz.code, gz.message).toBe(status.OK);
    expect(only(gz.data, GetSessionResponse).session?.id).toBe('conf');
    // A client stream of gzip messages mixed with an uncompressed one (the flag is per message).
    const id = `gzip-${port.kind}`;
    const file = `${JSON.stringify({ type: 'session', version: 0, id, createdAt: 1 })}\n${JSON.stringify({ type: 'x/y', seq: 0, time: 1, data: {} })}\n`;
    const body = Buffer.concat([grpcFrame(gzipSync(importOptions(id)), true), grpcFrame(importChunk(Buffer.from(file.slice(0, 20)))), grpcFrame(gzipSync(importChunk(Buffer.from(file.slice(20)))), true)]);
    const imp = await c.call('ImportSession', { body, headers: { 'grpc-encoding': 'gzip' } });
    expect(imp.code, imp.message).toBe(status.OK);
    expect(only(imp.data, ImportSessionResponse).session?.eventCount).toBe(1);

    const df = await c.call('GetSession', { body: grpcFrame(deflateSync(getSession('conf')), true), headers: { 'grpc-encoding': 'deflate' } });
    if (port.kind === 'grpc-js') {
      expect(df.code, df.message).toBe(status.OK);
      expect(only(df.data, GetSessionResponse).session?.id).toBe('conf');
    } else {
      // connect-node ships gzip and brotli only (no deflate compression exists for it): it
      // answers as the gRPC spec asks, UNIMPLEMENTED with the encodings it accepts.
      expect(df.code).toBe(status.UNIMPLEMENTED);
      expect(df.trailers?.['grpc-accept-encoding']).toMatch(/gzip/);
    }
  });

  it('cancellation: RST_STREAM CANCEL on open subscriptions releases their call slots (--max-concurrent-streams 2)', async () => {
    const s = await RawGrpc.connect(`http://${port.address(small)}`);
    try {
      const open = async (): Promise<RawCall> => {
        const call = s.start('SubscribeSurface', { body: subscribe('conf') });
        await waitFor(() => call.received() > 0, 5_000, 'the first subscription message');
        return call;
      };
      for (let round = 0; round < 3; round++) {
        const calls = [await open(), await open()];
        for (const call of calls) call.stream.close(http2.constants.NGHTTP2_CANCEL);
        for (const call of calls) expect((await call.answer).rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
      }
      // Two more are served (not refused with TOO_MANY_STREAMS) and stay open.
      const last = [await open(), await open()];
      for (const call of last) {
        expect(call.stream.closed).toBe(false);
        call.stream.close(http2.constants.NGHTTP2_CANCEL);
      }
    } finally {
      s.close();
    }
  });

  it('backpressure on a server stream: a paused reader of a 4 MB export holds the server to the flow-control windows, then gets it intact', async () => {
    const proxy = await CountingProxy.start(port.address(t));
    const s = await RawGrpc.connect(`http://${proxy.address}`);
    try {
      const call = s.start('ExportSession', { body: grpcFrame(ExportSessionRequest.encode(ExportSessionRequest.fromPartial({ sessionId: 'big' })).finish()) });
      // Pause on the first DATA the client reads.
      let atPause = -1;
      call.stream.once('data', () => {
        call.stream.pause();
        atPause = proxy.toClient;
      });
      await waitFor(() => atPause >= 0, 10_000, 'the first export bytes');
      // Wait until the server stops sending (no byte for 300 ms).
      let last = -1;
      let stillSince = Date.now();
      await waitFor(() => {
        if (proxy.toClient !== last) {
          last = proxy.toClient;
          stillSince = Date.now();
        }
        return Date.now() - stillSince >= 300;
      }, 10_000, 'the paused export to stall', 50);
      const whilePaused = proxy.toClient - atPause;
      // The client's stream and connection windows are 64 KiB each (node:http2 defaults), and a
      // paused stream sends no WINDOW_UPDATE: everything the server sent is bounded by them (plus
      // frame headers), nowhere near the 4 MB of the export (measured: 65.7 KB on both ports).
      expect(whilePaused).toBeLessThan(256 * 1024);
      expect(proxy.toClient).toBeLessThan(256 * 1024);
      call.stream.resume();
      const r = await call.answer;
      expect(r.code, r.message).toBe(status.OK);
      const file = Buffer.concat(grpcMessages(r.data).map((m) => Buffer.from(ExportSessionResponse.decode(m.body).chunk)));
      expect(file.length).toBe(bigExport.length);
      expect(file.equals(bigExport)).toBe(true);
    } finally {
      s.close();
      await proxy.close();
    }
  });

  it('backpressure on a client stream: a 4 MB ImportSession upload in many messages completes and the session equals the input', async () => {
    const id = `upload-${port.kind}`;
    const file = bigJsonl(id);
    const parts = [grpcFrame(importOptions(id))];
    for (let i = 0; i < file.length; i += 16 * 1024) parts.push(grpcFrame(importChunk(file.subarray(i, i + 16 * 1024))));
    // Written in 64 KiB writes, each only after the previous one was taken (flow control).
    const r = await c.call('ImportSession', { body: Buffer.concat(parts), chunkSize: 64 * 1024 });
    expect(r.code, r.message).toBe(status.OK);
    expect(only(r.data, ImportSessionResponse).session?.eventCount).toBe(BIG_EVENTS);
    // The export of an imported file is the file itself.
    const exported = Buffer.from(await a.exportSession(id));
    expect(exported.length).toBe(file.length);
    expect(exported.equals(file)).toBe(true);
  });

  it('the message size limit (--max-message-bytes 65536): a 100 KiB request gets RESOURCE_EXHAUSTED, and the connection serves the next call', async () => {
    const s = await RawGrpc.connect(`http://${port.address(small)}`);
    try {
      const r = await s.call('GetSession', { body: grpcFrame(getSession('x'.repeat(100 * 1024))) });
      // An answer, never silence (#33 item 6).
      expect(r.httpStatus).toBe(200);
      expect(r.code, r.message).toBe(status.RESOURCE_EXHAUSTED);
      const next = await s.call('GetSession', { body: grpcFrame(getSession('conf')) });
      expect(next.code, next.message).toBe(status.OK);
      expect(only(next.data, GetSessionResponse).session?.id).toBe('conf');
    } finally {
      s.close();
    }
  });

  it('a 60,000-character session id is INVALID_ARGUMENT with a short message, and the connection stays usable', async () => {
    const r = await c.call('GetSession', { body: grpcFrame(getSession('y'.repeat(60_000))) });
    expect(r.code).toBe(status.INVALID_ARGUMENT);
    expect(r.reason).toBe('INVALID_SESSION_ID');
    expect(r.message.length).toBeLessThan(1024);
    const next = await c.call('GetSession', { body: grpcFrame(getSession('conf')) });
    expect(next.code, next.message).toBe(status.OK);
  });

  it('advertises SETTINGS_MAX_CONCURRENT_STREAMS equal to the calls it admits (--max-concurrent-streams, 1,000)', () => {
    expect(c.remoteSettings.maxConcurrentStreams).toBe(1000);
  });

  it('1,000 concurrent streams on one connection are served, and 2,000 from a client that honours the advertised limit get no RESOURCE_EXHAUSTED', async () => {
    const s = await RawGrpc.connect(`http://${port.address(t)}`);
    try {
      // node:http2 honours SETTINGS_MAX_CONCURRENT_STREAMS: streams past it wait in the client.
      const calls = Array.from({ length: 2000 }, () => s.start('SubscribeSurface', { body: subscribe('conf') }));
      const served = (): RawCall[] => calls.filter((x) => x.received() > 0);
      const ended = (): RawCall[] => calls.filter((x) => x.stream.closed);
      // How the ended calls ended, counted by status ({} when none ended).
      const endings = async (which: RawCall[]): Promise<Record<string, number>> => {
        const out: Record<string, number> = {};
        for (const x of await Promise.all(which.map((y) => y.answer))) out[`${x.code} ${x.reason} ${x.message}`] = (out[`${x.code} ${x.reason} ${x.message}`] ?? 0) + 1;
        return out;
      };
      // The first 1,000 are open at once, each with its caught-up message, none refused.
      await waitFor(() => served().length + ended().length >= 1000, 30_000, '1,000 subscriptions to answer');
      expect(await endings(ended())).toEqual({});
      expect(served().length).toBeGreaterThanOrEqual(1000);
      // Ending them lets the client open the rest; those are served too.
      const first = served();
      for (const x of first) x.stream.close(http2.constants.NGHTTP2_CANCEL);
      await Promise.all(first.map((x) => x.answer));
      await waitFor(() => calls.every((x) => x.received() > 0 || x.stream.closed), 30_000, 'the other 1,000 subscriptions to answer');
      const rest = calls.filter((x) => !first.includes(x));
      expect(await endings(rest.filter((x) => x.stream.closed))).toEqual({});
      expect(rest.every((x) => x.received() > 0)).toBe(true);
      for (const x of rest) x.stream.close(http2.constants.NGHTTP2_CANCEL);
    } finally {
      s.close();
    }
  });
});
