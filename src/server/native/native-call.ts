/**
 * One gRPC call on the native transport (native-server.ts), presented to the handlers in the
 * shape of a grpc-js call (request, metadata, cancelled, getDeadline, 'cancelled' / 'close'
 * events), exactly as web/grpc-call-bridge.ts presents Connect calls: the handler table of
 * handlers.ts, subscribe-handlers.ts, health.ts and reflection.ts is the only implementation of
 * every RPC. This base class is the protocol (gRPC over HTTP/2) shared by the four call shapes
 * (unary-call.ts, server-stream-call.ts, client-stream-call.ts, bidi-call.ts):
 *
 * - admission as on the grpc-js port (auth.ts `enterCall`: the per-connection cap, bearer token
 *   and permission; the verified caller reaches the handlers in the metadata), and the per-RPC
 *   telemetry of both ports (rpc-telemetry.ts: started at the headers, finished once at the
 *   status or at the client's cancel);
 * - the request: `grpc-timeout` (the deadline; at expiry DEADLINE_EXCEEDED, and the call is
 *   cancelled as grpc-js does), `grpc-encoding` (gzip and deflate messages are decompressed, as
 *   grpc-js does; any other encoding of a compressed message is UNIMPLEMENTED; the compressed
 *   flag without an encoding is INTERNAL, a protocol error), the framing (frame-decoder.ts), the
 *   size limit (RESOURCE_EXHAUSTED with grpc-js's message), and the service definition's safe
 *   request deserializers (safe-decode.ts: their refusals are the INVALID_ARGUMENT the grpc-js
 *   port sends, framing.ts's for a missing, second or truncated message);
 * - the response: the prebuilt headers once, each message as one Buffer (prefix + bytes), then
 *   the trailers (grpc-status, percent-encoded grpc-message, the status's metadata such as
 *   grpc-status-details-bin); a status before any message is a trailers-only response, as grpc-js
 *   sends it;
 * - a client that resets the stream, or a connection that drops, cancels the call ('cancelled',
 *   then 'close'), which releases everything it held.
 *
 * Per call there is no closure on the hot path: the HTTP/2 stream's listeners are module
 * functions that find the call on the stream (CALL), the deadline timer gets the call as its
 * argument, the metadata is built only when read (call-metadata.ts), and the response headers and
 * OK trailers are shared frozen objects.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import { gunzipSync, inflateSync } from 'node:zlib';
import { status as Code, type Metadata, type ServiceError } from '@grpc/grpc-js';
import { DomainError } from '../../domain/errors.js';
import { enterCall, type StreamLimiter, type TokenEntry, type TokenRegistry } from '../auth.js';
import type { RpcInfo, RpcRecord, RpcTelemetry } from '../rpc-telemetry.js';
import { refusalOf } from '../safe-decode.js';
import { domainErrorToStatus } from '../status-map.js';
import { rewriteFramingStatus, truncatedFrameStatus } from '../framing.js';
import { HeadersCarrier, requestMetadata } from './call-metadata.js';
import { CallEvents } from './call-events.js';
import { FrameDecoder, type FrameSink } from './frame-decoder.js';
import { parseGrpcTimeout } from './grpc-timeout.js';
import { MAX_TIMER_MS } from '../server-stream.js';
import { H2Stream } from '../http2/stream.js';
import { percentEncode } from './percent-encode.js';

/** The four call shapes of grpc-js handlers. */
export type MethodKind = 'unary' | 'serverStream' | 'clientStream' | 'bidi';

/** A registered method. */
export interface NativeMethod {
  readonly path: string;
  /** The method's short name ("AppendEvents"), as admission and the refusals name it. */
  readonly name: string;
  readonly kind: MethodKind;
  /** Reachable without a token (health, reflection). */
  readonly isPublic: boolean;
  readonly info: RpcInfo;
  readonly deserialize: (bytes: Buffer) => unknown;
  readonly serialize: (value: unknown) => Buffer;
  // The grpc-js handler (its call shape is the kind's).
  readonly handler: (call: never, callback?: never) => void;
}

/** What every call of a server shares. */
export interface NativeContext {
  readonly maxMessageBytes: number;
  readonly limiter: StreamLimiter;
  readonly registry: TokenRegistry | undefined;
  readonly telemetry: RpcTelemetry;
  /** Tracing is on: handlers run in the call's span. */
  readonly traced: boolean;
}

/** A status to end a call with (grpc-js's StatusObject shape). */
export interface CallStatus {
  readonly code: number;
  readonly details: string;
  readonly metadata?: Metadata | null;
}

/** The callback of unary and client-streaming handlers (grpc-js sendUnaryData). */
export type UnaryCallback = (err: unknown, value?: unknown, trailer?: Metadata | null) => void;

/** The property of an HTTP/2 stream holding its call. */
export const CALL = Symbol('palimpsest.nativeCall');

/**
 * The HTTP/2 stream of a call: the part of node:http2's ServerHttp2Stream the calls use, which
 * src/server/http2's streams have too (the two HTTP/2 servers of the native transport).
 */
export interface CallStream {
  readonly destroyed: boolean;
  readonly closed: boolean;
  readonly readableEnded: boolean;
  readonly session: { readonly socket: Socket } | undefined;
  respond(headers: OutgoingHttpHeaders, options?: { readonly endStream?: boolean; readonly waitForTrailers?: boolean }): void;
  write(chunk: Buffer): boolean;
  end(chunk?: Buffer): void;
  cork(): void;
  sendTrailers(headers: OutgoingHttpHeaders): void;
  pause(): unknown;
  resume(): unknown;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- node's listener signatures differ per event
  on(event: string, listener: (...args: any[]) => void): unknown;
}
type StreamWithCall = CallStream & { [CALL]?: NativeCall };

/** Response headers of every call (grpc-js sends the same encodings). */
export const RESPONSE_HEADERS: OutgoingHttpHeaders = Object.freeze({
  ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity,deflate,gzip', 'grpc-encoding': 'identity',
});
const WAIT_FOR_TRAILERS = Object.freeze({ waitForTrailers: true });
const END_STREAM = Object.freeze({ endStream: true });
const OK_TRAILERS: OutgoingHttpHeaders = Object.freeze({ 'grpc-status': '0', 'grpc-message': 'OK' });
const OK_TRAILERS_ONLY: OutgoingHttpHeaders = Object.freeze({ ...RESPONSE_HEADERS, ...OK_TRAILERS });

/** The trailers of a status: grpc-status, grpc-message (percent-encoded), then its metadata as grpc-js writes it. */
export function statusTrailers(code: number, details: string, metadata: Metadata | null | undefined): OutgoingHttpHeaders {
  if (code === Code.OK && details === 'OK' && !metadata) return OK_TRAILERS;
  const h: OutgoingHttpHeaders = metadata ? metadata.toHttp2Headers() : {};
  h['grpc-status'] = String(code);
  h['grpc-message'] = percentEncode(details);
  return h;
}

/** A trailers-only response (no message was sent): the headers and the status in one HEADERS frame with END_STREAM. */
export function respondTrailersOnly(stream: CallStream, trailers: OutgoingHttpHeaders): void {
  stream.respond(trailers === OK_TRAILERS ? OK_TRAILERS_ONLY : Object.assign({}, RESPONSE_HEADERS, trailers), END_STREAM);
}

/** A handler's error as a status, as grpc-js reads it (serverErrorToStatus): UNKNOWN unless it carries a numeric code. */
export function errorToStatus(err: unknown, trailer?: Metadata | null): CallStatus {
  const e = (typeof err === 'object' && err !== null ? err : {}) as Partial<ServiceError>;
  const metadata = trailer ?? e.metadata ?? null;
  if (typeof e.code === 'number' && Number.isInteger(e.code)) {
    return { code: e.code, details: typeof e.details === 'string' ? e.details : (e.message ?? 'Unknown Error'), metadata };
  }
  return { code: Code.UNKNOWN, details: typeof e.message === 'string' ? e.message : 'Unknown Error', metadata };
}

/** Framed messages are cached for the last payload: a pre-encoded delta written to many streams is framed once. */
const FRAME_CACHE_MAX = 64 * 1024;
/** A unary response up to this size is copied behind its prefix; a larger one is written as prefix + payload. */
const COPY_FRAME_MAX = 64 * 1024;
let lastPayload: Buffer | undefined;
let lastFrame: Buffer | undefined;

/** `payload` with its 5-byte prefix (uncompressed), as one Buffer. */
export function frameOf(payload: Buffer): Buffer {
  if (payload === lastPayload) return lastFrame as Buffer;
  const f = Buffer.allocUnsafe(payload.length + 5);
  f[0] = 0;
  f.writeUInt32BE(payload.length, 1);
  payload.copy(f, 5);
  if (payload.length <= FRAME_CACHE_MAX) {
    lastPayload = payload;
    lastFrame = f;
  }
  return f;
}

/**
 * Ends `stream` with one message: framed into one Buffer when small; a large one (a page of
 * events) goes out as its 5-byte prefix and the payload in one writev, not copied.
 */
function endWithMessage(stream: CallStream, payload: Buffer): void {
  if (payload.length <= COPY_FRAME_MAX) {
    stream.end(frameOf(payload));
    return;
  }
  const prefix = Buffer.allocUnsafe(5);
  prefix[0] = 0;
  prefix.writeUInt32BE(payload.length, 1);
  // end() uncorks: both chunks go out in one _writev.
  stream.cork();
  stream.write(prefix);
  stream.end(payload);
}

function noop(): void {}

/**
 * Node keeps a copy of the response headers on every stream for its `sentHeaders` getter (a
 * dictionary-mode object, ~450 bytes of heap per stream, as much as the rest of this call) and
 * reads it for nothing else; nothing here reads `sentHeaders`, so an open stream lets it go.
 * Found by its description once; on a Node without it, nothing is done.
 */
let sentHeadersKey: symbol | null | undefined;
function forgetSentHeaders(stream: CallStream): void {
  if (stream instanceof H2Stream) return; // src/server/http2 keeps no copy
  if (sentHeadersKey === undefined) sentHeadersKey = Object.getOwnPropertySymbols(stream).find((k) => k.description === 'sent-headers') ?? null;
  if (sentHeadersKey !== null) (stream as unknown as Record<symbol, unknown>)[sentHeadersKey] = undefined;
}

function onStreamData(this: StreamWithCall, chunk: Buffer): void {
  this[CALL]?.onData(chunk);
}

function onStreamEnd(this: StreamWithCall): void {
  this[CALL]?.onEnd();
}

function onStreamClose(this: StreamWithCall): void {
  const call = this[CALL];
  // node:http2 keeps a session's streams in a Map, whose replaced tables V8 keeps linked, so a
  // closed stream can stay reachable through scavenges until a full collection: it must not keep
  // its call alive too (bench/README.md, sixth round).
  this[CALL] = undefined;
  call?.onClose();
}

function onWantTrailers(this: StreamWithCall): void {
  this.sendTrailers(this[CALL]?.takeTrailers() ?? OK_TRAILERS);
}

function onDeadline(call: NativeCall): void {
  call.onDeadline();
}

/** The protocol side of a call; the subclasses are the four call shapes. */
export abstract class NativeCall extends CallEvents implements FrameSink {
  /** grpc-js: true once the client cancelled (or the deadline passed). */
  cancelled = false;
  /** grpc-js: the request of unary and server-streaming calls. */
  request: unknown = undefined;
  /** A unary or server-streaming call has its one request message (takeSingleRequest). */
  #gotSingle = false;
  /** The request headers, until the metadata is built from them. */
  #headers: IncomingHttpHeaders | undefined;
  #metadata: Metadata | undefined;
  /** The verified token (auth on, method not public). */
  protected caller: TokenEntry | undefined;
  #deadline = Infinity;
  #timer: NodeJS.Timeout | undefined;
  /** The connection the call is counted in (the per-connection cap) until it ends; undefined = not counted. */
  #counted: string | undefined;
  protected rec: RpcRecord | undefined;
  /** grpc-encoding of the request ('' = identity). */
  #encoding = '';
  #decoder: FrameDecoder | undefined;
  protected headersSent = false;
  /** Status sent, or the call was cancelled: nothing more is written. */
  protected done = false;
  #trailers: OutgoingHttpHeaders | undefined;

  constructor(readonly stream: CallStream, readonly method: NativeMethod, readonly ctx: NativeContext, headers: IncomingHttpHeaders) {
    super();
    this.#headers = headers;
  }

  /** Starts the call: deadline, admission, telemetry, then reading the request. */
  start(connection: string): void {
    const stream = this.stream as StreamWithCall;
    const headers = this.#headers as IncomingHttpHeaders;
    stream[CALL] = this;
    stream.on('close', onStreamClose);
    stream.on('error', noop);
    this.rec = this.ctx.telemetry.start(this.method.info);
    // The span starts with the headers, so refused calls are traced too (as on the grpc-js port).
    if (this.ctx.traced) this.rec.begin(new HeadersCarrier(headers));
    const timeout = headers['grpc-timeout'];
    if (timeout !== undefined) {
      const ms = parseGrpcTimeout(String(timeout));
      if (ms === undefined) {
        this.sendStatus({ code: Code.INTERNAL, details: `Invalid grpc-timeout value "${String(timeout)}"` });
        return;
      }
      this.#deadline = Date.now() + ms;
      if (ms < MAX_TIMER_MS) this.#timer = setTimeout(onDeadline, ms, this);
    }
    const encoding = headers['grpc-encoding'];
    if (typeof encoding === 'string' && encoding !== 'identity') this.#encoding = encoding;
    try {
      const authorization = headers.authorization;
      this.caller = enterCall(this.ctx.limiter, this.ctx.registry, connection, this.method.name, this.method.isPublic, typeof authorization === 'string' ? authorization : undefined);
      this.#counted = connection;
    } catch (e) {
      this.fail(e);
      return;
    }
    // The telemetry logs the verified tenant (there is none without a caller).
    if (this.caller) this.rec.caller(this.metadata);
    this.#decoder = new FrameDecoder(this.ctx.maxMessageBytes);
    stream.on('data', onStreamData);
    stream.on('end', onStreamEnd);
    this.begin();
  }

  /** After admission: client-streaming and bidi calls start their handler here. */
  protected begin(): void {}

  /** A decoded request message (refusals are answered before). */
  protected abstract onMessage(message: unknown): void;

  /** The client half-closed after complete messages. */
  protected abstract onHalfClose(): void;

  /** The call ended without its handler's answer (cancel, deadline, refusal): reads in progress fail. */
  protected onAbort(): void {}

  /** Runs the method's handler on this call (in the call's span when tracing is on); a throw is UNKNOWN, as in grpc-js. */
  protected invoke(callback?: UnaryCallback): void {
    const handler = this.method.handler as unknown as (call: NativeCall, cb?: UnaryCallback) => void;
    try {
      if (this.ctx.traced && this.rec) this.rec.run(() => handler(this, callback));
      else handler(this, callback);
    } catch {
      this.sendStatus({ code: Code.UNKNOWN, details: 'Unknown error' });
    }
  }

  // grpc-js call surface

  /** The request metadata (built on first read), with the verified caller. */
  get metadata(): Metadata {
    let md = this.#metadata;
    if (md === undefined) {
      md = requestMetadata(this.#headers ?? {}, this.caller);
      this.#metadata = md;
      this.#headers = undefined;
    }
    return md;
  }

  getDeadline(): number {
    return this.#deadline;
  }

  getPath(): string {
    return this.method.path;
  }

  getPeer(): string {
    const s = this.stream.session?.socket;
    if (!s?.remoteAddress) return 'unknown';
    return s.remotePort ? `${s.remoteAddress}:${s.remotePort}` : s.remoteAddress;
  }

  getConnectionInfo(): { localAddress?: string; localPort?: number; remoteAddress?: string; remotePort?: number } {
    const s = this.stream.session?.socket;
    return { localAddress: s?.localAddress, localPort: s?.localPort, remoteAddress: s?.remoteAddress, remotePort: s?.remotePort };
  }

  /** Sends the response headers with extra metadata (before the first message). */
  sendMetadata(md: Metadata): void {
    if (this.headersSent || this.done || this.stream.destroyed) return;
    this.headersSent = true;
    this.stream.respond(Object.assign({}, RESPONSE_HEADERS, md.toHttp2Headers()), WAIT_FOR_TRAILERS);
    this.stream.on('wantTrailers', onWantTrailers);
  }

  // protocol

  onData(chunk: Buffer): void {
    if (this.done) return;
    this.#decoder?.push(chunk, this);
  }

  onFrame(compressed: boolean, body: Buffer): void {
    if (this.done) return;
    let bytes = body;
    if (compressed) {
      const b = this.#decompress(body);
      if (b === undefined) return;
      bytes = b;
    }
    let message: unknown;
    try {
      message = this.method.deserialize(bytes);
    } catch {
      this.sendStatus({ code: Code.INTERNAL, details: 'Error deserializing request' });
      return;
    }
    this.rec?.request(message);
    const refused = refusalOf(message, this.method.name);
    if (refused) {
      this.fail(refused);
      return;
    }
    this.onMessage(message);
  }

  onFrameTooLarge(size: number): void {
    this.sendStatus({ code: Code.RESOURCE_EXHAUSTED, details: `Received message larger than max (${size} vs ${this.ctx.maxMessageBytes})` });
  }

  onEnd(): void {
    if (this.done) return;
    // A request stream that ends inside a frame is refused (grpc-js would drop the partial frame).
    if (this.#decoder?.partial) {
      this.fail(truncatedFrameStatus(this.method.name));
      return;
    }
    // The request is complete: a long-lived stream keeps no reading state.
    this.#decoder = undefined;
    this.onHalfClose();
  }

  onClose(): void {
    if (!this.done) {
      this.done = true;
      this.cancelled = true;
      this.#teardown();
      this.rec?.finish(Code.CANCELLED, 'cancelled by the client');
      this.onAbort();
      this.emit('cancelled', 'cancelled');
    }
    this.emit('close');
  }

  onDeadline(): void {
    this.#timer = undefined;
    if (this.done) return;
    this.sendStatus({ code: Code.DEADLINE_EXCEEDED, details: 'Deadline exceeded' });
    // grpc-js cancels the call at its deadline: the handler stops its work.
    this.cancelled = true;
    this.emit('cancelled', 'cancelled');
  }

  /** The trailers to send at 'wantTrailers'. */
  takeTrailers(): OutgoingHttpHeaders | undefined {
    const t = this.#trailers;
    this.#trailers = undefined;
    return t;
  }

  #decompress(body: Buffer): Buffer | undefined {
    const encoding = this.#encoding;
    const max = this.ctx.maxMessageBytes;
    if (encoding === '') {
      this.sendStatus({ code: Code.INTERNAL, details: 'Received a compressed message but grpc-encoding is identity or absent' });
      return undefined;
    }
    if (encoding !== 'gzip' && encoding !== 'deflate') {
      this.sendStatus({ code: Code.UNIMPLEMENTED, details: `Received message compressed with unsupported encoding "${encoding}"` });
      return undefined;
    }
    try {
      const out = (encoding === 'gzip' ? gunzipSync : inflateSync)(body, { maxOutputLength: max + 1 });
      if (out.length <= max) return out;
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_BUFFER_TOO_LARGE') {
        this.sendStatus({ code: Code.INTERNAL, details: 'Failed to decompress message' });
        return undefined;
      }
    }
    this.sendStatus({ code: Code.RESOURCE_EXHAUSTED, details: `Received message that decompresses to a size larger than ${max}` });
    return undefined;
  }

  /** Ends the call with the status of a DomainError (status-map.ts) or of a grpc-js-shaped error. */
  protected fail(err: unknown): void {
    if (err instanceof DomainError) {
      const se = domainErrorToStatus(err);
      this.sendStatus({ code: se.code, details: se.details, metadata: se.metadata });
    } else this.sendStatus(errorToStatus(err));
  }

  /** Keeps the one request message of a unary or server-streaming call; a second one is refused. */
  protected takeSingleRequest(message: unknown): void {
    if (this.#gotSingle) {
      this.#messageCountError('a second');
      return;
    }
    this.#gotSingle = true;
    this.request = message;
  }

  /** At the half-close of a unary or server-streaming call: true when its one message came, else the call is refused. */
  protected singleRequestComplete(): boolean {
    if (!this.#gotSingle) this.#messageCountError('no');
    return this.#gotSingle;
  }

  /** grpc-js's own framing statuses for a unary or server-streaming request, as the grpc-js port rewrites them (framing.ts). */
  #messageCountError(kind: 'no' | 'a second'): void {
    this.sendStatus(rewriteFramingStatus({ code: Code.UNIMPLEMENTED, details: `Received ${kind} request message for server streaming method ${this.method.path}`, metadata: null }));
  }

  /** Sends the response headers (once, before the first message). */
  protected respondHeaders(): void {
    this.headersSent = true;
    const stream = this.stream;
    stream.respond(RESPONSE_HEADERS, WAIT_FOR_TRAILERS);
    stream.on('wantTrailers', onWantTrailers);
    forgetSentHeaders(stream);
  }

  /**
   * Ends the call with `st` (once; nothing is sent once the client left): the trailers after the
   * messages, or a trailers-only response; `last` is a last message (unframed) sent with them.
   */
  protected sendStatus(st: CallStatus, last?: Buffer): void {
    if (this.done) return;
    this.done = true;
    this.#teardown();
    this.rec?.finish(st.code, st.details);
    if (st.code !== Code.OK || last === undefined) this.onAbort();
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    const trailers = statusTrailers(st.code, st.details, st.metadata);
    if (last !== undefined && !this.headersSent) this.respondHeaders();
    if (this.headersSent) {
      this.#trailers = trailers;
      if (last === undefined) stream.end();
      else endWithMessage(stream, last);
    } else respondTrailersOnly(stream, trailers);
    // The rest of a request the call no longer reads is drained (its flow-control window returned).
    if (!stream.readableEnded) stream.resume();
  }

  #teardown(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#decoder = undefined;
    const counted = this.#counted;
    this.#counted = undefined;
    if (counted !== undefined) this.ctx.limiter.leave(counted);
  }

  /** The payload of a response (pre-encoded Buffers pass through), or undefined after ending the call with the grpc-js status. */
  protected payloadOf(value: unknown): Buffer | undefined {
    let payload: Buffer;
    try {
      payload = this.method.serialize(value);
    } catch {
      this.sendStatus({ code: Code.INTERNAL, details: 'Error serializing response' });
      return undefined;
    }
    if (payload.length > this.ctx.maxMessageBytes) {
      this.sendStatus({ code: Code.RESOURCE_EXHAUSTED, details: `Sent message larger than max (${payload.length + 5} vs. ${this.ctx.maxMessageBytes})` });
      return undefined;
    }
    return payload;
  }

  /** The unary and client-streaming callback: the response (and trailing metadata), or the error's status. */
  protected reply(err: unknown, value: unknown, trailer?: Metadata | null): void {
    if (this.done) return;
    if (err) {
      this.sendStatus(errorToStatus(err, trailer));
      return;
    }
    const payload = this.payloadOf(value);
    if (payload === undefined) return;
    this.sendStatus({ code: Code.OK, details: 'OK', metadata: trailer ?? null }, payload);
  }
}
