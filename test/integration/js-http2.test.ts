/**
 * The pure-TypeScript HTTP/2 server layer (src/server/http2) on the wire: createH2Server on
 * 127.0.0.1:0 with an onStream handler chosen per test, called by node:http2 clients (they check
 * our frames strictly: anything invalid becomes a session or stream error) and by a raw TCP peer
 * that writes frames by hand and reads the server's frames back as {type, flags, stream, payload}.
 * Each case pins one rule of connection.ts's header comment with exact frame types, stream ids and
 * error codes. The raw peer's header blocks come from a literal-only HPACK encoder written here
 * (no dynamic table, no Huffman), which any decoder must accept; node's client exercises the
 * dynamic table and Huffman. Absence ("no WINDOW_UPDATE while paused") is checked after a PING
 * round trip: the server answers frames in order, so whatever the earlier frames caused is
 * already on the wire when the PING ACK arrives.
 */
import { once } from 'node:events';
import http2 from 'node:http2';
import { connect as netConnect, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import { createH2Server } from '../../src/server/http2/server.js';
import type { ConnectionOptions, H2Connection, RequestHeaders } from '../../src/server/http2/connection.js';
import type { H2Stream } from '../../src/server/http2/stream.js';

// RFC 9113 numbers, written out here rather than imported so a wrong constant in src cannot agree with itself.
const DATA = 0x0;
const HEADERS = 0x1;
const PRIORITY = 0x2;
const RST_STREAM = 0x3;
const SETTINGS = 0x4;
const PUSH_PROMISE = 0x5;
const PING = 0x6;
const GOAWAY = 0x7;
const WINDOW_UPDATE = 0x8;
const CONTINUATION = 0x9;
const TYPE_NAMES = ['DATA', 'HEADERS', 'PRIORITY', 'RST_STREAM', 'SETTINGS', 'PUSH_PROMISE', 'PING', 'GOAWAY', 'WINDOW_UPDATE', 'CONTINUATION'];

const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;

const NO_ERROR = 0x0;
const PROTOCOL_ERROR = 0x1;
const FLOW_CONTROL_ERROR = 0x3;
const STREAM_CLOSED = 0x5;
const FRAME_SIZE_ERROR = 0x6;
const REFUSED_STREAM = 0x7;
const CANCEL = 0x8;
const COMPRESSION_ERROR = 0x9;

const SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
const SETTINGS_MAX_HEADER_LIST_SIZE = 0x6;

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** How long the raw peer waits for a frame before failing the test (a guard, not a sleep). */
const WAIT_MS = 3_000;

// ---------------------------------------------------------------------------------------------
// Frames and header blocks, by hand.

type Field = readonly [string, string];

/** An HPACK integer with a 7-bit prefix (RFC 7541 5.1), for string lengths with H = 0. */
function int7(n: number): number[] {
  if (n < 0x7f) return [n];
  const out = [0x7f];
  let rest = n - 0x7f;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  out.push(rest);
  return out;
}

/** A header block of "literal header field without indexing, new name" representations only. */
function literalBlock(fields: readonly Field[]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of fields) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    parts.push(Buffer.from([0x00, ...int7(n.length)]), n, Buffer.from(int7(v.length)), v);
  }
  return Buffer.concat(parts);
}

const REQUEST: readonly Field[] = [
  [':method', 'POST'], [':scheme', 'http'], [':path', '/test.Echo/Echo'], [':authority', '127.0.0.1'],
  ['content-type', 'application/grpc'], ['te', 'trailers'],
];

function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function headersFrame(stream: number, flags = END_HEADERS, fields: readonly Field[] = REQUEST): Buffer {
  return frame(HEADERS, flags, stream, literalBlock(fields));
}

function dataFrame(stream: number, data: Buffer, flags = 0): Buffer {
  return frame(DATA, flags, stream, data);
}

function windowUpdate(stream: number, increment: number): Buffer {
  return frame(WINDOW_UPDATE, 0, stream, u32(increment));
}

function settingsFrame(entries: readonly (readonly [number, number])[] = []): Buffer {
  const p = Buffer.alloc(6 * entries.length);
  entries.forEach(([id, value], i) => {
    p.writeUInt16BE(id, 6 * i);
    p.writeUInt32BE(value, 6 * i + 2);
  });
  return frame(SETTINGS, 0, 0, p);
}

function settingsOf(f: Frame): Map<number, number> {
  const m = new Map<number, number>();
  for (let at = 0; at + 6 <= f.payload.length; at += 6) m.set(f.payload.readUInt16BE(at), f.payload.readUInt32BE(at + 2));
  return m;
}

function goawayOf(f: Frame): { last: number; code: number } {
  return { last: f.payload.readUInt32BE(0) & 0x7fffffff, code: f.payload.readUInt32BE(4) };
}

/** A request body in gRPC's length-prefixed framing (the server layer does not care; it reads well in dumps). */
function grpcMessage(body: Buffer): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

// ---------------------------------------------------------------------------------------------
// The raw peer.

interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly stream: number;
  readonly payload: Buffer;
}

function describeFrames(frames: readonly Frame[]): string {
  return frames.map((f) => {
    const name = TYPE_NAMES[f.type] ?? `type ${f.type}`;
    const detail = f.type === RST_STREAM ? ` code ${f.payload.readUInt32BE(0)}`
      : f.type === GOAWAY ? ` last ${goawayOf(f).last} code ${goawayOf(f).code}`
        : f.type === WINDOW_UPDATE ? ` +${f.payload.readUInt32BE(0)}` : ` ${f.payload.length}B`;
    return `${name}(${f.stream}, flags ${f.flags}${detail})`;
  }).join(', ');
}

function noop(): void {}

class Peer {
  /** Every frame received, in order. */
  readonly seen: Frame[] = [];
  /** Frames no `next` has taken yet. */
  readonly #unread: Frame[] = [];
  readonly #waiters = new Set<() => void>();
  #buf: Buffer = Buffer.alloc(0);
  #pings = 0;
  isClosed = false;
  readonly closed: Promise<void>;

  constructor(readonly socket: Socket) {
    socket.on('error', noop);
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    this.closed = new Promise((resolve) => {
      socket.once('close', () => {
        this.isClosed = true;
        this.#wake();
        resolve();
      });
    });
  }

  send(...parts: Buffer[]): void {
    this.socket.write(Buffer.concat(parts));
  }

  #onData(chunk: Buffer): void {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    while (this.#buf.length >= 9) {
      const length = this.#buf.readUIntBE(0, 3);
      if (this.#buf.length < 9 + length) break;
      const f: Frame = {
        type: this.#buf[3] as number, flags: this.#buf[4] as number, stream: this.#buf.readUInt32BE(5) & 0x7fffffff,
        payload: Buffer.from(this.#buf.subarray(9, 9 + length)),
      };
      this.#buf = this.#buf.subarray(9 + length);
      this.seen.push(f);
      this.#unread.push(f);
    }
    this.#wake();
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  #arrival(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiters.add(done);
    });
  }

  /** The first unread frame that matches (taken), waiting for it. */
  async take(match: (f: Frame) => boolean, what: string): Promise<Frame> {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const i = this.#unread.findIndex(match);
      if (i >= 0) return this.#unread.splice(i, 1)[0] as Frame;
      const left = deadline - Date.now();
      if (this.isClosed || left <= 0) {
        throw new Error(`${this.isClosed ? 'connection closed' : `no frame in ${WAIT_MS} ms`} waiting for ${what}; received: ${describeFrames(this.seen)}`);
      }
      await this.#arrival(left);
    }
  }

  /** The next unread frame of `type` (on `stream` when given). */
  next(type: number, stream?: number): Promise<Frame> {
    return this.take((f) => f.type === type && (stream === undefined || f.stream === stream), `${TYPE_NAMES[type]}${stream === undefined ? '' : ` on stream ${stream}`}`);
  }

  /** The next unread frame on `stream`, whatever its type. */
  nextOn(stream: number): Promise<Frame> {
    return this.take((f) => f.stream === stream, `a frame on stream ${stream}`);
  }

  /** A PING round trip: everything the frames sent before it made the server write has arrived. */
  async sync(): Promise<void> {
    const payload = Buffer.alloc(8);
    payload.writeUInt32BE(0x5e4c, 0);
    payload.writeUInt32BE(++this.#pings, 4);
    this.send(frame(PING, 0, 0, payload));
    await this.take((f) => f.type === PING && (f.flags & ACK) !== 0 && f.payload.equals(payload), 'the PING ACK of sync()');
  }

  /** Unread frames of `type` (on `stream` when given). */
  unread(type: number, stream?: number): Frame[] {
    return this.#unread.filter((f) => f.type === type && (stream === undefined || f.stream === stream));
  }

  /** One response on `stream`: HEADERS, the DATA, and the frame with END_STREAM. */
  async response(stream: number): Promise<{ headers: Frame; body: Buffer; data: Frame[]; end: Frame }> {
    const headers = await this.next(HEADERS, stream);
    const data: Frame[] = [];
    let end = headers;
    while ((end.flags & END_STREAM) === 0) {
      end = await this.take((f) => f.stream === stream && (f.type === DATA || f.type === HEADERS), `DATA or trailers on stream ${stream}`);
      if (end.type === DATA) data.push(end);
    }
    return { headers, body: Buffer.concat(data.map((f) => f.payload)), data, end };
  }
}

// ---------------------------------------------------------------------------------------------
// The server harness.

type Handler = (stream: H2Stream, headers: RequestHeaders) => void;

interface Harness {
  readonly port: number;
  /** Every accepted connection, in order. */
  readonly connections: H2Connection[];
  /** Every stream onStream was given, in order. */
  readonly calls: { readonly stream: H2Stream; readonly headers: RequestHeaders }[];
  /** The first accepted connection. */
  readonly connected: Promise<H2Connection>;
}

const servers: NetServer[] = [];
const openConnections: H2Connection[] = [];
const peers: Peer[] = [];
const sessions: http2.ClientHttp2Session[] = [];
const sessionErrors: unknown[] = [];

afterEach(async () => {
  for (const s of sessions.splice(0)) s.destroy();
  for (const p of peers.splice(0)) p.socket.destroy();
  for (const c of openConnections.splice(0)) c.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  // A node client that found one of our frames invalid reports it here.
  expect(sessionErrors.splice(0)).toEqual([]);
});

async function serve(handler: Handler, options: Partial<Omit<ConnectionOptions, 'onStream'>> = {}): Promise<Harness> {
  let accepted: (c: H2Connection) => void = noop;
  const h: Harness = { port: 0, connections: [], calls: [], connected: new Promise((resolve) => { accepted = resolve; }) };
  const server = createH2Server({
    maxConcurrentStreams: 4, streamWindow: 65_535, connectionWindow: 65_535, maxHeaderListSize: 8192, ...options,
    onStream: (stream, headers) => {
      h.calls.push({ stream, headers });
      handler(stream, headers);
    },
  }, undefined, (c) => {
    h.connections.push(c);
    openConnections.push(c);
    accepted(c);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { ...h, port: (server.address() as AddressInfo).port };
}

async function openPeer(port: number, options: { readonly settings?: readonly (readonly [number, number])[]; readonly handshake?: boolean } = {}): Promise<Peer> {
  const socket = netConnect(port, '127.0.0.1');
  const peer = new Peer(socket);
  peers.push(peer);
  await once(socket, 'connect');
  socket.setNoDelay(true);
  if (options.handshake !== false) peer.send(PREFACE, settingsFrame(options.settings ?? []));
  return peer;
}

function client(port: number, options: http2.ClientSessionOptions = {}): http2.ClientHttp2Session {
  const session = http2.connect(`http://127.0.0.1:${port}`, options);
  session.on('error', (e) => sessionErrors.push(e));
  sessions.push(session);
  return session;
}

interface Reply {
  readonly headers: http2.IncomingHttpHeaders;
  readonly body: Buffer;
  readonly trailers: http2.IncomingHttpHeaders | undefined;
  readonly rstCode: number;
}

/** One request through a node:http2 session: `body` in as many writes as it has parts. */
function call(session: http2.ClientHttp2Session, body: Buffer | readonly Buffer[], extra: http2.OutgoingHttpHeaders = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ':method': 'POST', ':path': '/test.Echo/Echo', 'content-type': 'application/grpc', te: 'trailers', ...extra });
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders | undefined;
    const parts: Buffer[] = [];
    req.on('response', (h) => { headers = h; });
    req.on('trailers', (t) => { trailers = t; });
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('error', reject);
    req.on('close', () => resolve({ headers, body: Buffer.concat(parts), trailers, rstCode: req.rstCode ?? -1 }));
    if (Buffer.isBuffer(body)) req.end(body);
    else {
      for (const part of body) req.write(part);
      req.end();
    }
  });
}

const RESPONSE_HEADERS = { ':status': 200, 'content-type': 'application/grpc' };

/** Responds with `body` once the request ended: headers, data, then trailers grpc-status 0 at 'wantTrailers'. */
function reply(stream: H2Stream, body: Buffer, trailers: http2.OutgoingHttpHeaders = { 'grpc-status': '0' }): void {
  stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(trailers));
  stream.end(body);
}

/** Echoes the request body. */
const echo: Handler = (stream) => {
  const parts: Buffer[] = [];
  stream.on('data', (d: Buffer) => parts.push(d));
  stream.on('end', () => reply(stream, Buffer.concat(parts)));
};

/** Answers every request with `body`. */
function answer(body: Buffer): Handler {
  return (stream) => {
    stream.on('data', noop);
    stream.on('end', () => reply(stream, body));
  };
}

/** Keeps the stream open; the test drives it through `calls`. */
const hold: Handler = () => {};

function closeOf(stream: H2Stream): Promise<number> {
  return new Promise((resolve) => {
    if (stream.closed) process.nextTick(() => resolve(stream.rstCode));
    stream.once('close', () => resolve(stream.rstCode));
  });
}

/** The stream's request answered by the echo handler, over the raw peer. */
async function expectEcho(peer: Peer, stream: number, body = Buffer.from('ping')): Promise<void> {
  peer.send(headersFrame(stream), dataFrame(stream, body, END_STREAM));
  const r = await peer.response(stream);
  expect(r.headers.flags).toBe(END_HEADERS);
  expect(r.body.equals(body)).toBe(true);
  expect(r.end.type).toBe(HEADERS);
  expect(r.end.flags).toBe(END_STREAM | END_HEADERS);
}

// ---------------------------------------------------------------------------------------------

describe('src/server/http2 on the wire', () => {
  describe('requests and responses', () => {
    it('echoes through node:http2: headers, body, trailers; concurrent requests share one connection', async () => {
      const h = await serve(echo);
      const session = client(h.port);
      // Before our SETTINGS a client may open any number of streams (a 5th would be refused);
      // after them, node queues what is over our limit of 4.
      await once(session, 'remoteSettings');
      const bodies = Array.from({ length: 8 }, (_, i) => grpcMessage(Buffer.from(`message ${i} `.repeat(i * 100 + 1))));
      const replies = await Promise.all(bodies.map((b) => call(session, b)));
      replies.forEach((r, i) => {
        expect(r.headers[':status']).toBe(200);
        expect(r.headers['content-type']).toBe('application/grpc');
        expect(r.trailers?.['grpc-status']).toBe('0');
        expect(r.body.equals(bodies[i] as Buffer)).toBe(true);
        expect(r.rstCode).toBe(NO_ERROR);
      });
      expect(h.connections).toHaveLength(1);
      expect(h.calls).toHaveLength(8);
      expect(h.calls[0]?.headers[':path']).toBe('/test.Echo/Echo');
      expect(h.calls[0]?.headers[':method']).toBe('POST');
      expect(h.calls[0]?.headers.te).toBe('trailers');
    });

    it('delivers a body sent in 200 small DATA frames whole and in order, and one node:http2 wrote in 200 writes', async () => {
      const h = await serve(echo);
      const peer = await openPeer(h.port);
      const chunks = Array.from({ length: 200 }, (_, i) => Buffer.from(`<${i}>`));
      peer.send(headersFrame(1), ...chunks.map((c) => dataFrame(1, c)), dataFrame(1, Buffer.alloc(0), END_STREAM));
      const r = await peer.response(1);
      expect(r.body.toString()).toBe(chunks.join(''));
      // node:http2 writes also arrive whole, however it frames them.
      const session = client(h.port);
      const reply1 = await call(session, chunks);
      expect(reply1.body.toString()).toBe(chunks.join(''));
    });

    it('counts one \'data\' per DATA frame (no frame is merged or split on the way in)', async () => {
      let events = 0;
      const h = await serve((stream) => {
        stream.on('data', () => events++);
        stream.on('end', () => reply(stream, Buffer.from(String(events))));
      });
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), ...Array.from({ length: 100 }, (_, i) => dataFrame(1, Buffer.from([i]))), dataFrame(1, Buffer.alloc(0), END_STREAM));
      const r = await peer.response(1);
      expect(r.body.toString()).toBe('100');
    });

    it('answers a client that writes every byte in its own socket write', async () => {
      const h = await serve(echo);
      const peer = await openPeer(h.port, { handshake: false });
      const chunkSizes: number[] = [];
      (await h.connected).socket.on('data', (c: Buffer) => chunkSizes.push(c.length));
      const body = grpcMessage(Buffer.from('one byte at a time'));
      const bytes = Buffer.concat([PREFACE, settingsFrame([[SETTINGS_INITIAL_WINDOW_SIZE, 100_000]]), headersFrame(1), dataFrame(1, body, END_STREAM)]);
      for (let i = 0; i < bytes.length; i++) {
        await new Promise<void>((resolve) => peer.socket.write(bytes.subarray(i, i + 1), () => resolve()));
        await nextTurn();
      }
      const r = await peer.response(1);
      expect(r.body.equals(body)).toBe(true);
      expect(r.end.flags).toBe(END_STREAM | END_HEADERS);
      // The server really read it in small pieces (else this test proves nothing).
      expect(chunkSizes.length).toBeGreaterThan(bytes.length / 2);
    });

    it('answers a client whose writes cut frames (and frame headers) at every offset', async () => {
      const h = await serve(echo);
      const peer = await openPeer(h.port, { handshake: false });
      const bodies = [1, 3, 5, 7].map((id) => Buffer.from(`stream ${id} `.repeat(id * 3)));
      const bytes = Buffer.concat([
        PREFACE, settingsFrame([[SETTINGS_INITIAL_WINDOW_SIZE, 100_000]]),
        ...[1, 3, 5, 7].flatMap((id, i) => [headersFrame(id), dataFrame(id, (bodies[i] as Buffer).subarray(0, 5)), dataFrame(id, (bodies[i] as Buffer).subarray(5), END_STREAM)]),
      ]);
      // Writes of 1, 2, ... 13 bytes, over and over: every split point falls in every part of some frame.
      for (let at = 0, n = 1; at < bytes.length; at += n, n = n % 13 + 1) {
        await new Promise<void>((resolve) => peer.socket.write(bytes.subarray(at, at + n), () => resolve()));
        await nextTurn();
      }
      for (const [i, id] of [1, 3, 5, 7].entries()) {
        const r = await peer.response(id);
        expect(r.body.equals(bodies[i] as Buffer)).toBe(true);
      }
    });

    it('ends a request at its trailers (HEADERS with END_STREAM after DATA)', async () => {
      const h = await serve(echo);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), dataFrame(1, Buffer.from('body')), headersFrame(1, END_HEADERS | END_STREAM, [['x-trailer', 'yes']]));
      const r = await peer.response(1);
      expect(r.body.toString()).toBe('body');
      expect(h.calls[0]?.stream.readableEnded).toBe(true);
    });

    it('resets a stream whose second HEADERS does not end it (PROTOCOL_ERROR), and one that sends DATA after its end (STREAM_CLOSED)', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), headersFrame(1, END_HEADERS, [['x-trailer', 'no end']]));
      expect((await peer.next(RST_STREAM, 1)).payload.readUInt32BE(0)).toBe(PROTOCOL_ERROR);
      peer.send(headersFrame(3, END_HEADERS | END_STREAM), dataFrame(3, Buffer.from('late')));
      expect((await peer.next(RST_STREAM, 3)).payload.readUInt32BE(0)).toBe(STREAM_CLOSED);
      expect(await closeOf(h.calls[0]?.stream as H2Stream)).toBe(PROTOCOL_ERROR);
      expect(await closeOf(h.calls[1]?.stream as H2Stream)).toBe(STREAM_CLOSED);
      await peer.sync();
      expect(peer.unread(GOAWAY)).toEqual([]);
    });
  });

  describe('send-side flow control', () => {
    it('delivers a 1 MiB response byte-exact to a node:http2 client with a 16 KiB initial window', async () => {
      const big = randomBytes(1 << 20);
      const h = await serve(answer(big));
      const session = client(h.port, { settings: { initialWindowSize: 16_384 } });
      const r = await call(session, Buffer.from('x'));
      expect(r.body.length).toBe(big.length);
      expect(r.body.equals(big)).toBe(true);
      expect(r.trailers?.['grpc-status']).toBe('0');
    });

    it('stops at the stream window the raw client gave (16384), goes on after WINDOW_UPDATE, never frames DATA over 16384', async () => {
      const big = randomBytes(1 << 20);
      const h = await serve(answer(big));
      const peer = await openPeer(h.port, { settings: [[SETTINGS_INITIAL_WINDOW_SIZE, 16_384]] });
      peer.send(headersFrame(1, END_HEADERS | END_STREAM));
      await peer.next(HEADERS, 1);
      await peer.sync();
      const first = peer.unread(DATA, 1);
      expect(first.reduce((n, f) => n + f.payload.length, 0)).toBe(16_384);
      // Still nothing more after a second round trip.
      await peer.sync();
      expect(peer.unread(DATA, 1)).toHaveLength(first.length);
      peer.send(windowUpdate(1, 1 << 20), windowUpdate(0, 1 << 20));
      const rest: Frame[] = [];
      for (;;) {
        const f = await peer.take((x) => x.stream === 1 && (x.type === DATA || x.type === HEADERS), 'the rest of the response');
        if (f.type === HEADERS) {
          expect(f.flags).toBe(END_STREAM | END_HEADERS);
          break;
        }
        rest.push(f);
      }
      const all = peer.seen.filter((f) => f.type === DATA && f.stream === 1);
      expect(Buffer.concat(all.map((f) => f.payload)).equals(big)).toBe(true);
      expect(Math.max(...all.map((f) => f.payload.length))).toBeLessThanOrEqual(16_384);
      expect(rest.length).toBeGreaterThan(0);
    });

    it('waits for the connection window as well as the stream window', async () => {
      const big = randomBytes(100_000);
      const h = await serve(answer(big));
      // A large stream window: the connection's 65535 is the limit.
      const peer = await openPeer(h.port, { settings: [[SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20]] });
      peer.send(headersFrame(1, END_HEADERS | END_STREAM));
      await peer.next(HEADERS, 1);
      await peer.sync();
      expect(peer.unread(DATA, 1).reduce((n, f) => n + f.payload.length, 0)).toBe(65_535);
      peer.send(windowUpdate(0, 1 << 20));
      const trailers = await peer.take((f) => f.type === HEADERS && f.stream === 1, 'the trailers');
      expect(trailers.flags).toBe(END_STREAM | END_HEADERS);
      const data = peer.seen.filter((f) => f.type === DATA && f.stream === 1);
      expect(Buffer.concat(data.map((f) => f.payload)).equals(big)).toBe(true);
    });
  });

  describe('review fixes: fairness, rapid reset, paused inbox', () => {
    it('serves streams waiting for the connection window round-robin: a small response is not starved by a large one', async () => {
      const big = randomBytes(1 << 20);
      const h = await serve((stream, headers) => reply(stream, headers[':path'] === '/big' ? big : Buffer.from('small')));
      const peer = await openPeer(h.port, { settings: [[SETTINGS_INITIAL_WINDOW_SIZE, 1 << 22]] });
      peer.send(headersFrame(1, END_HEADERS | END_STREAM, [[':method', 'POST'], [':scheme', 'http'], [':path', '/big'], ['content-type', 'application/grpc']]));
      await peer.next(HEADERS, 1);
      await peer.sync(); // the connection window (65535) is used up by stream 1
      peer.send(headersFrame(3, END_HEADERS | END_STREAM));
      await peer.next(HEADERS, 3);
      // 16 KiB of connection credit at a time: stream 3 must finish long before stream 1.
      let rounds = 0;
      while (peer.unread(HEADERS, 3).length === 0 && rounds < 64) {
        peer.send(windowUpdate(0, 16_384));
        await peer.sync();
        rounds++;
      }
      expect(peer.unread(HEADERS, 3)).toHaveLength(1);
      const sentOn1 = peer.seen.filter((f) => f.type === DATA && f.stream === 1).reduce((n, f) => n + f.payload.length, 0);
      expect(sentOn1).toBeLessThan(big.length / 4);
    });

    it('ends a connection whose client resets more open streams than the budget (rapid reset) with ENHANCE_YOUR_CALM', async () => {
      const h = await serve(() => undefined, { maxConcurrentStreams: 100 });
      const peer = await openPeer(h.port);
      const frames: Buffer[] = [];
      for (let i = 0; i < 1100; i++) {
        const id = 1 + 2 * i;
        frames.push(headersFrame(id, END_HEADERS | END_STREAM), frame(RST_STREAM, 0, id, u32(CANCEL)));
      }
      peer.send(...frames);
      const g = goawayOf(await peer.next(GOAWAY));
      expect(g.code).toBe(0xb);
      await peer.closed;
      expect(h.calls.length).toBeLessThan(1100);
    });

    it('a paused stream keeps no empty DATA frames and copies what it keeps; all of it arrives in order on resume', async () => {
      const got: Buffer[] = [];
      let paused: H2Stream | undefined;
      const h = await serve((stream) => {
        stream.pause();
        stream.on('data', (d: Buffer) => got.push(d));
        paused = stream;
      });
      const peer = await openPeer(h.port);
      const empties = Array.from({ length: 5000 }, () => dataFrame(1, Buffer.alloc(0)));
      peer.send(headersFrame(1), ...empties, dataFrame(1, Buffer.from('one')), ...empties, dataFrame(1, Buffer.from('two')));
      await peer.sync();
      expect(got).toEqual([]);
      paused?.resume();
      await waitFor(() => got.length === 2, 3000, 'the kept data');
      expect(got.map((b) => b.toString())).toEqual(['one', 'two']);
    });
  });

  describe('receive-side flow control', () => {
    it('resets a stream sent more than its window (65535) with FLOW_CONTROL_ERROR; exactly the window is fine', async () => {
      const h = await serve((stream) => stream.pause(), { connectionWindow: 1 << 20 });
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), dataFrame(1, Buffer.alloc(16_384)), dataFrame(1, Buffer.alloc(16_384)), dataFrame(1, Buffer.alloc(16_384)), dataFrame(1, Buffer.alloc(16_383)));
      await peer.sync();
      expect(peer.unread(RST_STREAM)).toEqual([]);
      peer.send(dataFrame(1, Buffer.alloc(1)));
      const rst = await peer.next(RST_STREAM, 1);
      expect(rst.payload.readUInt32BE(0)).toBe(FLOW_CONTROL_ERROR);
      expect(await closeOf(h.calls[0]?.stream as H2Stream)).toBe(FLOW_CONTROL_ERROR);
      // A stream error, not a connection error: its later DATA is ignored, other streams go on.
      peer.send(dataFrame(1, Buffer.alloc(100)));
      await peer.sync();
      expect(peer.seen.filter((f) => f.type === GOAWAY)).toEqual([]);
      expect(peer.unread(RST_STREAM)).toEqual([]);
    });

    it('ends the connection (GOAWAY FLOW_CONTROL_ERROR) for DATA beyond the connection window it granted', async () => {
      // Connection credit goes back as DATA is received (not as it is delivered): once half the
      // window has arrived, the server has granted it again, so a peer cannot overrun 65535 with
      // frames of at most 16384. The check is reachable on the wire only with a connection
      // window below one frame: 8192 here, overrun by a single 8193-byte frame.
      const h = await serve(hold, { connectionWindow: 8192 });
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), dataFrame(1, Buffer.alloc(8192)));
      await peer.sync();
      expect(peer.unread(GOAWAY)).toEqual([]);
      expect(peer.unread(WINDOW_UPDATE, 0).map((f) => f.payload.readUInt32BE(0))).toEqual([8192]);
      peer.send(dataFrame(1, Buffer.alloc(8193)));
      const g = goawayOf(await peer.next(GOAWAY, 0));
      expect(g).toEqual({ last: 1, code: FLOW_CONTROL_ERROR });
      await peer.closed;
    });

    it('returns credit for the connection and the stream once the handler has the data', async () => {
      const h = await serve(echo);
      // Windows for the echoed 96 KiB to come back in.
      const peer = await openPeer(h.port, { settings: [[SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20]] });
      peer.send(windowUpdate(0, 1 << 20), headersFrame(1), dataFrame(1, Buffer.alloc(16_384, 1)), dataFrame(1, Buffer.alloc(16_384, 2)));
      const conn = await peer.next(WINDOW_UPDATE, 0);
      const stream = await peer.next(WINDOW_UPDATE, 1);
      expect(conn.payload.readUInt32BE(0)).toBe(32_768);
      expect(stream.payload.readUInt32BE(0)).toBe(32_768);
      // The credit is real: another full window's worth is accepted.
      peer.send(dataFrame(1, Buffer.alloc(16_384, 3)), dataFrame(1, Buffer.alloc(16_384, 4)), dataFrame(1, Buffer.alloc(16_384, 5)), dataFrame(1, Buffer.alloc(16_383, 6), END_STREAM));
      const r = await peer.response(1);
      expect(r.body.length).toBe(5 * 16_384 + 16_383);
      expect(peer.unread(RST_STREAM)).toEqual([]);
    });
  });

  describe('pause() and resume()', () => {
    it('holds the data (and its credit) while paused, then delivers it in order, then \'end\'', async () => {
      const got: string[] = [];
      const h = await serve((stream) => {
        stream.pause();
        stream.on('data', (d: Buffer) => got.push(`data ${d.length} ${d[0]}`));
        stream.on('end', () => {
          got.push('end');
          stream.respond(RESPONSE_HEADERS, { endStream: true });
        });
      });
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), dataFrame(1, Buffer.alloc(15_000, 1)), dataFrame(1, Buffer.alloc(15_000, 2)), dataFrame(1, Buffer.alloc(15_000, 3)));
      await peer.sync();
      const stream = h.calls[0]?.stream as H2Stream;
      expect(got).toEqual([]);
      expect(peer.unread(WINDOW_UPDATE, 1)).toEqual([]);
      // The connection's credit does not wait for the stream.
      expect(peer.unread(WINDOW_UPDATE, 0)).toHaveLength(1);

      stream.resume();
      const wu = await peer.next(WINDOW_UPDATE, 1);
      expect(wu.payload.readUInt32BE(0)).toBeGreaterThan(0);
      expect(got).toEqual(['data 15000 1', 'data 15000 2', 'data 15000 3']);

      // Paused again, the end waits behind the last data too.
      stream.pause();
      peer.send(dataFrame(1, Buffer.alloc(10, 4), END_STREAM));
      await peer.sync();
      expect(got).toHaveLength(3);
      expect(stream.readableEnded).toBe(false);
      stream.resume();
      const r = await peer.next(HEADERS, 1);
      expect(r.flags).toBe(END_STREAM | END_HEADERS);
      expect(got).toEqual(['data 15000 1', 'data 15000 2', 'data 15000 3', 'data 10 4', 'end']);
      expect(stream.readableEnded).toBe(true);
    });
  });

  describe('stream limit', () => {
    it('refuses a 5th concurrent stream with REFUSED_STREAM; the first 4 complete; a slot freed is usable', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      peer.send(...[1, 3, 5, 7, 9].map((id) => headersFrame(id, END_HEADERS | END_STREAM)));
      const rst = await peer.next(RST_STREAM);
      expect(rst.stream).toBe(9);
      expect(rst.payload.readUInt32BE(0)).toBe(REFUSED_STREAM);
      await peer.sync();
      expect(peer.unread(RST_STREAM)).toEqual([]);
      expect(h.calls.map((c) => c.stream.id)).toEqual([1, 3, 5, 7]);
      for (const c of h.calls) reply(c.stream, Buffer.from(`reply ${c.stream.id}`));
      for (const id of [1, 3, 5, 7]) {
        const r = await peer.response(id);
        expect(r.body.toString()).toBe(`reply ${id}`);
      }
      peer.send(headersFrame(11, END_HEADERS | END_STREAM));
      await peer.sync();
      expect(h.calls.map((c) => c.stream.id)).toEqual([1, 3, 5, 7, 11]);
      expect(peer.unread(RST_STREAM)).toEqual([]);
    });
  });

  describe('connection errors: GOAWAY with the code, then the socket closes', () => {
    const cases: [string, number, () => Buffer[]][] = [
      ['the first frame after the preface is not SETTINGS', PROTOCOL_ERROR, () => [PREFACE, frame(PING, 0, 0, Buffer.alloc(8))]],
      // An unknown type, which would be ignored at any other length.
      ['a frame longer than 16384', FRAME_SIZE_ERROR, () => [frame(0xfa, 0, 0, Buffer.alloc(16_385))]],
      ['HEADERS without END_HEADERS, then a PING', PROTOCOL_ERROR, () => [headersFrame(1, 0), frame(PING, 0, 0, Buffer.alloc(8))]],
      ['HEADERS on an even stream id', PROTOCOL_ERROR, () => [headersFrame(2, END_HEADERS | END_STREAM)]],
      ['HEADERS on stream 0', PROTOCOL_ERROR, () => [headersFrame(0, END_HEADERS | END_STREAM)]],
      ['a header block that does not decode (indexed field 0)', COMPRESSION_ERROR, () => [frame(HEADERS, END_HEADERS | END_STREAM, 1, Buffer.from([0x80]))]],
      ['a PUSH_PROMISE from the client', PROTOCOL_ERROR, () => [frame(PUSH_PROMISE, END_HEADERS, 1, Buffer.concat([u32(2), literalBlock(REQUEST)]))]],
      ['a PING of 7 bytes', FRAME_SIZE_ERROR, () => [frame(PING, 0, 0, Buffer.alloc(7))]],
      ['a PING on a stream', PROTOCOL_ERROR, () => [frame(PING, 0, 1, Buffer.alloc(8))]],
      ['WINDOW_UPDATE of 0 on stream 0', PROTOCOL_ERROR, () => [windowUpdate(0, 0)]],
      ['WINDOW_UPDATE of 3 bytes', FRAME_SIZE_ERROR, () => [frame(WINDOW_UPDATE, 0, 0, Buffer.alloc(3))]],
      ['WINDOW_UPDATE on an idle stream', PROTOCOL_ERROR, () => [windowUpdate(1, 10)]],
      ['DATA on an idle stream', PROTOCOL_ERROR, () => [dataFrame(1, Buffer.from('x'))]],
      ['DATA on stream 0', PROTOCOL_ERROR, () => [dataFrame(0, Buffer.from('x'))]],
      ['RST_STREAM on an idle stream', PROTOCOL_ERROR, () => [frame(RST_STREAM, 0, 1, u32(CANCEL))]],
      ['CONTINUATION without a header block', PROTOCOL_ERROR, () => [frame(CONTINUATION, END_HEADERS, 1, literalBlock(REQUEST))]],
      ['SETTINGS of 5 bytes', FRAME_SIZE_ERROR, () => [frame(SETTINGS, 0, 0, Buffer.alloc(5))]],
      ['a SETTINGS ACK with a payload', FRAME_SIZE_ERROR, () => [frame(SETTINGS, ACK, 0, Buffer.alloc(6))]],
      ['SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1', FLOW_CONTROL_ERROR, () => [settingsFrame([[SETTINGS_INITIAL_WINDOW_SIZE, 0x80000000]])]],
      ['GOAWAY shorter than 8 bytes', FRAME_SIZE_ERROR, () => [frame(GOAWAY, 0, 0, Buffer.alloc(4))]],
    ];

    it.each(cases)('%s', async (_name, code, frames) => {
      const h = await serve(hold);
      const first = frames();
      const raw = first[0] === PREFACE;
      const peer = await openPeer(h.port, { handshake: !raw });
      const closedConn = h.connected.then((c) => once(c, 'close'));
      peer.send(...first);
      const g = await peer.next(GOAWAY, 0);
      expect(goawayOf(g)).toEqual({ last: 0, code });
      await peer.closed;
      await closedConn;
      // Nothing but the server's SETTINGS (and its ACK of ours) came before the GOAWAY.
      expect(peer.seen.filter((f) => f.type !== SETTINGS && f.type !== GOAWAY)).toEqual([]);
      expect(h.calls).toEqual([]);
    });

    it('names the highest stream it saw in GOAWAY, and cancels the open streams', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), headersFrame(3));
      await peer.sync();
      peer.send(dataFrame(7, Buffer.from('idle')));
      const g = goawayOf(await peer.next(GOAWAY, 0));
      expect(g).toEqual({ last: 3, code: PROTOCOL_ERROR });
      expect(await Promise.all(h.calls.map((c) => closeOf(c.stream)))).toEqual([CANCEL, CANCEL]);
      await peer.closed;
    });

    it('closes the socket on a wrong preface, without a GOAWAY', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port, { handshake: false });
      const closedConn = h.connected.then((c) => once(c, 'close'));
      peer.socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      await peer.closed;
      await closedConn;
      expect(peer.seen.filter((f) => f.type === GOAWAY)).toEqual([]);
    });
  });

  describe('control frames', () => {
    it('starts with SETTINGS: MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_HEADER_LIST_SIZE', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      const first = await peer.take(() => true, 'the first frame');
      expect(first.type).toBe(SETTINGS);
      expect(first.flags).toBe(0);
      expect(first.stream).toBe(0);
      const s = settingsOf(first);
      expect(s.get(SETTINGS_MAX_CONCURRENT_STREAMS)).toBe(4);
      expect(s.get(SETTINGS_INITIAL_WINDOW_SIZE)).toBe(65_535);
      expect(s.get(SETTINGS_MAX_HEADER_LIST_SIZE)).toBe(8192);
      await peer.sync();
      // The default connection window needs no WINDOW_UPDATE.
      expect(peer.seen.filter((f) => f.type === WINDOW_UPDATE)).toEqual([]);
    });

    it('announces a larger connection window with a WINDOW_UPDATE right after its SETTINGS', async () => {
      const h = await serve(hold, { connectionWindow: 1 << 20, streamWindow: 1 << 18 });
      const peer = await openPeer(h.port);
      await peer.sync();
      expect(peer.seen[0]?.type).toBe(SETTINGS);
      expect(settingsOf(peer.seen[0] as Frame).get(SETTINGS_INITIAL_WINDOW_SIZE)).toBe(1 << 18);
      expect(peer.seen[1]?.type).toBe(WINDOW_UPDATE);
      expect(peer.seen[1]?.stream).toBe(0);
      expect(peer.seen[1]?.payload.readUInt32BE(0)).toBe((1 << 20) - 65_535);
    });

    it('acknowledges SETTINGS, answers PING with the same 8 bytes, and does not answer a PING ACK', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      const ack1 = await peer.take((f) => f.type === SETTINGS && (f.flags & ACK) !== 0, 'SETTINGS ACK');
      expect(ack1.payload.length).toBe(0);
      peer.send(settingsFrame([[SETTINGS_INITIAL_WINDOW_SIZE, 1000]]));
      await peer.take((f) => f.type === SETTINGS && (f.flags & ACK) !== 0, 'a second SETTINGS ACK');
      const payload = Buffer.from('01234567');
      peer.send(frame(PING, 0, 0, payload));
      const pong = await peer.next(PING, 0);
      expect(pong.flags).toBe(ACK);
      expect(pong.payload.equals(payload)).toBe(true);
      peer.send(frame(PING, ACK, 0, Buffer.from('ackedack')));
      await peer.sync();
      expect(peer.seen.filter((f) => f.type === PING && f.payload.toString() === 'ackedack')).toEqual([]);
    });

    it('ignores PRIORITY and unknown frame types', async () => {
      const h = await serve(echo);
      const peer = await openPeer(h.port);
      peer.send(frame(PRIORITY, 0, 1, Buffer.from([0, 0, 0, 0, 16])), frame(0xfa, 0, 0, Buffer.from('whatever')), frame(0xfb, 0xff, 5, Buffer.alloc(3)));
      await expectEcho(peer, 1);
      expect(peer.seen.filter((f) => f.type === GOAWAY || f.type === RST_STREAM)).toEqual([]);
    });
  });

  describe('malformed requests: RST_STREAM PROTOCOL_ERROR, no call, the connection goes on', () => {
    const withField = (f: Field): Field[] => [...REQUEST, f];
    const cases: [string, Field[]][] = [
      ['an uppercase header name', withField(['X-Upper', 'v'])],
      ['no :path', REQUEST.filter(([n]) => n !== ':path')],
      ['an empty :path', REQUEST.map(([n, v]): Field => [n, n === ':path' ? '' : v])],
      ['no :method', REQUEST.filter(([n]) => n !== ':method')],
      ['no :scheme', REQUEST.filter(([n]) => n !== ':scheme')],
      ['a pseudo-header after a regular one', [...REQUEST.filter(([n]) => n !== ':path'), [':path', '/test.Echo/Echo']]],
      ['an unknown pseudo-header', [[':protocol', 'websocket'], ...REQUEST]],
      ['a response pseudo-header', [[':status', '200'], ...REQUEST]],
      ['a repeated pseudo-header', [[':path', '/a'], ...REQUEST]],
      ['a connection header', withField(['connection', 'keep-alive'])],
      ['a transfer-encoding header', withField(['transfer-encoding', 'chunked'])],
      ['te: gzip', [...REQUEST.filter(([n]) => n !== 'te'), ['te', 'gzip']]],
      ['a NUL in a value', withField(['x-a', 'a\0b'])],
      ['a CR LF in a value', withField(['x-a', 'a\r\nx-b: c'])],
    ];

    it.each(cases)('%s', async (_name, fields) => {
      const h = await serve(echo);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1, END_HEADERS, fields), dataFrame(1, Buffer.from('dropped'), END_STREAM));
      const rst = await peer.next(RST_STREAM, 1);
      expect(rst.payload.readUInt32BE(0)).toBe(PROTOCOL_ERROR);
      await expectEcho(peer, 3);
      expect(h.calls.map((c) => c.stream.id)).toEqual([3]);
      expect(peer.seen.filter((f) => f.type === GOAWAY)).toEqual([]);
    });
  });

  describe('header list over maxHeaderListSize', () => {
    it('answers grpc-status 8 without a call; the HPACK table stays in sync for the next request', async () => {
      const h = await serve((stream, headers) => {
        stream.on('data', noop);
        stream.on('end', () => {
          stream.respond({ ...RESPONSE_HEADERS, 'x-after': String(headers['x-after']) }, { waitForTrailers: true });
          stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
          stream.end(Buffer.from('ok'));
        });
      });
      const session = client(h.port);
      // Fills node's dynamic table with x-before / x-after, which later requests then index.
      const r1 = await call(session, Buffer.from('1'), { 'x-before': 'before-value', 'x-after': 'after-1' });
      expect(r1.headers['x-after']).toBe('after-1');
      const r2 = await call(session, Buffer.from('2'), { 'x-before': 'before-value', 'x-big': 'v'.repeat(9000), 'x-after': 'after-2' });
      expect(r2.headers[':status']).toBe(200);
      expect(r2.headers['grpc-status']).toBe('8');
      expect(r2.body.length).toBe(0);
      expect(h.calls).toHaveLength(1);
      const r3 = await call(session, Buffer.from('3'), { 'x-before': 'before-value', 'x-after': 'after-2' });
      expect(r3.headers['x-after']).toBe('after-2');
      expect(r3.trailers?.['grpc-status']).toBe('0');
      expect(h.calls).toHaveLength(2);
      expect(h.calls[1]?.headers['x-before']).toBe('before-value');
    });

    it('on the raw wire: HEADERS with END_STREAM, then RST_STREAM NO_ERROR for a request still open', async () => {
      const h = await serve(echo);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1, END_HEADERS, [...REQUEST, ['x-big', 'v'.repeat(9000)]]));
      const hf = await peer.next(HEADERS, 1);
      expect(hf.flags).toBe(END_STREAM | END_HEADERS);
      expect((await peer.next(RST_STREAM, 1)).payload.readUInt32BE(0)).toBe(NO_ERROR);
      // Its DATA is ignored; the connection goes on.
      peer.send(dataFrame(1, Buffer.from('late'), END_STREAM));
      await expectEcho(peer, 3);
      expect(h.calls.map((c) => c.stream.id)).toEqual([3]);
    });
  });

  describe('a response that ends before the request', () => {
    it('sends HEADERS with END_STREAM, then RST_STREAM NO_ERROR so the client stops sending', async () => {
      const h = await serve((stream) => stream.respond({ ...RESPONSE_HEADERS, 'grpc-status': '12' }, { endStream: true }));
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1));
      const hf = await peer.nextOn(1);
      expect(hf.type).toBe(HEADERS);
      expect(hf.flags).toBe(END_STREAM | END_HEADERS);
      const rst = await peer.nextOn(1);
      expect(rst.type).toBe(RST_STREAM);
      expect(rst.payload.readUInt32BE(0)).toBe(NO_ERROR);
      expect(await closeOf(h.calls[0]?.stream as H2Stream)).toBe(NO_ERROR);
    });

    // BUG: a request with END_STREAM on its HEADERS answered synchronously from onStream gets a
    // RST_STREAM(NO_ERROR) after a complete exchange, and the stream never emits 'end'
    // (connection.ts:422-423 calls onStream before #remoteEnded, so localEnded sees remoteDone false).
    it('sends no RST_STREAM when the request had already ended (END_STREAM on its HEADERS)', async () => {
      const h = await serve((stream) => stream.respond({ ...RESPONSE_HEADERS, 'grpc-status': '12' }, { endStream: true }));
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1, END_HEADERS | END_STREAM));
      const hf = await peer.nextOn(1);
      expect(hf.flags).toBe(END_STREAM | END_HEADERS);
      await peer.sync();
      expect(peer.seen.filter((f) => f.type === RST_STREAM)).toEqual([]);
      expect(h.calls[0]?.stream.readableEnded).toBe(true);
    });
  });

  describe('client reset', () => {
    it('closes the server stream with rstCode 8 on a node client\'s cancel; writes after it answer false', async () => {
      const h = await serve((stream, headers) => {
        if (headers[':path'] === '/test.Echo/Hold') stream.respond(RESPONSE_HEADERS);
        else echo(stream, headers);
      });
      const session = client(h.port);
      const req = session.request({ ':method': 'POST', ':path': '/test.Echo/Hold', 'content-type': 'application/grpc', te: 'trailers' });
      req.on('error', noop);
      await once(req, 'response');
      const stream = h.calls[0]?.stream as H2Stream;
      expect(stream.closed).toBe(false);
      const closed = closeOf(stream);
      req.close(http2.constants.NGHTTP2_CANCEL);
      expect(await closed).toBe(CANCEL);
      expect(stream.closed).toBe(true);
      expect(stream.destroyed).toBe(true);
      expect(stream.write(Buffer.from('after'))).toBe(false);
      // The connection goes on.
      const r = await call(session, Buffer.from('x'));
      expect(r.rstCode).toBe(NO_ERROR);
    });
  });

  describe('large header blocks', () => {
    const bigValue = (): string => randomBytes(30_000).toString('base64').slice(0, 40_000);

    it('splits 40,000-byte trailers into HEADERS + CONTINUATION that node:http2 reads whole', async () => {
      const value = bigValue();
      const h = await serve((stream) => {
        stream.on('data', noop);
        stream.on('end', () => reply(stream, Buffer.from('body'), { 'grpc-status': '0', 'x-big': value }));
      });
      const session = client(h.port, { settings: { maxHeaderListSize: 1 << 20 }, maxHeaderListPairs: 256 });
      const r = await call(session, Buffer.from('x'));
      expect(r.trailers?.['x-big']).toBe(value);
      expect(r.trailers?.['grpc-status']).toBe('0');
      expect(r.body.toString()).toBe('body');
    });

    it('on the raw wire: HEADERS (END_STREAM, no END_HEADERS), then CONTINUATION frames of at most 16384, the last with END_HEADERS', async () => {
      const value = bigValue();
      const h = await serve((stream) => {
        stream.on('data', noop);
        stream.on('end', () => reply(stream, Buffer.from('body'), { 'grpc-status': '0', 'x-big': value }));
      });
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1, END_HEADERS | END_STREAM));
      await peer.sync();
      await peer.take((f) => f.type === CONTINUATION && (f.flags & END_HEADERS) !== 0, 'the last CONTINUATION');
      const onStream = peer.seen.filter((f) => f.stream === 1);
      const trailerAt = onStream.findIndex((f, i) => i > 0 && f.type === HEADERS);
      const block = onStream.slice(trailerAt);
      expect(block[0]?.flags).toBe(END_STREAM);
      expect(block.length).toBeGreaterThanOrEqual(2);
      expect(block.slice(1).every((f) => f.type === CONTINUATION)).toBe(true);
      expect(block.slice(1, -1).every((f) => f.flags === 0)).toBe(true);
      expect(block.at(-1)?.flags).toBe(END_HEADERS);
      expect(block.every((f) => f.payload.length <= 16_384)).toBe(true);
      // Nothing else on the connection in between (RFC 9113 6.10).
      const all = peer.seen;
      const from = all.indexOf(block[0] as Frame);
      expect(all.slice(from, from + block.length)).toEqual(block);
    });
  });

  describe('graceful close', () => {
    it('GOAWAY NO_ERROR naming the open stream, refuses new ones, lets the open one finish, then ends', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1, END_HEADERS | END_STREAM));
      await peer.sync();
      const conn = h.connections[0] as H2Connection;
      const connClosed = once(conn, 'close');
      conn.close();
      expect(goawayOf(await peer.next(GOAWAY, 0))).toEqual({ last: 1, code: NO_ERROR });
      peer.send(headersFrame(3, END_HEADERS | END_STREAM));
      const rst = await peer.next(RST_STREAM, 3);
      expect(rst.payload.readUInt32BE(0)).toBe(REFUSED_STREAM);
      expect(h.calls.map((c) => c.stream.id)).toEqual([1]);
      expect(peer.isClosed).toBe(false);
      reply(h.calls[0]?.stream as H2Stream, Buffer.from('last words'));
      const r = await peer.response(1);
      expect(r.body.toString()).toBe('last words');
      expect(r.end.flags).toBe(END_STREAM | END_HEADERS);
      await peer.closed;
      await connClosed;
    });

    it('a connection error after the graceful GOAWAY names no stream above the first GOAWAY (RFC 9113 6.8), refused ones included', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1, END_HEADERS | END_STREAM));
      await peer.sync();
      (h.connections[0] as H2Connection).close();
      expect(goawayOf(await peer.next(GOAWAY, 0))).toEqual({ last: 1, code: NO_ERROR });
      peer.send(headersFrame(3, END_HEADERS | END_STREAM));
      expect((await peer.next(RST_STREAM, 3)).payload.readUInt32BE(0)).toBe(REFUSED_STREAM);
      peer.send(dataFrame(9, Buffer.from('idle')));
      expect(goawayOf(await peer.next(GOAWAY, 0))).toEqual({ last: 1, code: PROTOCOL_ERROR });
      await peer.closed;
    });

    it('ends at once when no stream is open', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      await peer.sync();
      (h.connections[0] as H2Connection).close();
      expect(goawayOf(await peer.next(GOAWAY, 0))).toEqual({ last: 0, code: NO_ERROR });
      await peer.closed;
    });
  });

  describe('backpressure', () => {
    it('write() answers false at 16 KiB queued while the client gives no window; \'drain\' once it does', async () => {
      const h = await serve((stream) => stream.respond(RESPONSE_HEADERS));
      const peer = await openPeer(h.port, { settings: [[SETTINGS_INITIAL_WINDOW_SIZE, 0]] });
      peer.send(headersFrame(1, END_HEADERS | END_STREAM));
      await peer.next(HEADERS, 1);
      const stream = h.calls[0]?.stream as H2Stream;
      expect(stream.write(Buffer.alloc(8 * 1024, 1))).toBe(true);
      expect(stream.write(Buffer.alloc(7 * 1024, 2))).toBe(true);
      expect(stream.write(Buffer.alloc(32 * 1024, 3))).toBe(false);
      let drained = false;
      const drain = once(stream, 'drain').then(() => { drained = true; });
      await peer.sync();
      expect(peer.unread(DATA, 1)).toEqual([]);
      expect(drained).toBe(false);
      peer.send(windowUpdate(1, 1 << 20));
      await drain;
      await peer.sync();
      const data = peer.seen.filter((f) => f.type === DATA && f.stream === 1);
      expect(data.reduce((n, f) => n + f.payload.length, 0)).toBe(47 * 1024);
    });
  });

  describe('destroy()', () => {
    it('closes every open stream with rstCode 8 (CANCEL) and the socket', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), headersFrame(3, END_HEADERS | END_STREAM), headersFrame(5));
      await peer.sync();
      expect(h.calls).toHaveLength(3);
      const conn = h.connections[0] as H2Connection;
      const closes = h.calls.map((c) => closeOf(c.stream));
      const connClosed = once(conn, 'close');
      conn.destroy();
      expect(await Promise.all(closes)).toEqual([CANCEL, CANCEL, CANCEL]);
      expect(h.calls.every((c) => c.stream.closed)).toBe(true);
      await connClosed;
      await peer.closed;
      expect(conn.streamCount).toBe(0);
    });
  });

  describe('frames on a stream closed shortly before', () => {
    /** A server that answers stream 1 at once (so it resets the request side, NO_ERROR) and echoes the others. */
    async function resetStreamOne(): Promise<{ h: Awaited<ReturnType<typeof serve>>; peer: Peer }> {
      const h = await serve((stream) => {
        if (stream.id === 1) stream.respond(RESPONSE_HEADERS, { endStream: true });
        else echo(stream, {});
      });
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1));
      expect((await peer.next(RST_STREAM, 1)).payload.readUInt32BE(0)).toBe(NO_ERROR);
      return { h, peer };
    }

    it('ignores DATA, WINDOW_UPDATE and RST_STREAM after the server reset it; the DATA still counts for the connection window', async () => {
      const { peer } = await resetStreamOne();
      peer.send(dataFrame(1, Buffer.alloc(16_384)), dataFrame(1, Buffer.alloc(16_384)), windowUpdate(1, 100), frame(RST_STREAM, 0, 1, u32(CANCEL)));
      const wu = await peer.next(WINDOW_UPDATE, 0);
      expect(wu.payload.readUInt32BE(0)).toBe(32_768);
      await peer.sync();
      expect(peer.seen.filter((f) => f.type === GOAWAY)).toEqual([]);
      expect(peer.unread(RST_STREAM)).toEqual([]);
      await expectEcho(peer, 3);
    });

    it('ignores DATA on a refused stream', async () => {
      const h = await serve(hold, { maxConcurrentStreams: 1 });
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), headersFrame(3));
      expect((await peer.next(RST_STREAM, 3)).payload.readUInt32BE(0)).toBe(REFUSED_STREAM);
      peer.send(dataFrame(3, Buffer.from('refused anyway'), END_STREAM));
      await peer.sync();
      expect(peer.seen.filter((f) => f.type === GOAWAY)).toEqual([]);
    });

    it('ignores trailers (HEADERS) the client sent on a stream the server reset, and the HPACK table stays in step', async () => {
      const { h, peer } = await resetStreamOne();
      // "Literal with incremental indexing" (0x40): the block adds an entry to the dynamic table,
      // so a server that skipped decoding it would misread the indexed field (0xbe) below.
      const indexed = Buffer.concat([Buffer.from([0x40, 0x09]), Buffer.from('x-trailer', 'latin1'), Buffer.from([0x03]), Buffer.from('yes', 'latin1')]);
      peer.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, indexed));
      peer.send(frame(HEADERS, END_HEADERS, 3, Buffer.concat([literalBlock(REQUEST), Buffer.from([0xbe])])), dataFrame(3, Buffer.from('ping'), END_STREAM));
      const r = await peer.response(3);
      expect(r.body.toString()).toBe('ping');
      expect(h.calls[1]?.headers['x-trailer']).toBe('yes');
      expect(peer.seen.filter((f) => f.type === GOAWAY)).toEqual([]);
    });
  });

  describe('HEADERS on a stream the server refused, or reset long ago', () => {
    it('ignores trailers on a refused stream', async () => {
      const h = await serve(hold, { maxConcurrentStreams: 1 });
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1), headersFrame(3));
      expect((await peer.next(RST_STREAM, 3)).payload.readUInt32BE(0)).toBe(REFUSED_STREAM);
      peer.send(headersFrame(3, END_HEADERS | END_STREAM, [['x-trailer', 'late']]));
      await peer.sync();
      expect(peer.seen.filter((f) => f.type === GOAWAY)).toEqual([]);
    });

    it('remembers the last 1,024 streams it reset: HEADERS on the newest is ignored, on one reset 1,025 resets ago it is a connection error', async () => {
      const h = await serve((stream) => stream.respond(RESPONSE_HEADERS, { endStream: true }));
      const peer = await openPeer(h.port);
      const ids = Array.from({ length: 1025 }, (_, i) => 2 * i + 1);
      peer.send(...ids.map((id) => headersFrame(id)));
      await peer.next(RST_STREAM, ids[ids.length - 1]!);
      peer.send(headersFrame(ids[ids.length - 1]!, END_HEADERS | END_STREAM, [['x-trailer', 'late']]));
      await peer.sync();
      expect(peer.seen.filter((f) => f.type === GOAWAY)).toEqual([]);
      peer.send(headersFrame(1, END_HEADERS | END_STREAM, [['x-trailer', 'too late']]));
      expect(goawayOf(await peer.next(GOAWAY, 0))).toEqual({ last: ids[ids.length - 1], code: STREAM_CLOSED });
      await peer.closed;
    });
  });

  describe('HEADERS on a closed stream the server did not reset: GOAWAY STREAM_CLOSED (RFC 9113 5.1)', () => {
    it('a second request on the id of a stream that ended both ways', async () => {
      const h = await serve(echo);
      const peer = await openPeer(h.port);
      await expectEcho(peer, 1);
      await expectEcho(peer, 3);
      peer.send(headersFrame(1, END_HEADERS | END_STREAM));
      expect(goawayOf(await peer.next(GOAWAY, 0))).toEqual({ last: 3, code: STREAM_CLOSED });
      await peer.closed;
      expect(h.calls).toHaveLength(2);
    });

    it('a request on an id below the highest seen that was skipped (closed when a higher id opened, RFC 9113 5.1.1; the same code here)', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(5));
      await peer.sync();
      peer.send(headersFrame(3));
      expect(goawayOf(await peer.next(GOAWAY, 0))).toEqual({ last: 5, code: STREAM_CLOSED });
      expect(await closeOf(h.calls[0]!.stream)).toBe(CANCEL);
      expect(h.calls).toHaveLength(1);
      await peer.closed;
    });
  });

  describe('stream errors close the stream they reset', () => {
    // BUG: PRIORITY of the wrong length on an open stream sends RST_STREAM FRAME_SIZE_ERROR but
    // leaves the stream open (connection.ts:264 calls #resetStream without the stream): its
    // handler never sees 'close', it keeps a concurrency slot, and its later frames go out on a
    // stream the server itself reset.
    it('a PRIORITY of 4 bytes on an open stream: RST_STREAM FRAME_SIZE_ERROR and the stream closed', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1));
      await peer.sync();
      peer.send(frame(PRIORITY, 0, 1, Buffer.alloc(4)));
      const rst = await peer.next(RST_STREAM, 1);
      expect(rst.payload.readUInt32BE(0)).toBe(FRAME_SIZE_ERROR);
      const stream = h.calls[0]?.stream as H2Stream;
      expect(stream.closed).toBe(true);
      reply(stream, Buffer.from('after reset'));
      await peer.sync();
      expect(peer.unread(HEADERS, 1)).toEqual([]);
    });

    it('a WINDOW_UPDATE of 0 on an open stream: RST_STREAM PROTOCOL_ERROR and the stream closed', async () => {
      const h = await serve(hold);
      const peer = await openPeer(h.port);
      peer.send(headersFrame(1));
      await peer.sync();
      peer.send(windowUpdate(1, 0));
      expect((await peer.next(RST_STREAM, 1)).payload.readUInt32BE(0)).toBe(PROTOCOL_ERROR);
      expect(h.calls[0]?.stream.closed).toBe(true);
      expect(await closeOf(h.calls[0]?.stream as H2Stream)).toBe(PROTOCOL_ERROR);
    });
  });
});

