/**
 * The stored events of one session of the memory store, off the JS heap: seqs, times, type ids,
 * text offsets and flags in typed arrays, the data texts as UTF-8 in Buffers (slabs), and
 * only the rare replace ops and citation lists in maps. A stored event used to be a frozen object
 * plus its text string, and everything kept on the heap is copied out of the young generation and
 * then marked again and again as the old generation grows: that cost ~35% of the memory store's
 * CPU under 100-event batches (the same run keeping nothing took 3.4 instead of 5.3 us of server
 * CPU per event; texts joined into one string per batch still left GC at 17% of the profile).
 *
 * Reads build each event's StoredEventText on demand (its text decoded from its slab).
 * Nothing here is ever changed in place: the log only grows, and what a read returns is frozen.
 */
import { withOptionalEnvelope, type StoredEventText, type StructuralRow } from '../../app/store-port.js';
import type { SessionEvent, SurfaceOp } from '../../domain/event.js';
import type { TokenFigureRows } from '../../app/ports/capabilities.js';
import { storedTokenFigures, type EventTokenFigures } from '../../domain/event-tokens.js';

/** A stored event as reads see it: the envelope, the data's JSON text and its UTF-8 length. */
export type MemoryEvent = StoredEventText & { readonly dataBytes: number };

const OP_APPEND = 1;
const OP_REPLACE = 2;
const OP_MASK = 3;
const IGNORABLE = 4;
/** The text is ASCII (its UTF-8 bytes are its char codes): read back with latin1, no UTF-8 decoding. */
const ASCII = 8;
/**
 * Bytes of a session's first text slab, and of its largest: each new slab doubles the last up to
 * MAX_SLAB_BYTES (a text larger than that gets a slab of its own size), so a session of a few
 * events holds a few KiB, not a MiB (V8 counts every slab as external memory).
 */
const FIRST_SLAB_BYTES = 4096;
const MAX_SLAB_BYTES = 1 << 20;

/** Node's Buffer#utf8Write / #latin1Write and slices (what Buffer#write and #toString call, without their argument handling). */
interface RawBuffer {
  utf8Write(s: string, offset: number, length: number): number;
  latin1Write(s: string, offset: number, length: number): number;
  utf8Slice(start: number, end: number): string;
  latin1Slice(start: number, end: number): string;
}

/** One batch to store (see EventLog.encode): its events' columns and its data bytes. */
export interface EncodedBatch {
  readonly events: readonly SessionEvent[];
  readonly texts: readonly string[];
  readonly bytes: Uint32Array;
  /** UTF-8 bytes of all the batch's data texts. */
  readonly dataBytes: number;
  /** Per event, its token figures when the writer gave them (BlobWrites.tokenFigures). */
  readonly figures?: readonly EventTokenFigures[];
}

/** The session's events, ascending by seq (gaps possible for imported logs). */
export class EventLog {
  #length = 0;
  #seqs = new Float64Array(4);
  #times = new Float64Array(4);
  #typeIds = new Uint32Array(4);
  #flags = new Uint8Array(4);
  /** Per event: which slab holds its text's UTF-8 bytes, and where they start (its UTF-8 length in #bytes). */
  #textOf = new Uint32Array(4);
  #starts = new Uint32Array(4);
  #bytes = new Uint32Array(4);
  readonly #slabs: Buffer[] = [];
  /** Bytes used of the last slab. */
  #used = 0;
  readonly #types: string[] = [];
  readonly #typeIndex = new Map<string, number>();
  /** By event index: replace ops and citation lists (frozen). */
  readonly #replaces = new Map<number, SurfaceOp>();
  readonly #sources = new Map<number, readonly number[]>();
  /** By event index: the token figures (issue #37, domain/event-tokens.ts), -1 unknown; usage texts in a map. */
  #tokens = new Int32Array(4);
  readonly #usage = new Map<number, string>();

  /** Number of events. */
  get length(): number {
    return this.#length;
  }

  /**
   * The columns of `events` as they will be stored: the data of each as JSON text (`knownTexts`,
   * the client's canonical texts when the plan kept them, which are what JSON.stringify writes;
   * else JSON.stringify's) and its UTF-8 bytes. Nothing is stored yet (a quota may refuse it).
   */
  static encode(events: readonly SessionEvent[], knownTexts?: readonly (string | undefined)[], figures?: readonly EventTokenFigures[]): EncodedBatch {
    const texts = new Array<string>(events.length);
    const bytes = new Uint32Array(events.length);
    let dataBytes = 0;
    for (let i = 0; i < events.length; i++) {
      const text = knownTexts?.[i] ?? JSON.stringify(events[i]!.data);
      texts[i] = text;
      const n = Buffer.byteLength(text, 'utf8');
      bytes[i] = n;
      dataBytes += n;
    }
    return { events, texts, bytes, dataBytes, figures };
  }

  /** Appends an encoded batch (seqs ascending after the last one: the store checked). */
  push(batch: EncodedBatch): void {
    const n = batch.events.length;
    if (n === 0) return;
    this.#reserve(this.#length + n);
    for (let i = 0; i < n; i++) {
      const e = batch.events[i]!;
      const at = this.#length + i;
      this.#seqs[at] = e.seq;
      this.#times[at] = e.time;
      this.#typeIds[at] = this.#typeId(e.type);
      const text = batch.texts[i]!;
      const bytes = batch.bytes[i]!;
      let flags = bytes === text.length ? ASCII : 0;
      this.#write(at, text, bytes, flags !== 0);
      const op = e.surfaceOp;
      if (op === 'append') flags |= OP_APPEND;
      else if (op !== undefined) {
        flags |= OP_REPLACE;
        this.#replaces.set(at, Object.freeze({ op: 'replace' as const, start: op.start, end: op.end }));
      }
      if (e.ignorable === true) flags |= IGNORABLE;
      if (e.sourceEventSeqs !== undefined) this.#sources.set(at, Object.freeze([...e.sourceEventSeqs]));
      this.#flags[at] = flags;
      const f = batch.figures?.[i] ?? storedTokenFigures(e, text);
      this.#tokens[at] = f.tokens;
      if (f.usage !== undefined) this.#usage.set(at, f.usage);
    }
    this.#length += n;
  }

  /** Index of the first event with seq >= `seq` (length when there is none). */
  lowerBound(seq: number): number {
    let lo = 0;
    let hi = this.#length;
    const seqs = this.#seqs;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (seqs[mid]! < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The seq of event `i`. */
  seqAt(i: number): number {
    return this.#seqs[i]!;
  }

  /** The type of event `i`. */
  typeAt(i: number): string {
    return this.#types[this.#typeIds[i]!]!;
  }

  /** The surface op of event `i`, if any. */
  surfaceOpAt(i: number): SurfaceOp | undefined {
    const op = this.#flags[i]! & OP_MASK;
    return op === OP_APPEND ? 'append' : op === OP_REPLACE ? this.#replaces.get(i) : undefined;
  }

  /** Event `i` as stored (frozen, canonical key order, absent optional keys absent). */
  at(i: number): MemoryEvent {
    const slab = this.#slabs[this.#textOf[i]!] as unknown as RawBuffer;
    const start = this.#starts[i]!;
    const bytes = this.#bytes[i]!;
    const flags = this.#flags[i]!;
    const base = {
      type: this.typeAt(i),
      seq: this.#seqs[i]!,
      time: this.#times[i]!,
      dataText: (flags & ASCII) !== 0 ? slab.latin1Slice(start, start + bytes) : slab.utf8Slice(start, start + bytes),
      dataBytes: bytes,
    };
    return Object.freeze(withOptionalEnvelope(base, {
      sourceEventSeqs: this.#sources.get(i),
      surfaceOp: this.surfaceOpAt(i),
      ignorable: (flags & IGNORABLE) !== 0,
    }));
  }

  /** The token figures of the events with seq >= `fromSeq` (TokenFigureReads). */
  tokenFiguresFrom(fromSeq: number): TokenFigureRows {
    const out: TokenFigureRows = { seqs: [], tokens: [], usage: [] };
    for (let i = this.lowerBound(fromSeq); i < this.#length; i++) {
      const t = this.#tokens[i]!;
      const u = this.#usage.get(i) ?? '';
      if (t === 0 && u === '') continue;
      out.seqs.push(this.#seqs[i]!);
      out.tokens.push(t);
      out.usage.push(u);
    }
    return out;
  }

  /** The structural row of event `i` (no data). */
  structuralAt(i: number): StructuralRow {
    const row: { seq: number; type: string; surfaceOp?: SurfaceOp; sourceEventSeqs?: readonly number[]; ignorable?: true } = { seq: this.#seqs[i]!, type: this.typeAt(i) };
    const op = this.surfaceOpAt(i);
    if (op !== undefined) row.surfaceOp = op;
    const sources = this.#sources.get(i);
    if (sources !== undefined) row.sourceEventSeqs = sources;
    if ((this.#flags[i]! & IGNORABLE) !== 0) row.ignorable = true;
    return row;
  }

  /** Writes the UTF-8 of event `at`'s text into the last slab (a new one when it does not fit: the rest of the last slab stays unused). */
  #write(at: number, text: string, bytes: number, ascii: boolean): void {
    let slab = this.#slabs[this.#slabs.length - 1];
    if (slab === undefined || this.#used + bytes > slab.length) {
      const next = slab === undefined ? FIRST_SLAB_BYTES : Math.min(slab.length * 2, MAX_SLAB_BYTES);
      slab = Buffer.allocUnsafeSlow(Math.max(next, bytes));
      this.#slabs.push(slab);
      this.#used = 0;
    }
    const raw = slab as unknown as RawBuffer;
    if (ascii) raw.latin1Write(text, this.#used, bytes);
    else raw.utf8Write(text, this.#used, bytes);
    this.#textOf[at] = this.#slabs.length - 1;
    this.#starts[at] = this.#used;
    this.#bytes[at] = bytes;
    this.#used += bytes;
  }

  #typeId(type: string): number {
    let id = this.#typeIndex.get(type);
    if (id === undefined) {
      id = this.#types.length;
      this.#types.push(type);
      this.#typeIndex.set(type, id);
    }
    return id;
  }

  #reserve(size: number): void {
    if (size <= this.#seqs.length) return;
    let capacity = this.#seqs.length * 2;
    while (capacity < size) capacity *= 2;
    const grow = <T extends Float64Array | Uint32Array | Int32Array | Uint8Array>(old: T, make: (n: number) => T): T => {
      const next = make(capacity);
      next.set(old);
      return next;
    };
    this.#seqs = grow(this.#seqs, (c) => new Float64Array(c));
    this.#times = grow(this.#times, (c) => new Float64Array(c));
    this.#typeIds = grow(this.#typeIds, (c) => new Uint32Array(c));
    this.#flags = grow(this.#flags, (c) => new Uint8Array(c));
    this.#textOf = grow(this.#textOf, (c) => new Uint32Array(c));
    this.#starts = grow(this.#starts, (c) => new Uint32Array(c));
    this.#bytes = grow(this.#bytes, (c) => new Uint32Array(c));
    this.#tokens = grow(this.#tokens, (c) => new Int32Array(c));
  }
}
