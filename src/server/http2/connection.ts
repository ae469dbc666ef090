/**
 * The server side of one HTTP/2 connection (RFC 9113) over a TCP or TLS socket, written for a
 * gRPC server: what node:http2 does through nghttp2 and a Node Duplex per stream, done here in one
 * pass over the received bytes, with one socket write per tick for everything the streams answered.
 *
 * Frames and rules:
 * - the client preface, then SETTINGS first; our SETTINGS (max concurrent streams, initial window,
 *   max header list size) and a connection WINDOW_UPDATE up front; SETTINGS and PING answered
 *   with ACK; PRIORITY ignored (as RFC 9113 deprecates it); unknown frame types ignored;
 * - HEADERS (+ CONTINUATION, nothing else in between) open a stream with an odd id above every
 *   earlier one, decoded by HPACK (hpack.ts) whatever happens next so the table stays in sync;
 *   over the stream limit REFUSED_STREAM; a malformed request (uppercase or unknown pseudo-header,
 *   pseudo-header after a field, connection-specific field, NUL / CR / LF in a value, missing
 *   :method / :scheme / :path)
 *   PROTOCOL_ERROR on the stream; a header list over the advertised maximum gets a gRPC
 *   RESOURCE_EXHAUSTED status without a call;
 * - flow control both ways: received DATA (padding included) is charged to the connection and
 *   the stream; the connection's credit goes back on receipt, a stream's as it delivers the data
 *   (a paused stream holds at most its window); response DATA waits for the peer's connection
 *   and stream windows (streams waiting for the connection's are served round-robin) and is cut
 *   to its max frame size; header blocks over it continue in CONTINUATION frames;
 * - client resets of open streams have a budget (rapid reset); past it, ENHANCE_YOUR_CALM;
 * - a response that ends before the request resets the request side with NO_ERROR (RFC 9113
 *   8.1), so the client stops sending;
 * - DATA, WINDOW_UPDATE and RST_STREAM on streams already closed are ignored (DATA still
 *   counted for the connection's window); HEADERS on a closed stream is a connection error
 *   (STREAM_CLOSED), unless this server reset that stream recently (the peer may have sent it
 *   before the RST_STREAM arrived); frames on an idle stream, or a second HEADERS without
 *   END_STREAM, are errors;
 * - a connection error sends GOAWAY with its code and ends the socket; `close()` sends GOAWAY
 *   (NO_ERROR), refuses new streams and ends the socket once the open ones are done;
 * - a peer that keeps us writing (PING / SETTINGS floods into a socket it does not read) is cut
 *   off once MAX_BUFFERED bytes wait in the socket.
 */
import { EventEmitter } from 'node:events';
import type { OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import {
  CANCEL, COMPRESSION_ERROR, DEFAULT_MAX_FRAME, DEFAULT_WINDOW, ENHANCE_YOUR_CALM, FLAG_ACK, FLAG_END_HEADERS, FLAG_END_STREAM, FLAG_PADDED, FLAG_PRIORITY,
  FLOW_CONTROL_ERROR, FRAME_CONTINUATION, FRAME_DATA, FRAME_GOAWAY, FRAME_HEADERS, FRAME_PING, FRAME_PRIORITY, FRAME_PUSH_PROMISE, FRAME_RST_STREAM,
  FRAME_SETTINGS, FRAME_SIZE_ERROR, FRAME_WINDOW_UPDATE, FrameWriter, MAX_WINDOW, NO_ERROR, PREFACE, PROTOCOL_ERROR, REFUSED_STREAM, SETTINGS_ENABLE_PUSH,
  SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_MAX_FRAME_SIZE, SETTINGS_MAX_HEADER_LIST_SIZE, STREAM_CLOSED,
} from './frames.js';
import { encodeHeaders, HpackDecoder, HpackError } from './hpack.js';
import { H2Stream, type StreamOwner } from './stream.js';

/** The request headers of a stream, as node:http2 presents them (names lowercase, repeated fields joined by ", "). */
export type RequestHeaders = Record<string, string | string[] | undefined>;

export interface ConnectionOptions {
  /** SETTINGS_MAX_CONCURRENT_STREAMS: a stream past it is refused. */
  readonly maxConcurrentStreams: number;
  /** Our SETTINGS_INITIAL_WINDOW_SIZE (per stream). */
  readonly streamWindow: number;
  /** Our connection receive window. */
  readonly connectionWindow: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE. */
  readonly maxHeaderListSize: number;
  /** A new stream and its request headers. */
  readonly onStream: (stream: H2Stream, headers: RequestHeaders) => void;
}

/** Bytes waiting in the socket (or framed this tick) above which the streams' data waits. */
const SOCKET_HIGH_WATER = 256 * 1024;
/** Bytes waiting in the socket (control frames a peer made us write without reading) that end the connection. */
const MAX_BUFFERED = 16 * 1024 * 1024;
/** Client resets of streams still in progress: a burst, then a rate per second (rapid reset, CVE-2023-44487). */
const RESET_BURST = 1000;
const RESET_RATE = 33;
/**
 * How many of the streams this server reset are remembered: frames the peer sent on them before
 * it saw the RST_STREAM are ignored (RFC 9113 5.1); a HEADERS frame on any other closed stream is
 * a connection error.
 */
const RESET_MEMORY = 1024;
/** How long an ended connection may take to close before it is destroyed. */
const CLOSE_GRACE_MS = 5_000;
/** Fields never allowed in an HTTP/2 request (RFC 9113 8.2.2). */
const CONNECTION_FIELDS = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);
/** Characters a field value must not hold (RFC 9113 8.2.1): the request is malformed. */
const FORBIDDEN_IN_VALUE = /[\0\r\n]/;
/** Header blocks are cached for frozen header objects (the shared response headers and OK trailers). */
const BLOCKS = new WeakMap<object, Buffer>();
/** The answer to a request whose header list is over the limit (trailers-only RESOURCE_EXHAUSTED). */
const TOO_LARGE_BLOCK = encodeHeaders([':status', '200', 'content-type', 'application/grpc', 'grpc-status', '8', 'grpc-message', 'request header list larger than the server accepts']);

function headerFields(headers: OutgoingHttpHeaders): string[] {
  const fields: string[] = [];
  // Pseudo-headers first (RFC 9113 8.3).
  const status = headers[':status'];
  if (status !== undefined) fields.push(':status', String(status));
  for (const key in headers) {
    if (key === ':status') continue;
    const v = headers[key];
    if (v === undefined) continue;
    const name = key.toLowerCase();
    if (Array.isArray(v)) for (const x of v) fields.push(name, String(x));
    else fields.push(name, String(v));
  }
  return fields;
}

function blockOf(headers: OutgoingHttpHeaders): Buffer {
  if (Object.isFrozen(headers)) {
    let b = BLOCKS.get(headers);
    if (b === undefined) {
      b = encodeHeaders(headerFields(headers));
      BLOCKS.set(headers, b);
    }
    return b;
  }
  return encodeHeaders(headerFields(headers));
}

function hasUpper(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) return true;
  }
  return false;
}

function flush(c: H2Connection): void {
  c.flush();
}

function serve(c: H2Connection): void {
  c.serveWaiting();
}

function destroySocket(socket: Socket): void {
  socket.destroy();
}

export class H2Connection extends EventEmitter implements StreamOwner {
  readonly #options: ConnectionOptions;
  readonly #decoder = new HpackDecoder(4096);
  readonly #fields: string[] = [];
  readonly #out = new FrameWriter();
  #flushScheduled = false;
  /** Received bytes not yet parsed (a partial frame), and how many the next step needs. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #need = PREFACE.length;
  #prefaceDone = false;
  #settingsSeen = false;
  /** Open streams, by increasing id (new ones arrive last). */
  readonly #streams: H2Stream[] = [];
  #lastStreamId = 0;
  /** The last RESET_MEMORY streams this server reset (a ring; 0 = empty slot), from its first reset. */
  #resetIds: Uint32Array | undefined;
  #resetNext = 0;
  /** A header block in CONTINUATION frames: its stream, HEADERS flags and fragments. */
  #blockStream = 0;
  #blockFlags = 0;
  #blockParts: Buffer[] = [];
  #blockBytes = 0;
  // The peer's settings and windows.
  #peerWindow = DEFAULT_WINDOW;
  #peerMaxFrame = DEFAULT_MAX_FRAME;
  #sendWindow = DEFAULT_WINDOW;
  /** Streams with data waiting for the connection window or the socket, in the order they are served. */
  #waiting: H2Stream[] = [];
  /** A serving of #waiting is scheduled (setImmediate, so that I/O runs between rounds). */
  #serveScheduled = false;
  /** Resets of open streams the peer may still send (a token bucket: RESET_BURST, RESET_RATE per second). */
  #resetTokens = RESET_BURST;
  #resetAt = Date.now();
  #socketBlocked = false;
  // Our receive window.
  #recvWindow: number;
  #recvUnacked = 0;
  #goaway = false;
  /** The last stream id the first GOAWAY named. */
  #goawayLast = 0;
  #peerGoaway = false;
  /** The socket was ended: nothing more is written. */
  #ended = false;
  #dead = false;

  constructor(readonly socket: Socket, options: ConnectionOptions) {
    super();
    this.#options = options;
    this.#recvWindow = options.connectionWindow;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#onBytes(chunk));
    socket.on('drain', () => this.#onDrain());
    socket.on('error', () => this.#teardown());
    socket.on('close', () => this.#teardown());
    socket.on('end', () => this.#teardown());
    const settings = Buffer.allocUnsafe(18);
    settings.writeUInt16BE(SETTINGS_MAX_CONCURRENT_STREAMS, 0);
    settings.writeUInt32BE(options.maxConcurrentStreams, 2);
    settings.writeUInt16BE(SETTINGS_INITIAL_WINDOW_SIZE, 6);
    settings.writeUInt32BE(options.streamWindow, 8);
    settings.writeUInt16BE(SETTINGS_MAX_HEADER_LIST_SIZE, 12);
    settings.writeUInt32BE(options.maxHeaderListSize, 14);
    this.#out.head(18, FRAME_SETTINGS, 0, 0);
    this.#out.bytes(settings);
    if (options.connectionWindow > DEFAULT_WINDOW) {
      this.#out.head(4, FRAME_WINDOW_UPDATE, 0, 0);
      this.#out.u32(options.connectionWindow - DEFAULT_WINDOW);
    }
    this.#schedule();
  }

  /** Open streams. */
  get streamCount(): number {
    return this.#streams.length;
  }

  /** Graceful close: GOAWAY, no new streams, the socket ends once the open streams are done. */
  close(): void {
    if (this.#dead) return;
    if (!this.#goaway) this.#sendGoaway(NO_ERROR, '');
    this.#endIfIdle();
  }

  /** Closes now: every open stream is cancelled. */
  destroy(): void {
    this.socket.destroy();
    this.#teardown();
  }

  // Receiving.

  #onBytes(chunk: Buffer): void {
    if (this.#dead) return;
    if (this.#pendingBytes + chunk.length < this.#need) {
      this.#pending.push(chunk);
      this.#pendingBytes += chunk.length;
      return;
    }
    let data = chunk;
    if (this.#pendingBytes > 0) {
      this.#pending.push(chunk);
      data = Buffer.concat(this.#pending, this.#pendingBytes + chunk.length);
      this.#pending = [];
      this.#pendingBytes = 0;
    }
    let at = 0;
    if (!this.#prefaceDone) {
      if (!data.subarray(0, PREFACE.length).equals(PREFACE)) {
        this.destroy();
        return;
      }
      this.#prefaceDone = true;
      at = PREFACE.length;
    }
    const n = data.length;
    while (n - at >= 9) {
      const length = (data[at] as number) << 16 | (data[at + 1] as number) << 8 | (data[at + 2] as number);
      if (length > DEFAULT_MAX_FRAME) {
        this.#connectionError(FRAME_SIZE_ERROR, `frame of ${length} bytes over SETTINGS_MAX_FRAME_SIZE ${DEFAULT_MAX_FRAME}`);
        return;
      }
      if (n - at - 9 < length) {
        this.#need = 9 + length;
        break;
      }
      const type = data[at + 3] as number;
      const flags = data[at + 4] as number;
      const id = data.readUInt32BE(at + 5) & 0x7fffffff;
      const payload = data.subarray(at + 9, at + 9 + length);
      at += 9 + length;
      this.#frame(type, flags, id, payload);
      if (this.#dead) return;
    }
    if (n - at < 9) this.#need = 9;
    if (at < n) {
      this.#pending.push(data.subarray(at));
      this.#pendingBytes = n - at;
    }
  }

  #frame(type: number, flags: number, id: number, p: Buffer): void {
    if (!this.#settingsSeen) {
      if (type !== FRAME_SETTINGS || (flags & FLAG_ACK) !== 0) {
        this.#connectionError(PROTOCOL_ERROR, 'the connection preface must be followed by SETTINGS');
        return;
      }
      this.#settingsSeen = true;
    }
    if (this.#blockStream !== 0 && type !== FRAME_CONTINUATION) {
      this.#connectionError(PROTOCOL_ERROR, 'a header block was interrupted by another frame');
      return;
    }
    switch (type) {
      case FRAME_DATA: this.#onData(flags, id, p); return;
      case FRAME_HEADERS: this.#onHeaders(flags, id, p); return;
      case FRAME_CONTINUATION: this.#onContinuation(flags, id, p); return;
      case FRAME_PRIORITY:
        if (id === 0) this.#connectionError(PROTOCOL_ERROR, 'PRIORITY on stream 0');
        else if (p.length !== 5) {
          // A stream error; an idle or closed stream must not be reset (RFC 9113 5.1).
          const open = this.#find(id);
          if (open !== undefined) this.#resetStream(id, FRAME_SIZE_ERROR, open);
        }
        return;
      case FRAME_RST_STREAM: this.#onReset(id, p); return;
      case FRAME_SETTINGS: this.#onSettings(flags, id, p); return;
      case FRAME_PUSH_PROMISE: this.#connectionError(PROTOCOL_ERROR, 'a client must not send PUSH_PROMISE'); return;
      case FRAME_PING: this.#onPing(flags, id, p); return;
      case FRAME_GOAWAY: this.#onGoaway(id, p); return;
      case FRAME_WINDOW_UPDATE: this.#onWindowUpdate(id, p); return;
      default: return; // unknown frame types are ignored (RFC 9113 5.5)
    }
  }

  #find(id: number): H2Stream | undefined {
    const s = this.#streams;
    for (let i = s.length - 1; i >= 0; i--) {
      const st = s[i] as H2Stream;
      if (st.id === id) return st;
      if (st.id < id) return undefined;
    }
    return undefined;
  }

  #onData(flags: number, id: number, p: Buffer): void {
    if (id === 0) {
      this.#connectionError(PROTOCOL_ERROR, 'DATA on stream 0');
      return;
    }
    const flow = p.length;
    this.#recvWindow -= flow;
    if (this.#recvWindow < 0) {
      this.#connectionError(FLOW_CONTROL_ERROR, 'DATA beyond the connection window');
      return;
    }
    this.#recvUnacked += flow;
    if (this.#recvUnacked >= this.#options.connectionWindow / 2) {
      this.#out.head(4, FRAME_WINDOW_UPDATE, 0, 0);
      this.#out.u32(this.#recvUnacked);
      this.#recvWindow += this.#recvUnacked;
      this.#recvUnacked = 0;
      this.#schedule();
    }
    let data = p;
    if ((flags & FLAG_PADDED) !== 0) {
      const pad = flow > 0 ? (p[0] as number) : 0;
      if (flow === 0 || pad >= flow) {
        this.#connectionError(PROTOCOL_ERROR, 'DATA padding longer than the frame');
        return;
      }
      data = p.subarray(1, flow - pad);
    }
    const stream = this.#find(id);
    if (stream === undefined) {
      if (id > this.#lastStreamId) this.#connectionError(PROTOCOL_ERROR, `DATA on idle stream ${id}`);
      return; // a stream closed shortly before
    }
    if (stream.remoteDone) {
      this.#resetStream(id, STREAM_CLOSED, stream);
      return;
    }
    stream.recvWindow -= flow;
    if (stream.recvWindow < 0) {
      this.#resetStream(id, FLOW_CONTROL_ERROR, stream);
      return;
    }
    stream.receive(data, flow);
    if ((flags & FLAG_END_STREAM) !== 0 && !stream.closed) this.#remoteEnded(stream);
  }

  #onHeaders(flags: number, id: number, p: Buffer): void {
    if (id === 0) {
      this.#connectionError(PROTOCOL_ERROR, 'HEADERS on stream 0');
      return;
    }
    let start = 0;
    let end = p.length;
    if ((flags & FLAG_PADDED) !== 0) {
      const pad = end > 0 ? (p[0] as number) : 0;
      start = 1;
      end -= pad;
    }
    if ((flags & FLAG_PRIORITY) !== 0) start += 5;
    if (end < start) {
      this.#connectionError(PROTOCOL_ERROR, 'HEADERS padding or priority longer than the frame');
      return;
    }
    const fragment = p.subarray(start, end);
    if ((flags & FLAG_END_HEADERS) !== 0) {
      this.#headerBlock(id, flags, fragment);
      return;
    }
    this.#blockStream = id;
    this.#blockFlags = flags;
    this.#blockParts = [fragment];
    this.#blockBytes = fragment.length;
  }

  #onContinuation(flags: number, id: number, p: Buffer): void {
    if (this.#blockStream === 0 || id !== this.#blockStream) {
      this.#connectionError(PROTOCOL_ERROR, 'CONTINUATION without a header block in progress on its stream');
      return;
    }
    this.#blockParts.push(p);
    this.#blockBytes += p.length;
    // A block this much larger than any header list we accept is a CONTINUATION flood: it is cut off before it is joined.
    if (this.#blockBytes > 2 * this.#options.maxHeaderListSize + DEFAULT_MAX_FRAME) {
      this.#connectionError(ENHANCE_YOUR_CALM, 'header block too large');
      return;
    }
    if ((flags & FLAG_END_HEADERS) === 0) return;
    const block = Buffer.concat(this.#blockParts, this.#blockBytes);
    const blockFlags = this.#blockFlags;
    this.#blockStream = 0;
    this.#blockParts = [];
    this.#blockBytes = 0;
    this.#headerBlock(id, blockFlags, block);
  }

  #headerBlock(id: number, flags: number, block: Buffer): void {
    const fields = this.#fields;
    let size: number;
    try {
      size = this.#decoder.decode(block, fields, this.#options.maxHeaderListSize);
    } catch (e) {
      if (!(e instanceof HpackError)) throw e;
      this.#connectionError(COMPRESSION_ERROR, e.message);
      return;
    }
    const endStream = (flags & FLAG_END_STREAM) !== 0;
    const existing = this.#find(id);
    if (existing !== undefined) {
      // Trailers of the request: they must end it.
      if (existing.remoteDone) this.#resetStream(id, STREAM_CLOSED, existing);
      else if (!endStream) this.#resetStream(id, PROTOCOL_ERROR, existing);
      else this.#remoteEnded(existing);
      return;
    }
    if ((id & 1) === 0) {
      this.#connectionError(PROTOCOL_ERROR, `stream ${id}: client streams have odd ids`);
      return;
    }
    if (id <= this.#lastStreamId) {
      // Its block was decoded (the HPACK table stays in step). A stream this server reset may still
      // see frames the peer sent before the RST_STREAM reached it; any other stream at or below the
      // highest id is closed, normally (RFC 9113 5.1: STREAM_CLOSED) or by being skipped (5.1.1,
      // whose code is PROTOCOL_ERROR; the two are not told apart here: one connection error).
      if (this.#resetIds?.includes(id) !== true) this.#connectionError(STREAM_CLOSED, `HEADERS on closed stream ${id}: a new request needs a stream id above ${this.#lastStreamId}`);
      return;
    }
    this.#lastStreamId = id;
    if (this.#goaway || this.#streams.length >= this.#options.maxConcurrentStreams) {
      this.#resetStream(id, REFUSED_STREAM);
      return;
    }
    if (size > this.#options.maxHeaderListSize) {
      this.#writeBlock(id, TOO_LARGE_BLOCK, true);
      if (!endStream) this.#resetStream(id, NO_ERROR);
      return;
    }
    const headers = this.#requestHeaders(fields);
    if (headers === undefined) {
      this.#resetStream(id, PROTOCOL_ERROR);
      return;
    }
    const stream = new H2Stream(this, id, this.#peerWindow, this.#options.streamWindow);
    this.#streams.push(stream);
    // A request complete in its HEADERS is half-closed already, for a response sent inside onStream too.
    if (endStream) stream.remoteDone = true;
    this.#options.onStream(stream, headers);
    if (endStream) this.#remoteEnded(stream);
  }

  /** The fields as node:http2's headers object, or undefined for a malformed request. */
  #requestHeaders(fields: string[]): RequestHeaders | undefined {
    const h: RequestHeaders = Object.create(null) as RequestHeaders;
    let regular = false;
    for (let i = 0; i < fields.length; i += 2) {
      const name = fields[i] as string;
      const value = fields[i + 1] as string;
      if (name.length === 0 || hasUpper(name)) return undefined;
      if (name.charCodeAt(0) === 0x3a) {
        if (regular || (name !== ':method' && name !== ':path' && name !== ':scheme' && name !== ':authority') || h[name] !== undefined) return undefined;
      } else {
        regular = true;
        if (CONNECTION_FIELDS.has(name) || (name === 'te' && value !== 'trailers')) return undefined;
      }
      if (value.length > 0 && FORBIDDEN_IN_VALUE.test(value)) return undefined;
      const prev = h[name];
      if (prev === undefined) h[name] = name === 'set-cookie' ? [value] : value;
      else if (Array.isArray(prev)) prev.push(value);
      else h[name] = `${prev}, ${value}`;
    }
    if (h[':method'] === undefined || h[':scheme'] === undefined || !h[':path']) return undefined;
    return h;
  }

  #onReset(id: number, p: Buffer): void {
    if (id === 0) {
      this.#connectionError(PROTOCOL_ERROR, 'RST_STREAM on stream 0');
      return;
    }
    if (p.length !== 4) {
      this.#connectionError(FRAME_SIZE_ERROR, 'RST_STREAM payload must be 4 bytes');
      return;
    }
    if (id > this.#lastStreamId) {
      this.#connectionError(PROTOCOL_ERROR, `RST_STREAM on idle stream ${id}`);
      return;
    }
    const stream = this.#find(id);
    if (stream === undefined) return;
    const now = Date.now();
    this.#resetTokens = Math.min(RESET_BURST, this.#resetTokens + ((now - this.#resetAt) * RESET_RATE) / 1000);
    this.#resetAt = now;
    if (--this.#resetTokens < 0) {
      this.#connectionError(ENHANCE_YOUR_CALM, 'too many streams reset by the client');
      return;
    }
    this.#close(stream, p.readUInt32BE(0) || CANCEL);
  }

  #onSettings(flags: number, id: number, p: Buffer): void {
    if (id !== 0) {
      this.#connectionError(PROTOCOL_ERROR, 'SETTINGS on a stream');
      return;
    }
    if ((flags & FLAG_ACK) !== 0) {
      if (p.length !== 0) this.#connectionError(FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      return;
    }
    if (p.length % 6 !== 0) {
      this.#connectionError(FRAME_SIZE_ERROR, 'SETTINGS payload not a multiple of 6 bytes');
      return;
    }
    // HEADER_TABLE_SIZE, MAX_CONCURRENT_STREAMS and MAX_HEADER_LIST_SIZE need nothing: our encoder
    // uses no dynamic table, we push nothing, and our responses' header lists are small.
    // Only the frame's last INITIAL_WINDOW_SIZE counts: applied once (a frame of many costs one pass over the streams).
    let window = -1;
    for (let at = 0; at < p.length; at += 6) {
      const key = p.readUInt16BE(at);
      const value = p.readUInt32BE(at + 2);
      if (key === SETTINGS_INITIAL_WINDOW_SIZE) {
        if (value > MAX_WINDOW) {
          this.#connectionError(FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1');
          return;
        }
        window = value;
      } else if (key === SETTINGS_MAX_FRAME_SIZE) {
        if (value < DEFAULT_MAX_FRAME || value > 0xffffff) {
          this.#connectionError(PROTOCOL_ERROR, 'SETTINGS_MAX_FRAME_SIZE out of range');
          return;
        }
        this.#peerMaxFrame = value;
      } else if (key === SETTINGS_ENABLE_PUSH) {
        if (value > 1) {
          this.#connectionError(PROTOCOL_ERROR, 'SETTINGS_ENABLE_PUSH must be 0 or 1');
          return;
        }
      }
    }
    if (window >= 0 && window !== this.#peerWindow) {
      const delta = window - this.#peerWindow;
      this.#peerWindow = window;
      for (const st of this.#streams) {
        st.sendWindow += delta;
        if (st.sendWindow > MAX_WINDOW) {
          this.#connectionError(FLOW_CONTROL_ERROR, 'a stream window above 2^31-1');
          return;
        }
      }
      if (delta > 0) for (const st of this.#streams) this.#windowOpened(st);
    }
    this.#out.head(0, FRAME_SETTINGS, FLAG_ACK, 0);
    this.#schedule();
  }

  #onPing(flags: number, id: number, p: Buffer): void {
    if (id !== 0) {
      this.#connectionError(PROTOCOL_ERROR, 'PING on a stream');
      return;
    }
    if (p.length !== 8) {
      this.#connectionError(FRAME_SIZE_ERROR, 'PING payload must be 8 bytes');
      return;
    }
    if ((flags & FLAG_ACK) !== 0) return;
    this.#out.head(8, FRAME_PING, FLAG_ACK, 0);
    this.#out.bytes(p);
    this.#schedule();
  }

  #onGoaway(id: number, p: Buffer): void {
    if (id !== 0) {
      this.#connectionError(PROTOCOL_ERROR, 'GOAWAY on a stream');
      return;
    }
    if (p.length < 8) {
      this.#connectionError(FRAME_SIZE_ERROR, 'GOAWAY payload shorter than 8 bytes');
      return;
    }
    this.#peerGoaway = true;
    this.#endIfIdle();
  }

  #onWindowUpdate(id: number, p: Buffer): void {
    if (p.length !== 4) {
      this.#connectionError(FRAME_SIZE_ERROR, 'WINDOW_UPDATE payload must be 4 bytes');
      return;
    }
    const inc = p.readUInt32BE(0) & 0x7fffffff;
    if (id === 0) {
      if (inc === 0) {
        this.#connectionError(PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
        return;
      }
      this.#sendWindow += inc;
      if (this.#sendWindow > MAX_WINDOW) {
        this.#connectionError(FLOW_CONTROL_ERROR, 'connection window above 2^31-1');
        return;
      }
      this.serveWaiting();
      return;
    }
    if (id > this.#lastStreamId) {
      this.#connectionError(PROTOCOL_ERROR, `WINDOW_UPDATE on idle stream ${id}`);
      return;
    }
    const stream = this.#find(id);
    if (stream === undefined) return;
    if (inc === 0) {
      this.#resetStream(id, PROTOCOL_ERROR, stream);
      return;
    }
    stream.sendWindow += inc;
    if (stream.sendWindow > MAX_WINDOW) {
      this.#resetStream(id, FLOW_CONTROL_ERROR, stream);
      return;
    }
    this.#windowOpened(stream);
  }

  /** The stream's own window grew: a stream that waited for it goes on (only it). */
  #windowOpened(stream: H2Stream): void {
    if (!stream.windowBlocked || stream.sendWindow <= 0) return;
    stream.windowBlocked = false;
    this.pump(stream);
  }

  #remoteEnded(stream: H2Stream): void {
    stream.receiveEnd();
    if (stream.localDone) this.#close(stream, 0);
  }

  // Sending (StreamOwner).

  writeHeaders(stream: H2Stream, headers: OutgoingHttpHeaders, end: boolean): void {
    this.#writeBlock(stream.id, blockOf(headers), end);
  }

  #writeBlock(id: number, block: Buffer, end: boolean): void {
    const out = this.#out;
    const max = this.#peerMaxFrame;
    const endFlag = end ? FLAG_END_STREAM : 0;
    if (block.length <= max) {
      out.head(block.length, FRAME_HEADERS, endFlag | FLAG_END_HEADERS, id);
      out.bytes(block);
    } else {
      for (let at = 0; at < block.length; at += max) {
        const part = block.subarray(at, Math.min(block.length, at + max));
        const last = at + max >= block.length ? FLAG_END_HEADERS : 0;
        out.head(part.length, at === 0 ? FRAME_HEADERS : FRAME_CONTINUATION, (at === 0 ? endFlag : 0) | last, id);
        out.bytes(part);
      }
    }
    this.#schedule();
  }

  pump(stream: H2Stream): void {
    this.#pumpFrames(stream, Infinity);
  }

  /**
   * Frames up to `limit` DATA frames of the stream's queue, as the windows and the socket allow,
   * then its end (END_STREAM, or 'wantTrailers'). True when it stopped at the limit with more to send.
   */
  #pumpFrames(stream: H2Stream, limit: number): boolean {
    if (stream.closed || stream.localDone) return false;
    const out = this.#out;
    let frames = 0;
    while (stream.queued > 0) {
      if (frames === limit) return true;
      // The connection window, the socket or this tick's output is full: wait in line.
      if (this.#sendWindow <= 0 || this.#socketBlocked || out.size > SOCKET_HIGH_WATER) {
        this.#wait(stream);
        return false;
      }
      if (stream.sendWindow <= 0) {
        stream.windowBlocked = true;
        return false;
      }
      const n = Math.min(stream.queued, this.#peerMaxFrame, this.#sendWindow, stream.sendWindow);
      const last = n === stream.queued && stream.ending && !stream.wantTrailers;
      out.head(n, FRAME_DATA, last ? FLAG_END_STREAM : 0, stream.id);
      let left = n;
      const q = stream.queue;
      while (left > 0) {
        const b = q[0] as Buffer;
        if (b.length <= left) {
          q.shift();
          out.bytes(b);
          left -= b.length;
        } else {
          out.bytes(b.subarray(0, left));
          q[0] = b.subarray(left);
          left = 0;
        }
      }
      stream.queued -= n;
      this.#sendWindow -= n;
      stream.sendWindow -= n;
      frames++;
      this.#schedule();
      if (last) {
        this.localEnded(stream);
        return false;
      }
    }
    if (stream.needDrain) stream.drained();
    if (!stream.ending || stream.closed || stream.localDone) return false;
    if (stream.wantTrailers) stream.emit('wantTrailers');
    else {
      out.head(0, FRAME_DATA, FLAG_END_STREAM, stream.id);
      this.#schedule();
      this.localEnded(stream);
    }
    return false;
  }

  #wait(stream: H2Stream): void {
    if (stream.waiting) return;
    stream.waiting = true;
    this.#waiting.push(stream);
  }

  /**
   * The connection window or the socket came back: the waiting streams go on round-robin, one
   * DATA frame each per round, so one large response cannot starve the others; streams not
   * reached before the window closes again are served first next time.
   */
  serveWaiting(): void {
    this.#serveScheduled = false;
    while (this.#waiting.length > 0) {
      const round = this.#waiting;
      this.#waiting = [];
      const again: H2Stream[] = [];
      let i = 0;
      for (; i < round.length; i++) {
        if (this.#sendWindow <= 0 || this.#socketBlocked || this.#out.size > SOCKET_HIGH_WATER) break;
        const st = round[i] as H2Stream;
        st.waiting = false;
        if (this.#pumpFrames(st, 1)) again.push(st);
      }
      // Not reached: first in line; then whoever blocked in this round; then those served.
      if (i < round.length) this.#waiting = round.slice(i).concat(this.#waiting);
      for (const st of again) this.#wait(st);
      if (i < round.length || again.length === 0) return;
    }
  }

  credit(stream: H2Stream, n: number): void {
    if (stream.remoteDone || n === 0) return;
    stream.recvUnacked += n;
    if (stream.recvUnacked >= this.#options.streamWindow / 2) {
      this.#out.head(4, FRAME_WINDOW_UPDATE, 0, stream.id);
      this.#out.u32(stream.recvUnacked);
      stream.recvWindow += stream.recvUnacked;
      stream.recvUnacked = 0;
      this.#schedule();
    }
  }

  localEnded(stream: H2Stream): void {
    stream.localDone = true;
    if (stream.remoteDone) this.#close(stream, 0);
    else this.#resetStream(stream.id, NO_ERROR, stream);
  }

  /** RST_STREAM, and the stream (when open) closed. */
  #resetStream(id: number, code: number, stream?: H2Stream): void {
    this.#out.head(4, FRAME_RST_STREAM, 0, id);
    this.#out.u32(code);
    (this.#resetIds ??= new Uint32Array(RESET_MEMORY))[this.#resetNext] = id;
    this.#resetNext = (this.#resetNext + 1) % RESET_MEMORY;
    this.#schedule();
    if (stream !== undefined) this.#close(stream, code);
  }

  #close(stream: H2Stream, code: number): void {
    if (stream.closed) return;
    const s = this.#streams;
    const i = s.lastIndexOf(stream);
    if (i >= 0) s.splice(i, 1);
    stream.markClosed(code);
    if (this.#goaway || this.#peerGoaway) this.#endIfIdle();
  }

  #schedule(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    process.nextTick(flush, this);
  }

  /** Writes what the tick framed, in one socket write. */
  flush(): void {
    this.#flushScheduled = false;
    if (this.#dead || this.#ended) return;
    const chunks = this.#out.take();
    const socket = this.socket;
    if (chunks.length === 1) socket.write(chunks[0] as Buffer);
    else if (chunks.length > 1) {
      socket.cork();
      for (const c of chunks) socket.write(c);
      socket.uncork();
    }
    const buffered = socket.writableLength;
    if (buffered > MAX_BUFFERED) {
      this.destroy();
      return;
    }
    if (buffered > SOCKET_HIGH_WATER) this.#socketBlocked = true;
    else this.#scheduleServe();
  }

  #scheduleServe(): void {
    if (this.#serveScheduled || this.#waiting.length === 0) return;
    this.#serveScheduled = true;
    setImmediate(serve, this);
  }

  #onDrain(): void {
    if (!this.#socketBlocked) return;
    this.#socketBlocked = false;
    this.serveWaiting();
  }

  // Ending.

  #sendGoaway(code: number, debug: string): void {
    // A later GOAWAY must not name a higher stream than an earlier one (RFC 9113 6.8): streams
    // refused after the first were not processed.
    const last = this.#goaway ? Math.min(this.#goawayLast, this.#lastStreamId) : this.#lastStreamId;
    this.#goaway = true;
    this.#goawayLast = last;
    const text = Buffer.from(debug, 'utf8');
    this.#out.head(8 + text.length, FRAME_GOAWAY, 0, 0);
    this.#out.u32(last);
    this.#out.u32(code);
    if (text.length > 0) this.#out.bytes(text);
    this.#schedule();
  }

  #endIfIdle(): void {
    if (this.#dead || this.#streams.length > 0) return;
    this.#endSocket();
  }

  #endSocket(): void {
    if (this.#ended) return;
    this.#ended = true;
    // What is framed goes out; nothing more is served.
    for (const c of this.#out.take()) this.socket.write(c);
    this.socket.end();
    setTimeout(destroySocket, CLOSE_GRACE_MS, this.socket).unref();
  }

  #connectionError(code: number, message: string): void {
    if (this.#dead) return;
    this.#sendGoaway(code, message);
    this.#endSocket();
    this.#teardown();
  }

  /** The connection is gone: every open stream closes (cancelled), nothing more is read or written. */
  #teardown(): void {
    if (this.#dead) return;
    this.#dead = true;
    const open = this.#streams.splice(0);
    for (const s of open) s.markClosed(CANCEL);
    this.#waiting = [];
    this.emit('close');
  }
}
