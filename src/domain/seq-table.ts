/**
 * Per-event structural columns of one session, indexed by *ordinal* (position in the log):
 * the interned type and the surface block the event currently sits in. Logs are gapless almost
 * always (ordinal === seq, no lookup table); an imported log with seq gaps switches to a sorted
 * seq column with binary search, so a sparse seq space never costs memory proportional to the
 * largest seq.
 *
 * Typed arrays grow by doubling, so an append is amortised O(1) and allocation-free.
 */

/** Interns event type strings to small integers (shared per engine). */
export class TypeInterner {
  private readonly ids = new Map<string, number>();
  private readonly names: string[] = [];
  private lastName = '';
  private lastId = -1;

  /** The id of `name`, allocating one on first sight. */
  intern(name: string): number {
    if (name === this.lastName && this.lastId >= 0) return this.lastId;
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.names.length;
      this.names.push(name);
      this.ids.set(name, id);
    }
    this.lastName = name;
    this.lastId = id;
    return id;
  }

  /** The id of `name`, or -1 if it was never interned. */
  peek(name: string): number {
    return this.ids.get(name) ?? -1;
  }

  /** The type string of `id`. */
  name(id: number): string {
    const n = this.names[id];
    if (n === undefined) throw new Error(`unknown type id ${id}`);
    return n;
  }
}

const INITIAL_CAPACITY = 1024;

/** Structural columns by ordinal; see the module comment. */
export class SeqTable {
  /** Number of events (ordinals in use). */
  count = 0;
  /** Last seq + 1 (0 when empty). */
  nextSeq = 0;
  private types = new Int32Array(INITIAL_CAPACITY);
  /** Surface block id + 1 of the event, 0 when it is not on the surface. */
  private refs = new Int32Array(INITIAL_CAPACITY);
  /** Seq of each ordinal; null while the log is gapless from 0 (ordinal === seq). */
  private seqs: Float64Array | null = null;

  /** Removes every event. */
  clear(): void {
    this.count = 0;
    this.nextSeq = 0;
    this.types = new Int32Array(INITIAL_CAPACITY);
    this.refs = new Int32Array(INITIAL_CAPACITY);
    this.seqs = null;
  }

  /** Makes room for `n` more events without further growth. */
  reserve(n: number): void {
    const need = this.count + n;
    if (need <= this.types.length) return;
    let cap = this.types.length;
    while (cap < need) cap *= 2;
    const t = new Int32Array(cap);
    t.set(this.types.subarray(0, this.count));
    this.types = t;
    const r = new Int32Array(cap);
    r.set(this.refs.subarray(0, this.count));
    this.refs = r;
    if (this.seqs !== null) {
      const s = new Float64Array(cap);
      s.set(this.seqs.subarray(0, this.count));
      this.seqs = s;
    }
  }

  /** Appends an event; `seq` must be >= nextSeq (the caller checked). */
  push(seq: number, typeId: number): void {
    if (this.count === this.types.length) this.reserve(1);
    const ord = this.count;
    if (this.seqs === null && seq !== ord) {
      // First gap: materialise the seq column (ordinal === seq so far).
      const s = new Float64Array(this.types.length);
      for (let i = 0; i < ord; i++) s[i] = i;
      this.seqs = s;
    }
    if (this.seqs !== null) this.seqs[ord] = seq;
    this.types[ord] = typeId;
    this.refs[ord] = 0;
    this.count = ord + 1;
    this.nextSeq = seq + 1;
  }

  /** Ordinal of `seq`, or -1 if no event has that seq. */
  ordinal(seq: number): number {
    const s = this.seqs;
    if (s === null) return seq >= 0 && seq < this.count && Number.isInteger(seq) ? seq : -1;
    let lo = 0;
    let hi = this.count - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const v = s[mid] as number;
      if (v === seq) return mid;
      if (v < seq) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** Interned type of `seq`, or -1 if unknown. */
  typeId(seq: number): number {
    const o = this.ordinal(seq);
    return o < 0 ? -1 : (this.types[o] as number);
  }

  /** Surface block id of `seq`, or -1 if not on the surface (or unknown). */
  blockOf(seq: number): number {
    const o = this.ordinal(seq);
    return o < 0 ? -1 : (this.refs[o] as number) - 1;
  }

  /** Sets the surface block of `seq` (-1 = off the surface). `seq` must exist. */
  setBlock(seq: number, blockId: number): void {
    const o = this.ordinal(seq);
    if (o < 0) throw new Error(`seq ${seq} is not in the log`);
    this.refs[o] = blockId + 1;
  }

  /** Ordinals whose type id is in `ids`, newest first, at most `limit` (a backward scan of the type column). */
  lastOrdinalsOfTypes(ids: readonly number[], limit: number): number[] {
    const out: number[] = [];
    const t = this.types;
    for (let o = this.count - 1; o >= 0 && out.length < limit; o--) if (ids.includes(t[o] as number)) out.push(o);
    return out;
  }

  /** Seq of ordinal `ord`. */
  seqAt(ord: number): number {
    return this.seqs === null ? ord : (this.seqs[ord] as number);
  }
}
