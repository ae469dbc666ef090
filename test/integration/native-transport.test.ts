/**
 * The native gRPC transport (src/server/native) on the wire: a NativeGrpcServer with a small test
 * service, called by grpc-js clients and by raw node:http2 requests. Each case pins one protocol
 * behaviour (framing, limits, errors and their trailers, metadata, compression, deadlines,
 * cancellation, shutdown, hostile bytes).
 */
import http2 from 'node:http2';
import { connect as netConnect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client, credentials, Metadata, status, type ServiceDefinition, type ServiceError, type UntypedHandleCall } from '@grpc/grpc-js';
import { NativeGrpcServer } from '../../src/server/native/native-server.js';
import { StreamLimiter } from '../../src/server/auth.js';
import { makeRpcTelemetry } from '../../src/server/rpc-telemetry.js';
import { createLogger } from '../../src/server/logger.js';
import { NO_METRICS } from '../../src/server/metrics.js';
import { waitFor } from '../support/poll.js';
import { TEST_TRANSPORT } from '../support/test-server.js';

/** The HTTP/2 server under the calls: src/server/http2 by default, node:http2 in the `e2e-node-http2` project. */
const HTTP2 = TEST_TRANSPORT === 'native' ? 'node' : 'js';

const raw = (b: Buffer): Buffer => b;
function method(name: string, requestStream: boolean, responseStream: boolean) {
  return { path: `/test.Echo/${name}`, requestStream, responseStream, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw, originalName: name };
}
const DEFINITION = {
  echo: method('Echo', false, false),
  hold: method('Hold', false, false),
  meta: method('Meta', false, false),
  watch: method('Watch', false, true),
  collect: method('Collect', true, false),
  slow: method('Slow', true, false),
  big: method('Big', false, false),
  slowCounted: { ...method('SlowCounted', true, false), requestDeserialize: (b: Buffer): Buffer => { decoded++; return b; } },
} as unknown as ServiceDefinition;
/** Requests SlowCounted's deserializer has decoded. */
let decoded = 0;

type Cb = (err: unknown, value?: unknown, trailer?: Metadata) => void;
interface TestCall { request: Buffer; metadata: Metadata; cancelled: boolean; on(e: string, f: (...a: unknown[]) => void): void; write(b: Buffer): boolean; end(): void; getDeadline(): number }

const MAX = 64 * 1024;
const held: { call: TestCall; cb: Cb; events: string[] }[] = [];
const watchers: { call: TestCall; events: string[] }[] = [];
const slowCalls: { call: TestCall & AsyncIterable<Buffer> & { stream: http2.ServerHttp2Stream }; cb: Cb }[] = [];
const HANDLERS = {
  echo: (call: TestCall, cb: Cb) => {
    const text = call.request.toString();
    if (text.startsWith('fail:')) cb({ code: status.FAILED_PRECONDITION, details: text.slice(5) });
    else cb(null, call.request);
  },
  hold: (call: TestCall, cb: Cb) => {
    const events: string[] = [];
    call.on('cancelled', () => events.push('cancelled'));
    call.on('close', () => events.push('close'));
    held.push({ call, cb, events });
  },
  meta: (call: TestCall, cb: Cb) => {
    const md = new Metadata();
    md.set('x-echo-bin', call.metadata.get('x-test-bin')[0] as Buffer);
    md.set('x-echo', String(call.metadata.get('x-test')[0]));
    md.set('x-deadline', String(Number.isFinite(call.getDeadline())));
    cb(null, Buffer.from('ok'), md);
  },
  watch: (call: TestCall) => {
    const events: string[] = [];
    call.on('cancelled', () => events.push('cancelled'));
    call.on('close', () => events.push('close'));
    call.write(Buffer.from('first'));
    watchers.push({ call, events });
  },
  slow: (call: TestCall & AsyncIterable<Buffer> & { stream: http2.ServerHttp2Stream }, cb: Cb) => {
    slowCalls.push({ call, cb });
  },
  slowCounted: (call: TestCall & AsyncIterable<Buffer> & { stream: http2.ServerHttp2Stream }, cb: Cb) => {
    slowCalls.push({ call, cb });
  },
  /** Answers a message of the size the request names (response sizes are not limited here). */
  big: (call: TestCall, cb: Cb) => cb(null, Buffer.alloc(Number(call.request.toString()), 0x62)),
  collect: async (call: TestCall & AsyncIterable<Buffer>, cb: Cb) => {
    const parts: Buffer[] = [];
    try {
      for await (const m of call) parts.push(m);
      cb(null, Buffer.concat(parts));
    } catch (e) {
      cb(e);
    }
  },
} as unknown as Record<string, UntypedHandleCall>;

let server: NativeGrpcServer;
let limiter: StreamLimiter;
let address: string;
let client: Client;
let session: http2.ClientHttp2Session;

async function startNative(maxMessageBytes = MAX): Promise<{ server: NativeGrpcServer; limiter: StreamLimiter; address: string }> {
  const l = new StreamLimiter(100);
  const s = new NativeGrpcServer({
    maxMessageBytes, maxConcurrentStreams: 100, limiter: l, registry: undefined, traced: false, tls: undefined, http2: HTTP2,
    telemetry: makeRpcTelemetry({ metrics: NO_METRICS, logger: createLogger('silent') }),
  });
  s.addService(DEFINITION, HANDLERS);
  const port = await s.listen('127.0.0.1', 0);
  return { server: s, limiter: l, address: `127.0.0.1:${port}` };
}

beforeAll(async () => {
  ({ server, limiter, address } = await startNative());
  client = new Client(address, credentials.createInsecure());
  session = http2.connect(`http://${address}`);
});
afterAll(() => {
  client.close();
  session.close();
  server.forceShutdown();
});
afterEach(() => {
  for (const h of held.splice(0)) h.cb(null, Buffer.from('released'));
  for (const w of watchers.splice(0)) w.call.end();
});

function unary(path: string, body: Buffer, md = new Metadata(), deadline?: number): Promise<{ value: Buffer; trailers: Metadata }> {
  return new Promise((resolve, reject) => {
    let value: Buffer | undefined;
    let trailers: Metadata | undefined;
    const both = (): void => {
      if (value !== undefined && trailers !== undefined) resolve({ value, trailers });
    };
    const c = client.makeUnaryRequest(`/test.Echo/${path}`, raw, raw, body, md, deadline === undefined ? {} : { deadline }, (err: ServiceError | null, v?: Buffer) => {
      if (err) reject(err);
      value = v as Buffer;
      both();
    });
    c.on('status', (s) => {
      trailers = s.metadata;
      both();
    });
  });
}

async function unaryError(path: string, body: Buffer, md?: Metadata, deadline?: number): Promise<ServiceError> {
  try {
    await unary(path, body, md, deadline);
  } catch (e) {
    return e as ServiceError;
  }
  throw new Error('expected the call to fail');
}

function frame(body: Buffer, flag = 0): Buffer {
  const h = Buffer.alloc(5);
  h[0] = flag;
  h.writeUInt32BE(body.length, 1);
  return Buffer.concat([h, body]);
}

interface RawAnswer { status: number; headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders | undefined; data: Buffer }

/** A raw HTTP/2 request; `chunks` are written one by one (each its own DATA frame). */
function rawCall(path: string, chunks: Buffer[], headers: http2.OutgoingHttpHeaders = {}, on = session): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = on.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...headers });
    let head: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders | undefined;
    const data: Buffer[] = [];
    req.on('response', (h) => { head = h; });
    req.on('trailers', (h) => { trailers = h; });
    req.on('data', (d: Buffer) => data.push(d));
    req.on('error', reject);
    req.on('close', () => resolve({ status: Number(head[':status']), headers: head, trailers, data: Buffer.concat(data) }));
    const write = (i: number): void => {
      if (i === chunks.length) {
        req.end();
        return;
      }
      req.write(chunks[i], () => setImmediate(() => write(i + 1)));
    };
    write(0);
  });
}

describe('native transport: framing and limits', () => {
  it('reassembles a request sent in 1-byte DATA frames', async () => {
    const body = Buffer.from('hello across chunks');
    const wire = frame(body);
    const r = await rawCall('/test.Echo/Echo', [...wire].map((b) => Buffer.from([b])));
    expect(r.trailers?.['grpc-status']).toBe('0');
    expect(r.data.equals(frame(body))).toBe(true);
  });

  it('refuses a message over the limit with RESOURCE_EXHAUSTED naming both sizes; the connection stays usable', async () => {
    const err = await unaryError('Echo', Buffer.alloc(MAX + 1, 0x61));
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toBe(`Received message larger than max (${MAX + 1} vs ${MAX})`);
    expect((await unary('Echo', Buffer.from('still here'))).value.toString()).toBe('still here');
    const r = await rawCall('/test.Echo/Echo', [frame(Buffer.alloc(MAX + 10))]);
    expect(r.headers['grpc-status']).toBe(String(status.RESOURCE_EXHAUSTED));
    expect((await rawCall('/test.Echo/Echo', [frame(Buffer.from('again'))])).trailers?.['grpc-status']).toBe('0');
  });

  it('an unknown method is UNIMPLEMENTED, trailers-only', async () => {
    const r = await rawCall('/test.Echo/Nope', [frame(Buffer.from('x'))]);
    expect(r.status).toBe(200);
    expect(r.headers['grpc-status']).toBe(String(status.UNIMPLEMENTED));
    expect(decodeURIComponent(String(r.headers['grpc-message']))).toBe('The server does not implement the method /test.Echo/Nope');
    expect(r.trailers).toBeUndefined();
    expect(r.data.length).toBe(0);
    expect((await unaryError('Nope', Buffer.from('x'))).code).toBe(status.UNIMPLEMENTED);
  });

  it('a content type other than application/grpc* is HTTP 415', async () => {
    const r = await rawCall('/test.Echo/Echo', [frame(Buffer.from('x'))], { 'content-type': 'application/json' });
    expect(r.status).toBe(415);
    expect(r.headers['grpc-status']).toBeUndefined();
  });
});

describe('native transport: statuses and metadata', () => {
  it('an error before any message is a trailers-only response; grpc-message is percent-encoded UTF-8', async () => {
    const details = 'café 100% ✓ — retry';
    const r = await rawCall('/test.Echo/Echo', [frame(Buffer.from(`fail:${details}`))]);
    expect(r.headers['grpc-status']).toBe(String(status.FAILED_PRECONDITION));
    expect(r.headers['grpc-message']).toBe('caf%C3%A9 100%25 %E2%9C%93 %E2%80%94 retry');
    expect(r.trailers).toBeUndefined();
    const err = await unaryError('Echo', Buffer.from(`fail:${details}`));
    expect(err.code).toBe(status.FAILED_PRECONDITION);
    expect(err.details).toBe(details);
  });

  it('a success sends headers, the message, then grpc-status 0 in trailers', async () => {
    const r = await rawCall('/test.Echo/Echo', [frame(Buffer.from('ok'))]);
    expect(r.headers).toMatchObject({ ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity,deflate,gzip' });
    expect(r.headers['grpc-status']).toBeUndefined();
    expect(r.trailers).toMatchObject({ 'grpc-status': '0', 'grpc-message': 'OK' });
  });

  it('-bin metadata reaches the handler as a Buffer and its trailing metadata reaches the client', async () => {
    const bin = Buffer.from([0, 1, 2, 250, 251, 252, 253, 254, 255]);
    const md = new Metadata();
    md.set('x-test-bin', bin);
    md.set('x-test', 'plain');
    const { value, trailers } = await unary('Meta', Buffer.from('q'), md, Date.now() + 60_000);
    expect(value.toString()).toBe('ok');
    expect(Buffer.isBuffer(trailers.get('x-echo-bin')[0])).toBe(true);
    expect((trailers.get('x-echo-bin')[0] as Buffer).equals(bin)).toBe(true);
    expect(trailers.get('x-echo')).toEqual(['plain']);
    expect(trailers.get('x-deadline')).toEqual(['true']);
  });
});

describe('native transport: compression', () => {
  it('a gzip-compressed request is decompressed; a deflate one too', async () => {
    const r = await rawCall('/test.Echo/Echo', [frame(gzipSync(Buffer.from('zipped')), 1)], { 'grpc-encoding': 'gzip' });
    expect(r.trailers?.['grpc-status']).toBe('0');
    expect(r.data.subarray(5).toString()).toBe('zipped');
    const gz = new Client(address, credentials.createInsecure(), { 'grpc.default_compression_algorithm': 2 });
    const value = await new Promise<Buffer>((resolve, reject) => {
      gz.makeUnaryRequest('/test.Echo/Echo', raw, raw, Buffer.from('x'.repeat(2000)), (err: ServiceError | null, v?: Buffer) => (err ? reject(err) : resolve(v as Buffer)));
    });
    gz.close();
    expect(value.toString()).toBe('x'.repeat(2000));
  });

  it('an unknown grpc-encoding is UNIMPLEMENTED; a body that does not decompress is INTERNAL; the flag without an encoding is INTERNAL', async () => {
    const br = await rawCall('/test.Echo/Echo', [frame(Buffer.from('zz'), 1)], { 'grpc-encoding': 'br' });
    expect(br.headers['grpc-status']).toBe(String(status.UNIMPLEMENTED));
    expect(decodeURIComponent(String(br.headers['grpc-message']))).toBe('Received message compressed with unsupported encoding "br"');
    const bad = await rawCall('/test.Echo/Echo', [frame(Buffer.from('not gzip'), 1)], { 'grpc-encoding': 'gzip' });
    expect(bad.headers['grpc-status']).toBe(String(status.INTERNAL));
    const none = await rawCall('/test.Echo/Echo', [frame(Buffer.from('zz'), 1)]);
    expect(none.headers['grpc-status']).toBe(String(status.INTERNAL));
    // A small message that decompresses past the limit is RESOURCE_EXHAUSTED, before it is kept.
    const bomb = await rawCall('/test.Echo/Echo', [frame(gzipSync(Buffer.alloc(MAX * 4)), 1)], { 'grpc-encoding': 'gzip' });
    expect(bomb.headers['grpc-status']).toBe(String(status.RESOURCE_EXHAUSTED));
    expect(decodeURIComponent(String(bomb.headers['grpc-message']))).toBe(`Received message that decompresses to a size larger than ${MAX}`);
  });
});

describe('native transport: deadlines and cancellation', () => {
  it('at the deadline the call ends with DEADLINE_EXCEEDED and the handler sees it cancelled', async () => {
    const err = await unaryError('Hold', Buffer.from('x'), new Metadata(), Date.now() + 200);
    expect(err.code).toBe(status.DEADLINE_EXCEEDED);
    const h = held[0]!;
    await waitFor(() => h.events.includes('cancelled'), 5000, 'the cancel');
    expect(h.call.cancelled).toBe(true);
    // Sent by the server itself (a raw client waits for it): grpc-timeout 100m.
    const r = await rawCall('/test.Echo/Hold', [frame(Buffer.from('x'))], { 'grpc-timeout': '100m' });
    expect(r.headers['grpc-status']).toBe(String(status.DEADLINE_EXCEEDED));
    expect(String(r.headers['grpc-message'])).toBe('Deadline exceeded');
    const invalid = await rawCall('/test.Echo/Echo', [frame(Buffer.from('x'))], { 'grpc-timeout': 'soon' });
    expect(invalid.headers['grpc-status']).toBe(String(status.INTERNAL));
  });

  it('a client reset cancels the call: the handler sees cancelled and close, and the call cap is released', async () => {
    const conn = http2.connect(`http://${address}`);
    const req = conn.request({ ':method': 'POST', ':path': '/test.Echo/Hold', 'content-type': 'application/grpc', te: 'trailers' });
    req.end(frame(Buffer.from('x')));
    await waitFor(() => held.length === 1, 5000, 'the held call');
    const key = `127.0.0.1:${conn.socket.localPort}`;
    expect(limiter.active(key)).toBe(1);
    req.close(http2.constants.NGHTTP2_CANCEL);
    await waitFor(() => held[0]!.events.includes('close'), 5000, 'the cancel');
    expect(held[0]!.call.cancelled).toBe(true);
    expect(held[0]!.events).toEqual(['cancelled', 'close']);
    expect(limiter.active(key)).toBe(0);
    // A server stream too.
    const sreq = conn.request({ ':method': 'POST', ':path': '/test.Echo/Watch', 'content-type': 'application/grpc', te: 'trailers' });
    sreq.on('data', () => undefined);
    sreq.end(frame(Buffer.from('w')));
    await waitFor(() => watchers.length === 1, 5000, 'the watch');
    expect(limiter.active(key)).toBe(1);
    sreq.close(http2.constants.NGHTTP2_CANCEL);
    await waitFor(() => watchers[0]!.events.includes('close'), 5000, 'the cancel');
    expect(watchers[0]!.events).toEqual(['cancelled', 'close']);
    expect(watchers[0]!.call.write(Buffer.from('late'))).toBe(false);
    expect(limiter.active(key)).toBe(0);
    conn.close();
  });

  it('client streaming: while the handler does not read, the HTTP/2 stream is paused; then every request arrives', async () => {
    const chunk = frame(Buffer.alloc(16 * 1024, 0x61));
    const answer = rawCall('/test.Echo/Slow', Array.from({ length: 64 }, () => chunk));
    await waitFor(() => slowCalls.length === 1, 5000, 'the call');
    const { call, cb } = slowCalls[0]!;
    // The client keeps writing; the server stops reading after a few queued requests.
    await waitFor(() => call.stream.isPaused(), 5000, 'the stream to be paused');
    let total = 0;
    let n = 0;
    for await (const m of call) {
      total += m.length;
      n++;
    }
    cb(null, Buffer.from(`${n}/${total}`));
    const r = await answer;
    expect(r.trailers?.['grpc-status']).toBe('0');
    expect(r.data.subarray(5).toString()).toBe(`64/${64 * 16 * 1024}`);
    slowCalls.length = 0;
  });

  it('client streaming: compressed requests wait as received and are decompressed only when the handler takes them', async () => {
    decoded = 0;
    // 300 requests of ~100 bytes each that decompress to 64 KiB: ~19 MiB if decoded ahead.
    const z = frame(gzipSync(Buffer.alloc(MAX, 0x61)), 1);
    const answer = rawCall('/test.Echo/SlowCounted', Array.from({ length: 300 }, () => z), { 'grpc-encoding': 'gzip' });
    await waitFor(() => slowCalls.length === 1, 5000, 'the call');
    const { call, cb } = slowCalls[0]!;
    await waitFor(() => call.stream.isPaused(), 5000, 'the stream to be paused');
    expect(decoded).toBe(0);
    let n = 0;
    for await (const m of call) {
      expect(m.length).toBe(MAX);
      n++;
      expect(decoded).toBe(n);
    }
    cb(null, Buffer.from(String(n)));
    const r = await answer;
    expect(r.trailers?.['grpc-status']).toBe('0');
    expect(r.data.subarray(5).toString()).toBe('300');
    slowCalls.length = 0;
  });

  it('large responses a client has not read yet do not make the connection refuse its other calls', async () => {
    // A server with the default 16 MiB message limit (the session memory cap used to follow it).
    const big = await startNative(16 * 1024 * 1024);
    const conn = http2.connect(`http://${big.address}`);
    try {
      // 6 x 16 MiB waiting for a reader that does not read (96 MiB outstanding on one connection).
      const stalled = Array.from({ length: 6 }, () => {
        const req = conn.request({ ':method': 'POST', ':path': '/test.Echo/Big', 'content-type': 'application/grpc', te: 'trailers' });
        req.on('error', () => undefined);
        req.pause();
        req.end(frame(Buffer.from(String(16 * 1024 * 1024))));
        return req;
      });
      await new Promise((r) => setTimeout(r, 1000));
      const r = await rawCall('/test.Echo/Echo', [frame(Buffer.from('still here'))], {}, conn);
      expect(r.trailers?.['grpc-status']).toBe('0');
      expect(r.data.subarray(5).toString()).toBe('still here');
      for (const s of stalled) s.close();
    } finally {
      conn.destroy();
      big.server.forceShutdown();
    }
  });

  it('client streaming: requests arrive in order, and a truncated last frame refuses the call', async () => {
    const parts = ['a', 'bb', 'ccc'].map((s) => frame(Buffer.from(s)));
    const ok = await rawCall('/test.Echo/Collect', parts);
    expect(ok.trailers?.['grpc-status']).toBe('0');
    expect(ok.data.subarray(5).toString()).toBe('abbccc');
    const cut = await rawCall('/test.Echo/Collect', [parts[0]!, frame(Buffer.from('dddd')).subarray(0, 6)]);
    expect(cut.headers['grpc-status'] ?? cut.trailers?.['grpc-status']).toBe(String(status.INVALID_ARGUMENT));
  });
});

describe('native transport: shutdown and hostile input', () => {
  it('tryShutdown waits for an in-flight unary (which completes), then forceShutdown cancels a stream', async () => {
    const t = await startNative();
    const c = new Client(t.address, credentials.createInsecure());
    const reply = new Promise<Buffer>((resolve, reject) => {
      c.makeUnaryRequest('/test.Echo/Hold', raw, raw, Buffer.from('x'), (err: ServiceError | null, v?: Buffer) => (err ? reject(err) : resolve(v as Buffer)));
    });
    const stream = c.makeServerStreamRequest('/test.Echo/Watch', raw, raw, Buffer.from('w'));
    stream.on('data', () => undefined);
    const streamStatus = new Promise<number>((resolve) => stream.on('error', (e: ServiceError) => resolve(e.code)));
    await waitFor(() => held.length === 1 && watchers.length === 1, 5000, 'the calls');
    let shut = false;
    t.server.tryShutdown(() => { shut = true; });
    // Still in flight: shutdown waits (the unary is answered after this, on the same connection).
    expect(shut).toBe(false);
    held.splice(0, 1)[0]!.cb(null, Buffer.from('finished'));
    expect((await reply).toString()).toBe('finished');
    expect(shut).toBe(false);
    t.server.forceShutdown();
    expect(await streamStatus).toBe(status.UNAVAILABLE);
    await waitFor(() => watchers[0]!.events.includes('cancelled'), 5000, 'the stream cancel');
    await waitFor(() => shut, 5000, 'the shutdown callback');
    c.close();
  });

  it('garbage on the wire never brings the server down', async () => {
    const garbage: Buffer[] = [
      Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
      Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from([0, 0, 4, 1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 9, 9, 9, 9])]),
      Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 37 + 11) & 0xff))]),
    ];
    for (const g of garbage) {
      await new Promise<void>((resolve) => {
        const s = netConnect(Number(address.split(':')[1]), '127.0.0.1', () => s.end(g));
        s.on('data', () => undefined);
        s.on('error', () => resolve());
        s.on('close', () => resolve());
      });
    }
    // Well-formed HTTP/2 with hostile gRPC bodies: random prefixes, huge lengths, empty frames.
    for (const body of [Buffer.from([1, 2, 3, 4, 5, 6, 7]), Buffer.from([0, 0xff, 0xff, 0xff, 0xff]), Buffer.alloc(0), Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0])]) {
      const r = await rawCall('/test.Echo/Echo', [body]);
      expect(r.status).toBe(200);
    }
    expect((await unary('Echo', Buffer.from('alive'))).value.toString()).toBe('alive');
  });
});

describe('choosing the transport', () => {
  it('--grpc-transport / PALIMPSEST_GRPC_TRANSPORT select it (flags win, js-http2 by default); anything else is a usage error', async () => {
    const { parseServeArgs } = await import('../../src/cli/serve.js');
    expect(parseServeArgs([], {}).grpcTransport).toBe('js-http2');
    expect(parseServeArgs(['--grpc-transport', 'js-http2'], { PALIMPSEST_GRPC_TRANSPORT: 'native' }).grpcTransport).toBe('js-http2');
    expect(parseServeArgs([], { PALIMPSEST_GRPC_TRANSPORT: 'native' }).grpcTransport).toBe('native');
    expect(parseServeArgs([], { PALIMPSEST_GRPC_TRANSPORT: 'grpc-js' }).grpcTransport).toBe('grpc-js');
    expect(parseServeArgs(['--grpc-transport', 'native'], { PALIMPSEST_GRPC_TRANSPORT: 'grpc-js' }).grpcTransport).toBe('native');
    expect(parseServeArgs(['--grpc-transport', 'grpc-js'], { PALIMPSEST_GRPC_TRANSPORT: 'native' }).grpcTransport).toBe('grpc-js');
    expect(() => parseServeArgs(['--grpc-transport', 'h3'], {})).toThrow(/--grpc-transport must be js-http2, native or grpc-js, got "h3"/);
    expect(() => parseServeArgs([], { PALIMPSEST_GRPC_TRANSPORT: 'h3' })).toThrow(/PALIMPSEST_GRPC_TRANSPORT/);
  });

  it('the native server answers the real service; grpc-js-only extensions are refused at start-up', async () => {
    const { startServer } = await import('../../src/main.js');
    await expect(startServer({ listen: '127.0.0.1:0', db: ':memory:', logLevel: 'silent', grpcTransport: 'native' }, { services: () => undefined }))
      .rejects.toThrow(/need --grpc-transport grpc-js/);
    await expect(startServer({ listen: '127.0.0.1:0', db: ':memory:', logLevel: 'silent', grpcTransport: 'js-http2' }, { services: () => undefined }))
      .rejects.toThrow(/need --grpc-transport grpc-js/);
    const s = await startServer({ listen: '127.0.0.1:0', db: ':memory:', logLevel: 'silent', grpcTransport: 'native' });
    try {
      const conn = http2.connect(`http://${s.address}`);
      // GetSessionRequest{session_id: "kk"}: NOT_FOUND with its details, trailers-only.
      const r = await rawCall('/palimpsest.v1.SessionService/GetSession', [frame(Buffer.from([0x0a, 0x02, 0x6b, 0x6b]))], {}, conn);
      expect(r.headers['grpc-status']).toBe(String(status.NOT_FOUND));
      expect(typeof r.headers['grpc-status-details-bin']).toBe('string');
      // The native transport's own response headers (grpc-js answers application/grpc+proto).
      expect(r.headers['content-type']).toBe('application/grpc');
      conn.close();
    } finally {
      await s.shutdown();
    }
  });
});
