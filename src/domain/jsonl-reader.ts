/**
 * Streaming reader of the reference JSONL session format (dsh-semantics 5.2). Lines are fed one
 * at a time, so importing a file of a million events never holds the whole file: the caller
 * splits the byte stream into lines (see {@link JsonlLineSplitter}) and passes each decoded event
 * batch on to the engine.
 *
 * The reader checks the *storage* format only: the header (1.6, version first), that every line is
 * a JSON object, and the exact shape of packed chunk rows, which it unpacks. Event envelopes and
 * every acceptance rule are the engine's job ('import' mode), so events come out as candidates.
 */
import { DomainError } from './errors.js';
import { jsonSyntaxProblem } from './json.js';
import type { CandidateEvent, SessionHeader } from './event.js';
import { isChunkRowType, JSONL_INVALID, unpackChunkRow } from './jsonl-chunk-rows.js';
import { HEADER_LINE_TYPE, parseHeaderLine } from './jsonl-header.js';

export { JSONL_INVALID } from './jsonl-chunk-rows.js';

/** Reason: the file is compressed (zstd-framed `session.jsonl.zstd`), which this build does not read. */
export const JSONL_COMPRESSED_UNSUPPORTED = 'JSONL_COMPRESSED_UNSUPPORTED';

/** The zstd frame magic number, as it appears on disk (little-endian 0xFD2FB528). */
export const ZSTD_MAGIC: readonly number[] = [0x28, 0xb5, 0x2f, 0xfd];

const COMPRESSED_MESSAGE =
  'the session file is zstd-compressed (session.jsonl.zstd); this build reads only uncompressed JSONL: ' +
  'decompress it first (e.g. `zstd -d session.jsonl.zstd -o session.jsonl`) or export it from the reference ' +
  "with compression: 'none'";

function compressedError(): DomainError {
  return new DomainError(JSONL_COMPRESSED_UNSUPPORTED, COMPRESSED_MESSAGE, { compression: 'zstd' });
}

/** True when `prefix` (the first bytes of a file) starts with a zstd frame. */
export function isZstdFramed(prefix: Uint8Array): boolean {
  return prefix.length >= 4 && ZSTD_MAGIC.every((byte, i) => prefix[i] === byte);
}

/**
 * Refuses zstd-framed input from its first bytes; call it on the first chunk of an upload or file.
 *
 * @throws DomainError `JSONL_COMPRESSED_UNSUPPORTED`
 */
export function assertUncompressed(prefix: Uint8Array): void {
  if (isZstdFramed(prefix)) throw compressedError();
}

/**
 * The zstd magic as it looks after the bytes were decoded as text: UTF-8 turns 0xB5 and 0xFD into
 * U+FFFD, latin1 keeps them as U+00B5 / U+00FD.
 */
function looksZstdText(line: string): boolean {
  return /^\u0028[\u00b5\ufffd]\u002f[\u00fd\ufffd]/.test(line);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Options of a {@link JsonlDecoder}. */
export interface JsonlDecoderOptions {
  /** When given, the header's `id` must equal it. */
  readonly expectedId?: string;
}

/**
 * Decodes a JSONL session file line by line. The first non-blank line must be the header; every
 * later line yields the events it stands for (one, or the members of a packed chunk row).
 * Blank lines (such as the empty string after the final newline) are skipped.
 *
 * @example
 * const decoder = new JsonlDecoder();
 * for (const line of lines) for (const event of decoder.push(line)) batch.push(event);
 * const header = decoder.finish();
 */
export class JsonlDecoder {
  #header: SessionHeader | undefined;
  #lineNumber = 0;
  readonly #expectedId: string | undefined;

  constructor(options: JsonlDecoderOptions = {}) {
    this.#expectedId = options.expectedId;
  }

  /** The validated header, once line 1 has been read. */
  get header(): SessionHeader | undefined {
    return this.#header;
  }

  /** Number of lines pushed so far (the 1-based number of the last line). */
  get lineNumber(): number {
    return this.#lineNumber;
  }

  /**
   * Feeds the next line (without its line terminator; a trailing `\r` is tolerated).
   *
   * @returns the candidate events this line stands for: none for the header or a blank line,
   *   one for an event line, the unpacked members for a packed chunk row.
   * @throws DomainError `JSONL_COMPRESSED_UNSUPPORTED`, `FORMAT_VERSION_UNSUPPORTED` or
   *   `HEADER_INVALID` on the header line, `JSONL_INVALID` (with `metadata.line`) on any other
   *   malformed line.
   */
  push(line: string): CandidateEvent[] {
    this.#lineNumber++;
    const lineNumber = this.#lineNumber;
    if (this.#header === undefined) {
      if (looksZstdText(line)) throw compressedError();
      if (line.trim() === '') {
        throw new DomainError(JSONL_INVALID, `line ${lineNumber}: expected the session header, found a blank line`, {
          line: String(lineNumber),
        });
      }
      this.#header = parseHeaderLine(line, this.#expectedId);
      return [];
    }
    if (line.trim() === '') return [];
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch (err) {
      throw new DomainError(JSONL_INVALID, `line ${lineNumber}: not valid JSON (${jsonSyntaxProblem(err)})`, {
        line: String(lineNumber),
      });
    }
    if (!isPlainObject(parsed)) {
      throw new DomainError(JSONL_INVALID, `line ${lineNumber}: a session record must be a JSON object`, {
        line: String(lineNumber),
      });
    }
    const type = parsed['type'];
    if (isChunkRowType(type)) return unpackChunkRow(parsed, lineNumber) as unknown as CandidateEvent[];
    if (type === HEADER_LINE_TYPE) {
      throw new DomainError(JSONL_INVALID, `line ${lineNumber}: a second session header; the header must be line 1 only`, {
        line: String(lineNumber),
      });
    }
    return [parsed as CandidateEvent];
  }

  /**
   * Ends the input and returns the header.
   *
   * @param uncommittedTailBytes - size of the uncommitted tail the line splitter left out (see
   *   jsonl-committed-lines.ts), to say why a header is missing
   * @throws DomainError `JSONL_INVALID` if no header was read (empty input, or a header line
   *   without its newline).
   */
  finish(uncommittedTailBytes = 0): SessionHeader {
    if (this.#header === undefined && uncommittedTailBytes > 0) {
      throw new DomainError(
        JSONL_INVALID,
        `the session header line is not terminated by a newline, so nothing of the file is committed (an uncommitted tail of ${uncommittedTailBytes} bytes); a writer that crashed before its first newline leaves no session`,
        { line: '1', uncommittedTailBytes: String(uncommittedTailBytes) },
      );
    }
    if (this.#header === undefined) {
      throw new DomainError(JSONL_INVALID, 'the session file is empty: line 1 must be the session header', { line: '1' });
    }
    return this.#header;
  }
}

/**
 * Splits streamed text into lines without holding more than the current partial line. Feed text
 * chunks with {@link JsonlLineSplitter.push}; call {@link JsonlLineSplitter.end} for the last,
 * unterminated line (if any).
 */
export class JsonlLineSplitter {
  /** Pieces of the current partial line (joined once, when its newline arrives). */
  #pieces: string[] = [];
  #partialLength = 0;
  #lineNumber = 0;

  /**
   * @param maxLineLength - longest accepted line, in UTF-16 code units; a longer line is refused
   *   with `JSONL_INVALID` as soon as it is seen (the whole line is never buffered).
   */
  constructor(readonly maxLineLength = Number.MAX_SAFE_INTEGER) {}

  /**
   * Returns the complete lines contained in `text` plus the carried-over partial line. Each chunk
   * is scanned once (no rescans of a long partial line), so the cost is linear in the input.
   */
  push(text: string): string[] {
    const out: string[] = [];
    let from = 0;
    for (;;) {
      const nl = text.indexOf('\n', from);
      if (nl < 0) break;
      const piece = text.slice(from, nl);
      this.#check(this.#partialLength + piece.length);
      if (this.#pieces.length === 0) out.push(piece);
      else {
        this.#pieces.push(piece);
        out.push(this.#pieces.join(''));
        this.#pieces = [];
        this.#partialLength = 0;
      }
      this.#lineNumber++;
      from = nl + 1;
    }
    if (from < text.length) {
      const rest = text.slice(from);
      this.#check(this.#partialLength + rest.length);
      this.#pieces.push(rest);
      this.#partialLength += rest.length;
    }
    return out;
  }

  /** The final unterminated line, or none when the input ended with a newline. */
  end(): string[] {
    const rest = this.#pieces.join('');
    this.#pieces = [];
    this.#partialLength = 0;
    return rest === '' ? [] : [rest];
  }

  #check(length: number): void {
    if (length > this.maxLineLength) {
      const line = this.#lineNumber + 1;
      throw new DomainError(JSONL_INVALID, `line ${line} is longer than ${this.maxLineLength} characters; the limit follows the server's max event size`, {
        line: String(line), limit: String(this.maxLineLength),
      });
    }
  }
}

/**
 * Decodes a whole JSONL text (small files, tests). Large imports should stream with
 * {@link JsonlDecoder}.
 */
export function decodeJsonl(text: string, options: JsonlDecoderOptions = {}): { header: SessionHeader; events: CandidateEvent[] } {
  const decoder = new JsonlDecoder(options);
  const events: CandidateEvent[] = [];
  for (const line of text.split('\n')) {
    for (const event of decoder.push(line)) events.push(event);
  }
  return { header: decoder.finish(), events };
}
