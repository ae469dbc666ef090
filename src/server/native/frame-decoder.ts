/**
 * gRPC message framing of a request stream: each message is a 5-byte prefix (a compressed flag,
 * then the length as 4 bytes big-endian) and the message bytes, in DATA chunks cut anywhere
 * (1-byte chunks included). A message inside one chunk is handed on as a view of it (no copy);
 * one spread over chunks is collected and joined once complete, so a client that announces a
 * large message and sends little holds only what it sent. The announced length is checked
 * against the limit before any of the message is kept.
 */

/** What the decoder hands its messages to (the call: no closure per call). */
export interface FrameSink {
  /** A complete message; `compressed` is the prefix's flag. */
  onFrame(compressed: boolean, body: Buffer): void;
  /** A prefix announced `size` bytes, more than the limit; the decoder stops. */
  onFrameTooLarge(size: number): void;
}

const EMPTY = Buffer.alloc(0);

/** The frame parser of one request stream. */
export class FrameDecoder {
  /** Bytes of the prefix seen so far (0-5); 5 = reading the body. */
  #headLen = 0;
  #flag = 0;
  #size = 0;
  /** The prefix bytes of a prefix split across chunks. */
  #head: Buffer | undefined;
  /** Body parts of a message split across chunks. */
  #parts: Buffer[] | undefined;
  #have = 0;
  #failed = false;

  constructor(readonly maxMessageBytes: number) {}

  /** Whether the stream so far ended inside a frame (prefix or body). */
  get partial(): boolean {
    return this.#headLen !== 0;
  }

  /** Feeds one DATA chunk; complete messages go to `sink` in order. */
  push(chunk: Buffer, sink: FrameSink): void {
    if (this.#failed) return;
    let at = 0;
    const n = chunk.length;
    while (at < n) {
      if (this.#headLen === 0 && n - at >= 5) {
        // Fast path: the whole prefix in this chunk.
        this.#flag = chunk[at] as number;
        this.#size = chunk.readUInt32BE(at + 1);
        at += 5;
        this.#headLen = 5;
        if (!this.#checkSize(sink)) return;
      } else if (this.#headLen < 5) {
        const head = (this.#head ??= Buffer.allocUnsafe(5));
        while (this.#headLen < 5 && at < n) head[this.#headLen++] = chunk[at++] as number;
        if (this.#headLen < 5) return;
        this.#flag = head[0] as number;
        this.#size = head.readUInt32BE(1);
        if (!this.#checkSize(sink)) return;
      }
      // Reading the body: #size bytes, #have of them kept in #parts.
      const need = this.#size - this.#have;
      const take = Math.min(need, n - at);
      if (this.#parts === undefined && take === need) {
        const body = need === 0 ? EMPTY : chunk.subarray(at, at + need);
        at += need;
        this.#headLen = 0;
        sink.onFrame(this.#flag !== 0, body);
        continue;
      }
      (this.#parts ??= []).push(chunk.subarray(at, at + take));
      this.#have += take;
      at += take;
      if (this.#have === this.#size) {
        const body = Buffer.concat(this.#parts, this.#size);
        this.#parts = undefined;
        this.#have = 0;
        this.#headLen = 0;
        sink.onFrame(this.#flag !== 0, body);
      }
    }
  }

  #checkSize(sink: FrameSink): boolean {
    if (this.#size <= this.maxMessageBytes) return true;
    this.#failed = true;
    sink.onFrameTooLarge(this.#size);
    return false;
  }
}
