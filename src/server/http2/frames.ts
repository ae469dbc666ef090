/**
 * HTTP/2 wire constants (RFC 9113) and the output buffer of one connection: frames are written
 * into a slab (headers and small payloads copied, large payloads kept by reference) and handed to
 * the socket once per tick as one write, so the responses to a burst of requests leave in one
 * syscall.
 */

export const FRAME_DATA = 0x0;
export const FRAME_HEADERS = 0x1;
export const FRAME_PRIORITY = 0x2;
export const FRAME_RST_STREAM = 0x3;
export const FRAME_SETTINGS = 0x4;
export const FRAME_PUSH_PROMISE = 0x5;
export const FRAME_PING = 0x6;
export const FRAME_GOAWAY = 0x7;
export const FRAME_WINDOW_UPDATE = 0x8;
export const FRAME_CONTINUATION = 0x9;

export const FLAG_END_STREAM = 0x1;
export const FLAG_ACK = 0x1;
export const FLAG_END_HEADERS = 0x4;
export const FLAG_PADDED = 0x8;
export const FLAG_PRIORITY = 0x20;

/** Error codes (RFC 9113 section 7). */
export const NO_ERROR = 0x0;
export const PROTOCOL_ERROR = 0x1;
export const FLOW_CONTROL_ERROR = 0x3;
export const STREAM_CLOSED = 0x5;
export const FRAME_SIZE_ERROR = 0x6;
export const REFUSED_STREAM = 0x7;
export const CANCEL = 0x8;
export const COMPRESSION_ERROR = 0x9;
export const ENHANCE_YOUR_CALM = 0xb;

/** Settings identifiers. */
export const SETTINGS_ENABLE_PUSH = 0x2;
export const SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
export const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
export const SETTINGS_MAX_FRAME_SIZE = 0x5;
export const SETTINGS_MAX_HEADER_LIST_SIZE = 0x6;

/** The default (and our) SETTINGS_MAX_FRAME_SIZE. */
export const DEFAULT_MAX_FRAME = 16_384;
/** The initial window of every connection and stream before SETTINGS / WINDOW_UPDATE. */
export const DEFAULT_WINDOW = 65_535;
export const MAX_WINDOW = 0x7fffffff;

/** The client connection preface. */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

const SLAB = 64 * 1024;
/** Payloads up to this size are copied into the slab; larger ones are written by reference. */
const COPY_MAX = 2048;

/** Frames waiting for the next socket write. */
export class FrameWriter {
  #slab = Buffer.allocUnsafe(SLAB);
  /** Start of the bytes not yet taken, and the end of the bytes written. */
  #start = 0;
  #pos = 0;
  #chunks: Buffer[] = [];
  #bytes = 0;

  /** Bytes written and not yet taken. */
  get size(): number {
    return this.#bytes + (this.#pos - this.#start);
  }

  #room(n: number): void {
    if (SLAB - this.#pos >= n) return;
    this.#cut();
    this.#slab = Buffer.allocUnsafe(Math.max(SLAB, n));
    this.#start = 0;
    this.#pos = 0;
  }

  #cut(): void {
    if (this.#pos > this.#start) {
      const b = this.#slab.subarray(this.#start, this.#pos);
      this.#chunks.push(b);
      this.#bytes += b.length;
      this.#start = this.#pos;
    }
  }

  /** A frame header: the payload follows with `bytes` / `copy`. */
  head(length: number, type: number, flags: number, stream: number): void {
    this.#room(9);
    const s = this.#slab;
    let p = this.#pos;
    s[p++] = length >>> 16;
    s[p++] = (length >>> 8) & 0xff;
    s[p++] = length & 0xff;
    s[p++] = type;
    s[p++] = flags;
    s.writeUInt32BE(stream, p);
    this.#pos = p + 4;
  }

  /** A 32-bit big-endian payload word. */
  u32(value: number): void {
    this.#room(4);
    this.#slab.writeUInt32BE(value >>> 0, this.#pos);
    this.#pos += 4;
  }

  /** Payload bytes: small ones copied, large ones kept (the caller must not change them). */
  bytes(b: Buffer): void {
    const n = b.length;
    if (n <= COPY_MAX) {
      this.#room(n);
      b.copy(this.#slab, this.#pos);
      this.#pos += n;
      return;
    }
    this.#cut();
    this.#chunks.push(b);
    this.#bytes += n;
  }

  /** Everything written since the last take, in order. */
  take(): Buffer[] {
    this.#cut();
    const out = this.#chunks;
    this.#chunks = [];
    this.#bytes = 0;
    if (SLAB - this.#pos < 1024) {
      this.#slab = Buffer.allocUnsafe(SLAB);
      this.#start = 0;
      this.#pos = 0;
    }
    return out;
  }
}
