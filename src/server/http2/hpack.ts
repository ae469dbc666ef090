/**
 * HPACK (RFC 7541): the request-side decoder of one connection and a stateless response encoder.
 *
 * Decoding: the dynamic table is a ring of (name, value) strings, so inserting and evicting never
 * shift an array; strings are latin1 (one octet, one char code), as in node:http2. Huffman strings
 * go through a byte-at-a-time state machine built once at load: the 256 internal nodes of the code
 * tree are the states and one table entry per (state, octet) gives the next state and the zero to
 * two symbols completed, so a Huffman string costs one lookup per octet (the 256 KiB table takes
 * ~10 ms to build at load). Unindexed literal values (nghttp2 sends `:path` so on every request)
 * go through a 16-slot cache of their raw octets: a repeat request on a warm connection decodes
 * in ~0.2 us instead of ~0.6 us.
 *
 * Encoding never touches the dynamic table and never uses Huffman: the peer's table size cannot
 * matter and there is no state to keep in sync; static-table hits are still indexed.
 */

/** Raised for a header block that cannot be decoded: the connection must end with COMPRESSION_ERROR. */
export class HpackError extends Error {
  override name = 'HpackError';
}

/** RFC 7541 Appendix A; index 0 is unused so that an entry sits at its wire index. */
const STATIC_TABLE: readonly (readonly [string, string])[] = [
  ['', ''],
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''],
  ['accept-ranges', ''],
  ['accept', ''],
  ['access-control-allow-origin', ''],
  ['age', ''],
  ['allow', ''],
  ['authorization', ''],
  ['cache-control', ''],
  ['content-disposition', ''],
  ['content-encoding', ''],
  ['content-language', ''],
  ['content-length', ''],
  ['content-location', ''],
  ['content-range', ''],
  ['content-type', ''],
  ['cookie', ''],
  ['date', ''],
  ['etag', ''],
  ['expect', ''],
  ['expires', ''],
  ['from', ''],
  ['host', ''],
  ['if-match', ''],
  ['if-modified-since', ''],
  ['if-none-match', ''],
  ['if-range', ''],
  ['if-unmodified-since', ''],
  ['last-modified', ''],
  ['link', ''],
  ['location', ''],
  ['max-forwards', ''],
  ['proxy-authenticate', ''],
  ['proxy-authorization', ''],
  ['range', ''],
  ['referer', ''],
  ['refresh', ''],
  ['retry-after', ''],
  ['server', ''],
  ['set-cookie', ''],
  ['strict-transport-security', ''],
  ['transfer-encoding', ''],
  ['user-agent', ''],
  ['vary', ''],
  ['via', ''],
  ['www-authenticate', ''],
];
const STATIC_COUNT = 61;
const STATIC_NAMES: readonly string[] = STATIC_TABLE.map((e) => e[0]);
const STATIC_VALUES: readonly string[] = STATIC_TABLE.map((e) => e[1]);
/** The first static index of each name. */
const STATIC_NAME_INDEX = new Map<string, number>();
for (let i = STATIC_COUNT; i >= 1; i--) STATIC_NAME_INDEX.set(STATIC_NAMES[i]!, i);

/** Entry overhead of RFC 7541 4.1 (also the per-field overhead of RFC 9113 6.5.2). */
const ENTRY_OVERHEAD = 32;
const MAX_INT = 0x7fffffff;
/** Continuation octets needed for MAX_INT after the smallest prefix we read (4 bits). */
const MAX_INT_CONTINUATIONS = 5;

/**
 * Code lengths of RFC 7541 Appendix B for symbols 0..255 and EOS (256). The code is canonical
 * (codes of one length are consecutive, in symbol order, after the shorter ones), so the lengths
 * determine the codes.
 */
// prettier-ignore
const HUFFMAN_LENGTHS: readonly number[] = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
  6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
];
const EOS = 256;

/** Entry layout of HUFFMAN_STEP: next state, first symbol, second symbol, symbol count, EOS seen. */
const STEP_SYM1_SHIFT = 8;
const STEP_SYM2_SHIFT = 16;
const STEP_COUNT_SHIFT = 24;
const STEP_EOS = 1 << 26;

/**
 * HUFFMAN_STEP[(state << 8) | octet] is the decoder transition; HUFFMAN_ACCEPT[state] is 1 where a
 * string may end: the bits since the last symbol are at most 7 and all 1s (RFC 7541 5.2).
 */
const { step: HUFFMAN_STEP, accept: HUFFMAN_ACCEPT } = buildHuffmanDecoder();

function buildHuffmanDecoder(): { step: Uint32Array; accept: Uint8Array } {
  const symbols = HUFFMAN_LENGTHS.map((_, s) => s).sort(
    (a, b) => HUFFMAN_LENGTHS[a]! - HUFFMAN_LENGTHS[b]! || a - b,
  );
  // child[2 * node + bit]: > 0 an internal node, < 0 the leaf ~symbol, 0 not yet set (the root,
  // node 0, is nobody's child).
  const child = new Int32Array(2 * 256);
  const accept = new Uint8Array(256);
  accept[0] = 1;
  let nodes = 1;
  let code = 0;
  let prevLength = HUFFMAN_LENGTHS[symbols[0]!]!;
  for (const s of symbols) {
    const length = HUFFMAN_LENGTHS[s]!;
    code *= 2 ** (length - prevLength);
    prevLength = length;
    let node = 0;
    for (let depth = 1; depth <= length; depth++) {
      const bit = Math.floor(code / 2 ** (length - depth)) % 2;
      const slot = 2 * node + bit;
      if (depth === length) {
        if (child[slot] !== 0) throw new Error('HPACK Huffman table: a code is a prefix of another');
        child[slot] = ~s;
      } else {
        if (child[slot]! < 0) throw new Error('HPACK Huffman table: a code is a prefix of another');
        if (child[slot] === 0) {
          if (nodes === 256) throw new Error('HPACK Huffman table: more than 256 internal nodes');
          child[slot] = nodes;
          accept[nodes] = accept[node]! === 1 && bit === 1 && depth <= 7 ? 1 : 0;
          nodes++;
        }
        node = child[slot]!;
      }
    }
    code++;
  }
  // Kraft equality: the last (longest) code is all 1s, so the tree is complete.
  if (code !== 2 ** prevLength || nodes !== 256) throw new Error('HPACK Huffman table is not a complete prefix code');

  const step = new Uint32Array(256 * 256);
  for (let state = 0; state < 256; state++) {
    for (let octet = 0; octet < 256; octet++) {
      let node = state;
      let count = 0;
      let entry = 0;
      for (let bit = 7; bit >= 0; bit--) {
        const next = child[2 * node + ((octet >> bit) & 1)]!;
        if (next >= 0) {
          node = next;
          continue;
        }
        const sym = ~next;
        if (sym === EOS) entry |= STEP_EOS;
        else entry |= sym << (count === 0 ? STEP_SYM1_SHIFT : STEP_SYM2_SHIFT);
        count++;
        node = 0;
      }
      // The shortest code is 5 bits, so one octet completes at most two symbols.
      if (count > 2) throw new Error('HPACK Huffman table: more than two symbols in one octet');
      step[(state << 8) | octet] = (entry | (count << STEP_COUNT_SHIFT) | node) >>> 0;
    }
  }
  return { step, accept };
}

/** Slots of the unindexed-value cache (a power of 2) and the octets of each (a one-octet length). */
const VALUE_CACHE_SLOTS = 16;
const VALUE_CACHE_OCTETS = 0x7e;

/** Output of Huffman decoding, shared by every decoder (decoding is synchronous). */
let huffmanScratch = Buffer.allocUnsafe(4096);

/** The decoder of one connection's request header blocks (its dynamic table lives across blocks). */
export class HpackDecoder {
  /** SETTINGS_HEADER_TABLE_SIZE as advertised: the ceiling of size updates. */
  readonly #maxTableSize: number;
  /** The current table size limit (RFC 7541 4.2), changed by size updates. */
  #limit: number;
  /** Octets in the table per RFC 7541 4.1. */
  #size = 0;
  #count = 0;
  /** Ring slot of the newest entry. */
  #head = 0;
  readonly #mask: number;
  readonly #names: string[];
  readonly #values: string[];
  /** Read position in the block being decoded. */
  #pos = 0;
  /** Cache of unindexed literal values: raw octets, first octet (Huffman bit + length), string. */
  readonly #cacheOctets = Buffer.alloc(VALUE_CACHE_SLOTS * VALUE_CACHE_OCTETS);
  readonly #cacheFirst = new Uint8Array(VALUE_CACHE_SLOTS);
  readonly #cacheValue = new Array<string>(VALUE_CACHE_SLOTS).fill('');

  /** maxTableSize: the SETTINGS_HEADER_TABLE_SIZE we advertised (4096). */
  constructor(maxTableSize = 4096) {
    if (!Number.isInteger(maxTableSize) || maxTableSize < 0 || maxTableSize > MAX_INT) {
      throw new RangeError(`maxTableSize must be an integer in 0..${MAX_INT}, got ${maxTableSize}`);
    }
    this.#maxTableSize = maxTableSize;
    this.#limit = maxTableSize;
    // Every entry takes at least 32 octets, so this many slots never overflow.
    let capacity = 1;
    while (capacity < maxTableSize / ENTRY_OVERHEAD) capacity *= 2;
    this.#mask = capacity - 1;
    this.#names = new Array<string>(capacity).fill('');
    this.#values = new Array<string>(capacity).fill('');
  }

  /**
   * Decodes one complete header block (all HEADERS+CONTINUATION fragments joined) into `out`
   * (a flat array: name0, value0, name1, value1, ...; on return it holds exactly this block's
   * fields, after an HpackError its content is unspecified: the connection is over anyway).
   * Returns the header list size per RFC 7540 6.5.2 (sum of name.length + value.length + 32,
   * octets). Throws HpackError on any malformed input.
   * If the running header list size exceeds `maxListSize`, decoding continues (to keep the
   * dynamic table in sync) but stops appending to `out`, and the returned size is > maxListSize.
   */
  decode(block: Buffer, out: string[], maxListSize: number): number {
    this.#pos = 0;
    const end = block.length;
    let listSize = 0;
    let n = 0;
    let sawField = false;
    while (this.#pos < end) {
      const first = block[this.#pos]!;
      let name: string;
      let value: string;
      if (first & 0x80) {
        // Indexed field (6.1).
        const index = first === 0xff ? this.#int(block, 0x7f) : (this.#pos++, first & 0x7f);
        if (index <= STATIC_COUNT) {
          if (index === 0) throw new HpackError('HPACK: indexed field with index 0');
          name = STATIC_NAMES[index]!;
          value = STATIC_VALUES[index]!;
        } else {
          const slot = this.#slot(index);
          name = this.#names[slot]!;
          value = this.#values[slot]!;
        }
      } else if (first & 0x40) {
        // Literal with incremental indexing (6.2.1).
        const index = this.#int(block, 0x3f);
        name = index === 0 ? this.#string(block) : this.#nameAt(index);
        value = this.#string(block);
        this.#insert(name, value);
      } else if (first & 0x20) {
        // Dynamic table size update (6.3).
        if (sawField) throw new HpackError('HPACK: dynamic table size update after a header field');
        const limit = this.#int(block, 0x1f);
        if (limit > this.#maxTableSize) {
          throw new HpackError(`HPACK: dynamic table size update to ${limit} exceeds the advertised ${this.#maxTableSize}`);
        }
        this.#limit = limit;
        while (this.#size > limit) this.#evict();
        continue;
      } else {
        // Literal without indexing (6.2.2) or never indexed (6.2.3): same shape, 4-bit prefix.
        const index = this.#int(block, 0x0f);
        name = index === 0 ? this.#string(block) : this.#nameAt(index);
        value = this.#unindexedValue(block);
      }
      sawField = true;
      listSize += name.length + value.length + ENTRY_OVERHEAD;
      if (listSize <= maxListSize) {
        out[n++] = name;
        out[n++] = value;
      }
    }
    out.length = n;
    return listSize;
  }

  /** Reads an integer (5.1) whose prefix is `mask` in the octet at the read position. */
  #int(block: Buffer, mask: number): number {
    let pos = this.#pos;
    let value = block[pos++]! & mask;
    if (value === mask) {
      let scale = 1;
      let octet: number;
      let continuations = 0;
      do {
        if (pos >= block.length) throw new HpackError('HPACK: truncated integer');
        if (++continuations > MAX_INT_CONTINUATIONS) throw new HpackError('HPACK: integer overflow (too many octets)');
        octet = block[pos++]!;
        value += (octet & 0x7f) * scale;
        scale *= 128;
      } while (octet & 0x80);
      if (value > MAX_INT) throw new HpackError(`HPACK: integer overflow (${value} > ${MAX_INT})`);
    }
    this.#pos = pos;
    return value;
  }

  /** Reads a string literal (5.2) at the read position. */
  #string(block: Buffer): string {
    if (this.#pos >= block.length) throw new HpackError('HPACK: truncated string length');
    const huffman = block[this.#pos]! & 0x80;
    const length = this.#int(block, 0x7f);
    const start = this.#pos;
    const end = start + length;
    if (end > block.length) throw new HpackError(`HPACK: string of ${length} octets overruns the header block`);
    this.#pos = end;
    if (huffman === 0) return block.toString('latin1', start, end);
    return huffmanDecode(block, start, end);
  }

  /**
   * Reads the value of a literal that is not indexed, through a small cache of raw octets: such
   * values come back request after request (nghttp2 never indexes `:path`), and comparing a few
   * dozen octets costs a tenth of Huffman-decoding them and creating the string again.
   */
  #unindexedValue(block: Buffer): string {
    const pos = this.#pos;
    const end = pos + 1 + (block[pos]! & 0x7f);
    // Only short values with a one-octet length (whose octet also holds the Huffman bit).
    if (pos >= block.length || end > block.length || (block[pos]! & 0x7f) === 0x7f || end === pos + 1) {
      return this.#string(block);
    }
    const first = block[pos]!;
    const slot = (first ^ block[pos + 1]! ^ (block[end - 1]! << 1)) & (VALUE_CACHE_SLOTS - 1);
    const cached = this.#cacheOctets;
    if (this.#cacheFirst[slot] === first) {
      let at = slot * VALUE_CACHE_OCTETS;
      let i = pos + 1;
      while (i < end && cached[at] === block[i]) {
        at++;
        i++;
      }
      if (i === end) {
        this.#pos = end;
        return this.#cacheValue[slot]!;
      }
    }
    const value = this.#string(block);
    block.copy(cached, slot * VALUE_CACHE_OCTETS, pos + 1, end);
    this.#cacheFirst[slot] = first;
    this.#cacheValue[slot] = value;
    return value;
  }

  #nameAt(index: number): string {
    if (index <= STATIC_COUNT) return STATIC_NAMES[index]!;
    return this.#names[this.#slot(index)]!;
  }

  /** The ring slot of dynamic index `index` (62 is the newest entry). */
  #slot(index: number): number {
    const age = index - STATIC_COUNT - 1;
    if (age >= this.#count) {
      throw new HpackError(`HPACK: index ${index} beyond the table (${STATIC_COUNT} static + ${this.#count} dynamic entries)`);
    }
    return (this.#head - age) & this.#mask;
  }

  /** Adds an entry per 4.4: evict until it fits; an entry larger than the table empties it. */
  #insert(name: string, value: string): void {
    const entrySize = name.length + value.length + ENTRY_OVERHEAD;
    if (entrySize > this.#limit) {
      while (this.#count > 0) this.#evict();
      return;
    }
    while (this.#size + entrySize > this.#limit) this.#evict();
    this.#head = (this.#head + 1) & this.#mask;
    this.#names[this.#head] = name;
    this.#values[this.#head] = value;
    this.#count++;
    this.#size += entrySize;
  }

  #evict(): void {
    const slot = (this.#head - this.#count + 1) & this.#mask;
    this.#size -= this.#names[slot]!.length + this.#values[slot]!.length + ENTRY_OVERHEAD;
    this.#names[slot] = '';
    this.#values[slot] = '';
    this.#count--;
  }
}

function huffmanDecode(block: Buffer, start: number, end: number): string {
  // 8 bits per octet, at least 5 bits per symbol, and two octets of slack for the unconditional
  // writes below.
  const bound = Math.ceil(((end - start) * 8) / 5) + 2;
  if (huffmanScratch.length < bound) huffmanScratch = Buffer.allocUnsafe(Math.max(bound, 2 * huffmanScratch.length));
  const out = huffmanScratch;
  let n = 0;
  let state = 0;
  for (let i = start; i < end; i++) {
    const entry = HUFFMAN_STEP[(state << 8) | block[i]!]!;
    if (entry & STEP_EOS) throw new HpackError('HPACK: EOS symbol in a Huffman string');
    out[n] = entry >>> STEP_SYM1_SHIFT;
    out[n + 1] = entry >>> STEP_SYM2_SHIFT;
    n += (entry >>> STEP_COUNT_SHIFT) & 3;
    state = entry & 0xff;
  }
  if (HUFFMAN_ACCEPT[state] !== 1) throw new HpackError('HPACK: Huffman padding longer than 7 bits or not all 1s');
  return out.toString('latin1', 0, n);
}

/** An upper bound of the encoded size of `fields`, for sizing the target of encodeHeadersInto. */
export function encodedLengthBound(fields: readonly string[]): number {
  // Per string: a length (or name index) of at most 5 octets after a 1-octet prefix, plus the octets.
  let bound = 0;
  for (let i = 0; i < fields.length; i++) bound += fields[i]!.length + 6;
  return bound;
}

/**
 * Encodes `fields` (flat name/value array, names lowercase) at `offset` in `target` and returns the
 * end offset; the caller guarantees room for encodedLengthBound(fields) octets. Throws TypeError
 * for a name that is not a lowercase HTTP/2 field name (RFC 9113 8.2.1) or a value with a char
 * above 255, CR, LF or NUL.
 */
export function encodeHeadersInto(fields: readonly string[], target: Buffer, offset: number): number {
  if (fields.length % 2 !== 0) throw new TypeError(`header fields must be name/value pairs, got ${fields.length} strings`);
  let o = offset;
  outer: for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    const index = STATIC_NAME_INDEX.get(name);
    if (index === undefined) {
      target[o++] = 0x00;
      o = writeName(target, o, name);
    } else {
      for (let j = index; j <= STATIC_COUNT && STATIC_NAMES[j] === name; j++) {
        if (STATIC_VALUES[j] === value) {
          target[o++] = 0x80 | j;
          continue outer;
        }
      }
      o = writeInt(target, o, 0x00, 0x0f, index);
    }
    o = writeValue(target, o, name, value);
  }
  return o;
}

/**
 * Blocks from encodeHeaders are cut from a slab of our own, as Buffer.allocUnsafe cuts from its
 * pool but without its per-call checks (half the cost of a typical response block).
 */
const SLAB_SIZE = 16 * 1024;
let slab = Buffer.allocUnsafeSlow(SLAB_SIZE);
let slabUsed = 0;

/** Encodes one response header block (see encodeHeadersInto). */
export function encodeHeaders(fields: readonly string[]): Buffer {
  const bound = encodedLengthBound(fields);
  if (bound > SLAB_SIZE / 4) {
    const buf = Buffer.allocUnsafe(bound);
    return buf.subarray(0, encodeHeadersInto(fields, buf, 0));
  }
  if (slabUsed + bound > SLAB_SIZE) {
    slab = Buffer.allocUnsafeSlow(SLAB_SIZE);
    slabUsed = 0;
  }
  const start = slabUsed;
  const end = encodeHeadersInto(fields, slab, start);
  // Keep blocks 8-aligned, as the Buffer pool does.
  slabUsed = (end + 7) & ~7;
  return slab.subarray(start, end);
}

function writeInt(target: Buffer, offset: number, flags: number, mask: number, value: number): number {
  let o = offset;
  if (value < mask) {
    target[o++] = flags | value;
    return o;
  }
  target[o++] = flags | mask;
  let rest = value - mask;
  while (rest >= 0x80) {
    target[o++] = (rest & 0x7f) | 0x80;
    rest = Math.floor(rest / 0x80);
  }
  target[o++] = rest;
  return o;
}

/** Writes a name as a plain string literal, checking it is a lowercase field name (RFC 9113 8.2.1). */
function writeName(target: Buffer, offset: number, name: string): number {
  if (name.length === 0) throw new TypeError('header name must not be empty');
  let o = writeInt(target, offset, 0x00, 0x7f, name.length);
  for (let k = 0; k < name.length; k++) {
    const c = name.charCodeAt(k);
    if (c <= 0x20 || c >= 0x7f || (c >= 0x41 && c <= 0x5a)) {
      throw new TypeError(`invalid header name ${JSON.stringify(name)}: char ${c} at ${k}; HTTP/2 names are lowercase visible ASCII`);
    }
    target[o++] = c;
  }
  return o;
}

/** Writes a value as a plain string literal, checking it holds octets other than NUL, CR and LF. */
function writeValue(target: Buffer, offset: number, name: string, value: string): number {
  let o = writeInt(target, offset, 0x00, 0x7f, value.length);
  for (let k = 0; k < value.length; k++) {
    const c = value.charCodeAt(k);
    if (c > 0xff || c === 0x00 || c === 0x0a || c === 0x0d) {
      throw new TypeError(`invalid value for header ${JSON.stringify(name)}: char ${c} at ${k}; values are octets without NUL, CR or LF`);
    }
    target[o++] = c;
  }
  return o;
}
