/**
 * The committed lines of a JSONL byte stream, as the reference loads a `session.jsonl`: a record
 * counts as committed only once its newline is written. Whatever follows the last newline (the
 * partial record a crashed writer left, or even a complete record whose newline never made it)
 * is an *uncommitted tail*: it is not decoded, not loaded, and only its size is reported, so the
 * caller can say that it was left out.
 *
 * Splitting happens on bytes, before UTF-8 decoding: a newline byte (0x0A) never occurs inside a
 * multi-byte UTF-8 sequence, so every committed line decodes on its own, and a file cut inside a
 * character loses only its tail. Memory is bounded by the longest line (`maxLineBytes`): only the
 * current partial line is carried between chunks.
 */
import { DomainError } from './errors.js';
import { JSONL_INVALID } from './jsonl-chunk-rows.js';

const NEWLINE = 0x0a;

/** Splits streamed bytes into committed, decoded lines; see the module comment. */
export class JsonlCommittedLines {
  readonly #utf8 = new TextDecoder('utf-8', { fatal: true });
  /** Pieces of the current partial line. */
  #carry: Uint8Array[] = [];
  #carryBytes = 0;
  #lineNumber = 0;

  /**
   * @param maxLineBytes - longest accepted line in bytes (without its newline); a longer line is
   *   refused with `JSONL_INVALID` as soon as it is seen, committed or not.
   */
  constructor(readonly maxLineBytes = Number.MAX_SAFE_INTEGER) {}

  /**
   * The lines `chunk` completes (without their newline), decoded.
   *
   * @throws DomainError `JSONL_INVALID` (with `metadata.line`) for a line that is too long or not
   *   valid UTF-8
   */
  push(chunk: Uint8Array): string[] {
    const out: string[] = [];
    let from = 0;
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, from);
      if (nl < 0) break;
      const piece = chunk.subarray(from, nl);
      this.#check(this.#carryBytes + piece.length);
      let bytes = piece;
      if (this.#carry.length > 0) {
        this.#carry.push(piece);
        bytes = concat(this.#carry, this.#carryBytes + piece.length);
        this.#carry = [];
        this.#carryBytes = 0;
      }
      this.#lineNumber++;
      out.push(this.#decode(bytes));
      from = nl + 1;
    }
    if (from < chunk.length) {
      const rest = chunk.slice(from);
      this.#check(this.#carryBytes + rest.length);
      this.#carry.push(rest);
      this.#carryBytes += rest.length;
    }
    return out;
  }

  /** Ends the input: the size in bytes of the uncommitted tail (0 when the input ended with a newline). */
  end(): number {
    const tail = this.#carryBytes;
    this.#carry = [];
    this.#carryBytes = 0;
    return tail;
  }

  #decode(bytes: Uint8Array): string {
    try {
      return this.#utf8.decode(bytes);
    } catch {
      const line = String(this.#lineNumber);
      throw new DomainError(JSONL_INVALID, `line ${line} is not valid UTF-8`, { line });
    }
  }

  #check(length: number): void {
    if (length > this.maxLineBytes) {
      const line = this.#lineNumber + 1;
      throw new DomainError(JSONL_INVALID, `line ${line} is longer than ${this.maxLineBytes} bytes; the limit follows the server's max event size`, {
        line: String(line), limit: String(this.maxLineBytes),
      });
    }
  }
}

function concat(pieces: readonly Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
