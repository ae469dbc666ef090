/**
 * One HTTP/2 stream of a connection (connection.ts), with the part of node:http2's
 * ServerHttp2Stream that the gRPC calls use (src/server/native): `respond`, `write` (false above
 * the high-water mark, then 'drain'), `end`, `cork`, `sendTrailers` at 'wantTrailers', `pause` /
 * `resume` of the request data ('data', 'end'), 'close' once the stream is closed or reset, and
 * `destroyed` / `closed` / `readableEnded` / `session`.
 *
 * The request's DATA is delivered as it is parsed ('data' in order, then 'end'); while paused it
 * waits here and its flow-control credit is returned only once delivered, so a paused stream
 * holds at most its window. Responses are queued here and framed by the connection as the peer's
 * windows allow; 'close' is emitted on the next tick, as node does.
 */
import { EventEmitter } from 'node:events';
import type { OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';

/** What a stream needs of its connection. */
export interface StreamOwner {
  readonly socket: Socket;
  /** Writes a HEADERS block for `stream` (END_STREAM when `end`). */
  writeHeaders(stream: H2Stream, headers: OutgoingHttpHeaders, end: boolean): void;
  /** Frames what `stream` has queued, as far as the windows allow. */
  pump(stream: H2Stream): void;
  /** `n` bytes of the stream's request data were delivered: their window credit goes back. */
  credit(stream: H2Stream, n: number): void;
  /** The stream sent END_STREAM. */
  localEnded(stream: H2Stream): void;
}

/** Bytes queued on a stream above which `write` answers false (node's default for streams). */
export const STREAM_HIGH_WATER = 16 * 1024;

function emitClose(stream: H2Stream): void {
  stream.emit('close');
}

function deliverInbox(stream: H2Stream): void {
  stream.flushInbox();
}

export class H2Stream extends EventEmitter {
  // The connection's state of the stream (read and written by connection.ts only).
  /** Send credit the peer gave this stream (may be negative after a SETTINGS change). */
  sendWindow: number;
  /** Receive credit left before the peer must wait for a WINDOW_UPDATE. */
  recvWindow: number;
  /** Delivered bytes whose credit is not yet returned. */
  recvUnacked = 0;
  /** Response data not yet framed. */
  queue: Buffer[] = [];
  queued = 0;
  /** `end()` was called: END_STREAM (or the trailers) follow the queue. */
  ending = false;
  /** respond() asked for trailers ('wantTrailers' once the data is out). */
  wantTrailers = false;
  /** END_STREAM was framed. */
  localDone = false;
  /** END_STREAM was received. */
  remoteDone = false;
  /** In the connection's line for its window or the socket. */
  waiting = false;
  /** Waiting for this stream's own window (a WINDOW_UPDATE or SETTINGS wakes it). */
  windowBlocked = false;
  corked = false;
  needDrain = false;

  /** node: the headers were sent. */
  headersSent = false;
  /** node: the stream is closed (both sides ended, or reset). */
  closed = false;
  /** node: the error code of a reset (0 = none). */
  rstCode = 0;
  /** node: 'end' was emitted. */
  readableEnded = false;
  #paused = false;
  /** Data (and the end, as null) received while paused. */
  #inbox: (Buffer | null)[] | undefined;

  constructor(readonly owner: StreamOwner, readonly id: number, sendWindow: number, recvWindow: number) {
    super();
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
  }

  get destroyed(): boolean {
    return this.closed;
  }

  /** node: the connection (its `socket` names the peer). */
  get session(): StreamOwner {
    return this.owner;
  }

  respond(headers: OutgoingHttpHeaders, options?: { readonly endStream?: boolean; readonly waitForTrailers?: boolean }): void {
    if (this.closed) return;
    if (this.headersSent) throw Object.assign(new Error('Response has already been initiated.'), { code: 'ERR_HTTP2_HEADERS_SENT' });
    this.headersSent = true;
    const end = options?.endStream === true;
    this.wantTrailers = !end && options?.waitForTrailers === true;
    this.owner.writeHeaders(this, headers, end);
    if (end) {
      this.ending = true;
      this.owner.localEnded(this);
    }
  }

  /** Queues response data; false once the queue is over the high-water mark (then 'drain'). */
  write(chunk: Buffer): boolean {
    if (this.closed || this.ending) return false;
    if (chunk.length > 0) {
      this.queue.push(chunk);
      this.queued += chunk.length;
    }
    if (!this.corked) this.owner.pump(this);
    if (this.queued < STREAM_HIGH_WATER) return true;
    this.needDrain = true;
    return false;
  }

  /** Ends the response (after `chunk`): END_STREAM, or 'wantTrailers' when respond asked for them. */
  end(chunk?: Buffer): void {
    if (this.closed || this.ending) return;
    if (chunk !== undefined && chunk.length > 0) {
      this.queue.push(chunk);
      this.queued += chunk.length;
    }
    this.ending = true;
    this.corked = false;
    this.owner.pump(this);
  }

  /** Holds writes until `end` or `uncork` (one DATA frame for a prefix and its message). */
  cork(): void {
    this.corked = true;
  }

  uncork(): void {
    if (!this.corked) return;
    this.corked = false;
    this.owner.pump(this);
  }

  /** The trailers (at 'wantTrailers'): HEADERS with END_STREAM. */
  sendTrailers(headers: OutgoingHttpHeaders): void {
    if (this.closed || this.localDone) return;
    this.wantTrailers = false;
    this.owner.writeHeaders(this, headers, true);
    this.owner.localEnded(this);
  }

  pause(): void {
    this.#paused = true;
  }

  isPaused(): boolean {
    return this.#paused;
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    if (this.#inbox !== undefined) process.nextTick(deliverInbox, this);
  }

  // From the connection.

  /** Request data (`flowLength` counts its padding too). */
  receive(data: Buffer, flowLength: number): void {
    if (this.#paused || this.#inbox !== undefined) {
      // Kept as a copy (a view would hold the whole socket read), and only with bytes: empty DATA
      // costs no window, so keeping it would let a peer grow the inbox without bound.
      if (data.length > 0) (this.#inbox ??= []).push(Buffer.from(data));
      if (flowLength > data.length) this.owner.credit(this, flowLength - data.length);
      return;
    }
    this.owner.credit(this, flowLength);
    if (data.length > 0) this.emit('data', data);
  }

  /** The request's END_STREAM. */
  receiveEnd(): void {
    this.remoteDone = true;
    if (this.#paused || this.#inbox !== undefined) {
      (this.#inbox ??= []).push(null);
      return;
    }
    this.readableEnded = true;
    this.emit('end');
  }

  /** Delivers what waited while paused, until paused again. */
  flushInbox(): void {
    const inbox = this.#inbox;
    while (inbox !== undefined && inbox.length > 0 && !this.#paused && !this.closed) {
      const d = inbox.shift() as Buffer | null;
      if (d === null) {
        this.readableEnded = true;
        this.emit('end');
      } else {
        this.owner.credit(this, d.length);
        if (d.length > 0) this.emit('data', d);
      }
    }
    if (inbox !== undefined && inbox.length === 0) this.#inbox = undefined;
  }

  /** The stream is closed (ended both ways, reset, or its connection gone): 'close' on the next tick. */
  markClosed(code: number): void {
    if (this.closed) return;
    this.closed = true;
    this.rstCode = code;
    this.queue.length = 0;
    this.queued = 0;
    this.#inbox = undefined;
    process.nextTick(emitClose, this);
  }

  /** The queue was framed down to empty after a write answered false. */
  drained(): void {
    this.needDrain = false;
    this.emit('drain');
  }
}
