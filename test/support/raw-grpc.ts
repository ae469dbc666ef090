/**
 * A raw gRPC client over node:http2, for transport tests that must choose the wire bytes: the
 * request is length-prefixed messages with chosen headers, cut into chosen DATA frames (each
 * chunk is written only after the previous one was handed to the socket, so nghttp2 cannot
 * coalesce them); the answer is the response headers, the data, the trailers and whether the
 * response was trailers-only (one HEADERS frame with END_STREAM carrying grpc-status).
 *
 * Also: hand-built HTTP/2 frames for a plain TCP socket (floods), and a TCP proxy that counts the
 * bytes it passes (flow-control checks).
 */
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { ErrorInfo } from '../../gen/google/rpc/error_details.js';
import { Status } from '../../gen/google/rpc/status.js';

/** The SessionService path prefix. */
export const SESSION_SERVICE = '/palimpsest.v1.SessionService/';

/** One gRPC length-prefixed message: flag byte (1 = compressed), 4-byte big-endian length, body. */
export function grpcFrame(body: Uint8Array, compressed = false): Buffer {
  const h = Buffer.alloc(5);
  h[0] = compressed ? 1 : 0;
  h.writeUInt32BE(body.length, 1);
  return Buffer.concat([h, body]);
}

/** Splits response data into its length-prefixed messages (throws on a malformed or cut frame). */
export function grpcMessages(data: Buffer): { compressed: boolean; body: Buffer }[] {
  const out: { compressed: boolean; body: Buffer }[] = [];
  let i = 0;
  while (i < data.length) {
    if (i + 5 > data.length) throw new Error(`response data ends inside a length prefix at ${i}`);
    const len = data.readUInt32BE(i + 1);
    if (i + 5 + len > data.length) throw new Error(`response data ends inside a message at ${i}`);
    out.push({ compressed: data[i] === 1, body: data.subarray(i + 5, i + 5 + len) });
    i += 5 + len;
  }
  return out;
}

/** What the server answered. */
export interface RawAnswer {
  /** :status of the response HEADERS. */
  readonly httpStatus: number;
  /** The first HEADERS frame. */
  readonly headers: IncomingHttpHeaders;
  /** The trailing HEADERS frame (undefined for a trailers-only response or a reset stream). */
  readonly trailers: IncomingHttpHeaders | undefined;
  /** One HEADERS frame with END_STREAM (and grpc-status in it), no DATA. */
  readonly trailersOnly: boolean;
  /** All DATA bytes. */
  readonly data: Buffer;
  /** grpc-status from the trailers (or the trailers-only headers); undefined when none came. */
  readonly code: number | undefined;
  /** grpc-message, percent-decoded. */
  readonly message: string;
  /** grpc-status-details-bin, decoded. */
  readonly details: Status | undefined;
  /** The ErrorInfo reason of the details ('' when none). */
  readonly reason: string;
  /** RST_STREAM code the stream was closed with (0 = none / NO_ERROR). */
  readonly rstCode: number;
}

/** How to send a request. */
export interface RawRequest {
  /** Extra headers (they override the defaults: content-type application/grpc, te trailers). */
  readonly headers?: Record<string, string>;
  /** The request body: length-prefixed messages (see grpcFrame), written as given. */
  readonly body?: Uint8Array;
  /** Cut the body into DATA frames of this many bytes (default: one write). */
  readonly chunkSize?: number;
  /** Leave the request stream open after the body (no END_STREAM). */
  readonly keepOpen?: boolean;
}

/** A call in flight. */
export interface RawCall {
  readonly stream: ClientHttp2Stream;
  /** Resolves when the response HEADERS arrived. */
  readonly responded: Promise<IncomingHttpHeaders>;
  /** Resolves once the body was handed to the socket. */
  readonly sent: Promise<void>;
  /** Resolves when the server ended the response or the stream closed (never rejects: a reset is in rstCode). */
  readonly answer: Promise<RawAnswer>;
  /** DATA bytes received so far. */
  received(): number;
}

function decodeAnswer(httpStatus: number, headers: IncomingHttpHeaders, trailers: IncomingHttpHeaders | undefined, trailersOnly: boolean, data: Buffer, rstCode: number): RawAnswer {
  const st = trailers ?? (trailersOnly ? headers : {});
  const raw = st['grpc-status-details-bin'];
  const details = typeof raw === 'string' ? Status.decode(Buffer.from(raw, 'base64')) : undefined;
  let reason = '';
  for (const d of details?.details ?? []) if (d.typeUrl.endsWith('/google.rpc.ErrorInfo')) reason = ErrorInfo.decode(d.value).reason;
  const code = st['grpc-status'] === undefined ? undefined : Number(st['grpc-status']);
  return { httpStatus, headers, trailers, trailersOnly, data, code, message: decodeURIComponent(String(st['grpc-message'] ?? '')), details, reason, rstCode };
}

/** Writes a chunk and resolves once the stream handed it on (so the next chunk is its own DATA frame). */
function write(stream: ClientHttp2Stream, chunk: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.write(chunk, (err) => (err ? reject(err) : resolve()));
  });
}

/** A raw gRPC connection (one HTTP/2 session). */
export class RawGrpc {
  private constructor(readonly session: ClientHttp2Session, readonly remoteSettings: http2.Settings) {}

  /** Connects (prior knowledge on http://) and waits for the server's SETTINGS. */
  static connect(url: string, options: http2.ClientSessionOptions = {}): Promise<RawGrpc> {
    return new Promise((resolve, reject) => {
      const session = http2.connect(url, options);
      session.once('error', reject);
      session.once('remoteSettings', (s) => {
        session.off('error', reject);
        session.on('error', () => undefined);
        resolve(new RawGrpc(session, s));
      });
    });
  }

  /** Starts a call to `method` (a SessionService method name, or a full path starting with '/'). */
  start(method: string, req: RawRequest = {}): RawCall {
    const path = method.startsWith('/') ? method : `${SESSION_SERVICE}${method}`;
    const stream = this.session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...req.headers }, { endStream: false });
    let httpStatus = 0;
    let headers: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders | undefined;
    let trailersOnly = false;
    let bytes = 0;
    const parts: Buffer[] = [];
    const responded = new Promise<IncomingHttpHeaders>((resolve) => {
      stream.once('response', (h, flags) => {
        httpStatus = Number(h[':status']);
        headers = h;
        trailersOnly = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
        resolve(h);
      });
    });
    stream.on('trailers', (h) => { trailers = h; });
    stream.on('data', (d: Buffer) => {
      bytes += d.length;
      parts.push(d);
    });
    stream.on('error', () => undefined);
    // The answer is complete when the server ends its side (as a gRPC client sees it, even when
    // the request is still being sent: then the stream is cancelled, as grpc-js does), or when the
    // stream closes (a reset).
    const answer = new Promise<RawAnswer>((resolve) => {
      const done = (): void => resolve(decodeAnswer(httpStatus, headers, trailers, trailersOnly, Buffer.concat(parts), stream.rstCode ?? 0));
      stream.once('end', () => {
        done();
        if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      });
      stream.once('close', done);
    });
    const sent = (async () => {
      const body = req.body ?? new Uint8Array(0);
      const size = req.chunkSize ?? Math.max(body.length, 1);
      for (let i = 0; i < body.length && !stream.closed; i += size) await write(stream, body.subarray(i, i + size));
      if (!req.keepOpen && !stream.closed) stream.end();
    })().catch(() => undefined);
    return { stream, responded, sent, answer, received: () => bytes };
  }

  /** A whole call: sends the request and resolves with the answer. */
  call(method: string, req: RawRequest = {}): Promise<RawAnswer> {
    return this.start(method, req).answer;
  }

  close(): void {
    this.session.close();
  }
}

/** HTTP/2 frame types used by the flood tests. */
export const FRAME = { DATA: 0x0, HEADERS: 0x1, RST_STREAM: 0x3, SETTINGS: 0x4, PING: 0x6, GOAWAY: 0x7, CONTINUATION: 0x9 } as const;
/** HTTP/2 frame flags. */
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;
/** The client connection preface. */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** One HTTP/2 frame: 9-byte header (24-bit length, type, flags, 31-bit stream id) + payload. */
export function h2Frame(type: number, flags: number, streamId: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  const f = Buffer.alloc(9 + payload.length);
  f.writeUIntBE(payload.length, 0, 3);
  f[3] = type;
  f[4] = flags;
  f.writeUInt32BE(streamId & 0x7fffffff, 5);
  f.set(payload, 9);
  return f;
}

/** Parses the frames in `buf` (whole frames only), e.g. to find a GOAWAY and its error code. */
export function h2Frames(buf: Buffer): { type: number; flags: number; streamId: number; payload: Buffer }[] {
  const out: { type: number; flags: number; streamId: number; payload: Buffer }[] = [];
  let i = 0;
  while (i + 9 <= buf.length) {
    const len = buf.readUIntBE(i, 3);
    if (i + 9 + len > buf.length) break;
    out.push({ type: buf[i + 3]!, flags: buf[i + 4]!, streamId: buf.readUInt32BE(i + 5) & 0x7fffffff, payload: buf.subarray(i + 9, i + 9 + len) });
    i += 9 + len;
  }
  return out;
}

/** A TCP proxy that counts the bytes it passes each way (for flow-control checks). */
export class CountingProxy {
  address = '';
  /** Bytes from the server to the client so far. */
  toClient = 0;
  /** Bytes from the client to the server so far. */
  toServer = 0;
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: Server) {}

  /** Starts a proxy to `target` (host:port) on 127.0.0.1:0. */
  static async start(target: string): Promise<CountingProxy> {
    const i = target.lastIndexOf(':');
    const host = target.slice(0, i);
    const port = Number(target.slice(i + 1));
    const proxy: CountingProxy = new CountingProxy(createServer((client) => {
      const upstream = createConnection({ host, port });
      for (const s of [client, upstream]) {
        proxy.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          proxy.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      upstream.on('data', (d: Buffer) => { proxy.toClient += d.length; });
      client.on('data', (d: Buffer) => { proxy.toServer += d.length; });
      upstream.pipe(client);
      client.pipe(upstream);
    }));
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    proxy.address = `127.0.0.1:${(proxy.server.address() as AddressInfo).port}`;
    return proxy;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
