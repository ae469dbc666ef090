/**
 * The follower's tsvectors made in node (issue #40): to_tsvector('simple', searchNormalize(text))
 * in PostgreSQL's binary form (tsvectorsend/tsvectorrecv), sent as one binary `tsvector[]`
 * parameter per chunk, so PostgreSQL neither parses the text nor the tsvector's text form.
 * bench/search-pg-profile.mjs measured to_tsvector at 13-16 µs of PostgreSQL CPU per indexed event
 * (30-word events), about a third of the follower's statement. The lexemes go in order of first
 * appearance: tsvectorrecv sorts them, which costs less there than in node.
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

/**
 * The lexemes of `text` (its runs of ASCII letters and digits, lower-cased) in order of first
 * appearance, with their positions (a number for one, an array for more); undefined off the fast
 * path.
 */
export function lexemesOf(text: string): Map<string, number | number[]> | undefined {
  const m = new Map<string, number | number[]>();
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
    if (a === undefined) m.set(t, pos);
    else if (typeof a === 'number') m.set(t, [a, pos]);
    else if (a.push(pos) >= MAX_POSITIONS) return undefined;
    start = -1;
    upper = false;
  }
  return m;
}

/** Are text[a, a + len) and text[b, b + len) (ASCII letters and digits) the same in lower case? */
function sameLower(text: string, a: number, b: number, len: number): boolean {
  for (let k = 0; k < len; k++) if ((text.charCodeAt(a + k) | 0x20) !== (text.charCodeAt(b + k) | 0x20)) return false;
  return true;
}

/** Is `c` an ASCII letter or digit? (`c | 0x20` is then its lower case.) */
function alnum(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x7a);
}

/**
 * A binary `tsvector[]` parameter, built element by element. `add` makes what {@link lexemesOf}
 * gives without allocating per token (a hash table over the text's own characters; about half the
 * node time of the Map), since it runs for every indexed event.
 */
export class TsvectorArray {
  #buf = Buffer.allocUnsafe(1 << 16);
  #at = 20;
  #count = 0;
  #nulls = false;
  // Per token (index t, position t + 1): start, length, hash, the next occurrence of its lexeme
  // (-1: none); per lexeme (its first token u): the last occurrence and the count.
  #start = new Int32Array(0);
  #len = new Int32Array(0);
  #hash = new Int32Array(0);
  #next = new Int32Array(0);
  #last = new Int32Array(0);
  #n = new Int32Array(0);
  /** The lexemes' first tokens in order of appearance. */
  #order = new Int32Array(0);
  #table = new Int32Array(0);

  /** Appends to_tsvector('simple', searchNormalize(text)), or NULL off the fast path; true when made. */
  add(text: string): boolean {
    const n = text.length;
    const most = (n >> 1) + 1;
    if (this.#start.length < most) this.#grow(most);
    let size = 2;
    while (size < 2 * most) size <<= 1;
    const mask = size - 1;
    const table = this.#table;
    table.fill(-1, 0, size);
    const starts = this.#start, lens = this.#len, hashes = this.#hash, nexts = this.#next, lasts = this.#last, counts = this.#n, order = this.#order;
    let tokens = 0;
    let lexemes = 0;
    let start = -1;
    let h = 0;
    for (let i = 0; i <= n; i++) {
      const c = i < n ? text.charCodeAt(i) : 32;
      if (alnum(c)) {
        if (start < 0) {
          start = i;
          h = 0x811c9dc5 | 0;
        }
        h = Math.imul(h ^ (c | 0x20), 16777619);
        continue;
      }
      if (c === 0 || c > 0x7f) return this.addNull();
      if (start < 0) continue;
      const len = i - start;
      if (len >= MAX_WORD || tokens + 1 >= MAX_POS) return this.addNull();
      if (text.charCodeAt(start) <= 0x39) {
        // A digit run, e and a digit: the parser's scientific notation.
        let j = start;
        while (j < i && text.charCodeAt(j) <= 0x39) j++;
        if (j + 1 < i && (text.charCodeAt(j) | 0x20) === 0x65 && text.charCodeAt(j + 1) <= 0x39) return this.addNull();
      }
      let slot = h & mask;
      for (;;) {
        const u = table[slot]!;
        if (u < 0) {
          table[slot] = tokens;
          order[lexemes++] = tokens;
          lasts[tokens] = tokens;
          counts[tokens] = 1;
          break;
        }
        if (hashes[u] === h && lens[u] === len && sameLower(text, starts[u]!, start, len)) {
          nexts[lasts[u]!] = tokens;
          lasts[u] = tokens;
          if (++counts[u]! >= MAX_POSITIONS) return this.addNull();
          break;
        }
        slot = (slot + 1) & mask;
      }
      starts[tokens] = start;
      lens[tokens] = len;
      hashes[tokens] = h;
      nexts[tokens] = -1;
      tokens++;
      start = -1;
    }
    this.#count++;
    // At most: per lexeme its bytes, a NUL, a count and 2 bytes a position; the text has a byte
    // per lexeme byte and a separator per position (or its end).
    this.#room(16 + 6 * n);
    const b = this.#buf;
    const at = this.#at;
    let o = b.writeInt32BE(lexemes, at + 4);
    // In order of first appearance: tsvectorrecv sorts the lexemes (the test compares with
    // to_tsvector's), cheaper there than here.
    for (let k = 0; k < lexemes; k++) {
      const u = order[k]!;
      const from = starts[u]!;
      const to = from + lens[u]!;
      for (let i = from; i < to; i++) b[o++] = text.charCodeAt(i) | 0x20;
      b[o++] = 0;
      const cnt = counts[u]!;
      b[o++] = cnt >> 8;
      b[o++] = cnt & 0xff;
      for (let t = u; t >= 0; t = nexts[t]!) {
        const p = t + 1;
        b[o++] = p >> 8;
        b[o++] = p & 0xff;
      }
    }
    b.writeInt32BE(o - at - 4, at);
    this.#at = o;
    return true;
  }

  #grow(most: number): void {
    const m = Math.max(most, 2 * this.#start.length, 1024);
    this.#start = new Int32Array(m);
    this.#len = new Int32Array(m);
    this.#hash = new Int32Array(m);
    this.#next = new Int32Array(m);
    this.#last = new Int32Array(m);
    this.#n = new Int32Array(m);
    this.#order = new Int32Array(m);
    let size = 2;
    while (size < 2 * m) size <<= 1;
    this.#table = new Int32Array(size);
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
  return [...m.keys()].sort().map((k) => `'${k}':${String(m.get(k))}`).join(' ');
}

/**
 * Whether the database's to_tsvector('simple', …) agrees with the fast path (see the module
 * comment): one query, once per index.
 */
export async function probeTsvector(q: { query: (sql: string, values: unknown[]) => Promise<{ rows: { v: string }[] }> }): Promise<boolean> {
  const r = await q.query(`SELECT to_tsvector('simple'::regconfig, $1)::text AS v`, [PROBE_TEXT]);
  return r.rows[0]?.v === tsvectorLiteral(PROBE_TEXT);
}
