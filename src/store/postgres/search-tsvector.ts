/**
 * The follower's tsvectors made in node (issue #40): to_tsvector('simple', searchNormalize(text))
 * in PostgreSQL's binary form (tsvectorsend/tsvectorrecv), sent as one binary `tsvector[]`
 * parameter per chunk, so PostgreSQL neither parses the text nor the tsvector's text form.
 * bench/search-pg-profile.mjs measured to_tsvector at 13-16 µs of PostgreSQL CPU per indexed event
 * (30-word events), about a third of the follower's statement; receiving the binary form is ~1.
 *
 * Made here only where node's result is to_tsvector's, exactly; otherwise the element is NULL and
 * the statement computes it in SQL (search-docs.ts). The fast path takes a text whose characters
 * are all ASCII: searchNormalize makes every run of punctuation, controls and spaces one space, so
 * what is left is runs of ASCII letters and digits, and the default parser makes each such run one
 * token (a fuzz of 200,000 runs against PostgreSQL 15 found one exception, below), which the
 * `simple` dictionary lower-cases. So the lexemes are the runs, lower-cased, positions from 1 in
 * order. Not taken (NULL, computed in SQL):
 *
 * - any character outside ASCII, or NUL (the parser's and the locale's rules for letters and case);
 * - a run of digits, `e`, a digit and more (`1e5x`): the parser reads the number `1e5` and then
 *   `x` apart;
 * - a run of 2,047 characters or more (to_tsvector drops it), a position from 16,383 on (it clamps
 *   them), a lexeme 255 times or more (it keeps its first 255 positions).
 *
 * A database whose `simple` configuration does not do this (another locale's lower case, a
 * dictionary changed to drop stop words) is caught by {@link probeTsvector} once per index, which
 * then turns the fast path off. `verify` compares the written tsvector with SQL's in any case.
 */

/** tsvector's type oid (pg_type), the element type of the binary array. */
const TSVECTOR_OID = 3614;
const MAX_WORD = 2047;
const MAX_POS = 16383;
const MAX_POSITIONS = 255;
/** A digit run followed by e and a digit: the parser's scientific notation (see the module comment). */
const SCIENTIFIC = /^[0-9]+[eE][0-9]/;

/** The lexemes of `text` (its runs of ASCII letters and digits, lower-cased) with their positions; undefined off the fast path. */
export function lexemesOf(text: string): Map<string, number[]> | undefined {
  const m = new Map<string, number[]>();
  let pos = 0;
  let start = -1;
  let upper = false;
  const n = text.length;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? text.charCodeAt(i) : 32;
    if ((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x7a)) {
      if (start < 0) start = i;
      continue;
    }
    if (c >= 0x41 && c <= 0x5a) {
      if (start < 0) start = i;
      upper = true;
      continue;
    }
    if (c === 0 || c > 0x7f) return undefined;
    if (start < 0) continue;
    if (i - start >= MAX_WORD || ++pos >= MAX_POS) return undefined;
    let t = text.slice(start, i);
    const first = t.charCodeAt(0);
    if (first <= 0x39 && SCIENTIFIC.test(t)) return undefined;
    if (upper) t = t.toLowerCase();
    const a = m.get(t);
    if (a === undefined) m.set(t, [pos]);
    else if (a.push(pos) >= MAX_POSITIONS) return undefined;
    start = -1;
    upper = false;
  }
  return m;
}

/** A binary `tsvector[]` parameter, built element by element. */
export class TsvectorArray {
  #buf = Buffer.allocUnsafe(1 << 16);
  #at = 20;
  #count = 0;
  #nulls = false;

  /** Appends to_tsvector('simple', searchNormalize(text)), or NULL off the fast path; true when made. */
  add(text: string): boolean {
    const m = lexemesOf(text);
    if (m === undefined) return this.addNull();
    this.#count++;
    // tsvector's order: by bytes, a prefix first (ASCII: JavaScript's string order).
    const keys = [...m.keys()].sort();
    let size = 4;
    for (const k of keys) size += k.length + 3 + 2 * m.get(k)!.length;
    this.#room(4 + size);
    const b = this.#buf;
    let o = b.writeInt32BE(size, this.#at);
    o = b.writeInt32BE(keys.length, o);
    for (const k of keys) {
      for (let i = 0; i < k.length; i++) b[o++] = k.charCodeAt(i);
      b[o++] = 0;
      const ps = m.get(k)!;
      b[o++] = ps.length >> 8;
      b[o++] = ps.length & 0xff;
      for (const p of ps) {
        b[o++] = p >> 8;
        b[o++] = p & 0xff;
      }
    }
    this.#at = o;
    return true;
  }

  /** Appends NULL (the statement makes the tsvector); false. */
  addNull(): false {
    this.#count++;
    this.#room(4);
    this.#at = this.#buf.writeInt32BE(-1, this.#at);
    this.#nulls = true;
    return false;
  }

  /** The array's binary form (array_recv): one dimension, from 1. */
  toBuffer(): Buffer {
    const b = this.#buf;
    b.writeInt32BE(1, 0);
    b.writeInt32BE(this.#nulls ? 1 : 0, 4);
    b.writeUInt32BE(TSVECTOR_OID, 8);
    b.writeInt32BE(this.#count, 12);
    b.writeInt32BE(1, 16);
    return b.subarray(0, this.#at);
  }

  #room(n: number): void {
    if (this.#at + n <= this.#buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#at + n));
    this.#buf.copy(next, 0, 0, this.#at);
    this.#buf = next;
  }
}

/** A text whose tsvector exercises the parser and the `simple` dictionary as the fast path assumes. */
export const PROBE_TEXT = 'The I Quick 12ab ab12 x1y2 4711 a The zz';

/** The text form of lexemesOf(text) (tsvector's output), for the probe and tests. */
export function tsvectorLiteral(text: string): string | undefined {
  const m = lexemesOf(text);
  if (m === undefined) return undefined;
  return [...m.keys()].sort().map((k) => `'${k}':${m.get(k)!.join(',')}`).join(' ');
}

/**
 * Whether the database's to_tsvector('simple', …) agrees with the fast path (see the module
 * comment): one query, once per index.
 */
export async function probeTsvector(q: { query: (sql: string, values: unknown[]) => Promise<{ rows: { v: string }[] }> }): Promise<boolean> {
  const r = await q.query(`SELECT to_tsvector('simple'::regconfig, $1)::text AS v`, [PROBE_TEXT]);
  return r.rows[0]?.v === tsvectorLiteral(PROBE_TEXT);
}
