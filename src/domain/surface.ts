/**
 * The surface (dsh-semantics 3): the ordered list of event seqs that produce model messages.
 *
 * The reference keeps one `number[]` and finds replace endpoints with `indexOf`, so a replace is
 * O(surface). Here the same order is kept in *blocks* of at most {@link BLOCK_SIZE} seqs:
 *
 *  - each event knows its block (a column of {@link SeqTable}), so locating a seq is
 *    O(block size) (an `indexOf` inside one block);
 *  - blocks carry their ordinal `pos` (for comparing positions of two seqs) and the global index
 *    `start` of their first seq (for reporting positions to projections);
 *  - append pushes onto the last block (a new block every BLOCK_SIZE appends);
 *  - a replace inside one block is an O(block) splice; a replace across blocks truncates the
 *    first block, drops the blocks in between and trims the last one: O(range + blocks).
 *
 * Planning never mutates the committed surface: {@link SurfaceDraft} is a copy-on-write overlay
 * (modified blocks are copied, new tail seqs live in a virtual tail block, the block order is
 * copied only when a replace spans blocks). Committing adopts the draft's changes.
 */
import type { SeqTable } from './seq-table.js';

/** Maximum number of seqs appended into one block. */
export const BLOCK_SIZE = 256;

/** Block id of the draft's virtual tail block. */
const TAIL = -2;
/** "Not on the surface" in draft overrides. */
const OFF = -1;

/** One block of the committed surface. */
interface Block {
  readonly id: number;
  seqs: number[];
  /** Ordinal of the block in surface order. */
  pos: number;
  /** Global surface index of seqs[0]. */
  start: number;
}

/** Where a seq sits on a (draft) surface. */
export interface SurfaceLocation {
  /** Block id (TAIL for the draft's tail). */
  readonly block: number;
  /** Index inside the block. */
  readonly index: number;
}

/** The committed chunked surface of one session. */
export class ChunkedSurface {
  /** Blocks in surface order. */
  blocks: Block[] = [];
  /** Blocks by id (undefined once dropped). */
  readonly byId: (Block | undefined)[] = [];
  /** Number of seqs on the surface. */
  length = 0;
  /** Bumped on every mutation; a draft is adoptable only against the version it was built on. */
  version = 0;

  constructor(readonly table: SeqTable) {}

  /** Empties the surface. */
  clear(): void {
    this.blocks = [];
    this.byId.length = 0;
    this.length = 0;
    this.version++;
  }

  /** Appends `seq` (already pushed into the table) at the end of the surface. */
  append(seq: number): void {
    let last = this.blocks[this.blocks.length - 1];
    if (last === undefined || last.seqs.length >= BLOCK_SIZE) {
      last = { id: this.byId.length, seqs: [], pos: this.blocks.length, start: this.length };
      this.byId.push(last);
      this.blocks.push(last);
    }
    last.seqs.push(seq);
    this.table.setBlock(seq, last.id);
    this.length++;
    this.version++;
  }

  /** Surface order as a fresh array. */
  toArray(): number[] {
    const out = new Array<number>(this.length);
    let k = 0;
    for (const b of this.blocks) {
      const s = b.seqs;
      for (let i = 0; i < s.length; i++) out[k++] = s[i] as number;
    }
    return out;
  }

  /** Applies a draft built against this surface's current version. */
  adopt(d: SurfaceDraft): void {
    if (d.baseVersion !== this.version) throw new Error('surface draft is stale');
    const table = this.table;
    let restructure = false;
    if (d.subst !== null) {
      const sub = d.subst;
      for (let i = 0; i < sub.length; i += 3) {
        const b = this.byId[sub[i] as number];
        if (b !== undefined) b.seqs[sub[i + 1] as number] = sub[i + 2] as number;
      }
    }
    if (d.mod !== null) {
      for (const [id, seqs] of d.mod) {
        const b = this.byId[id];
        if (b === undefined) continue;
        if (b.seqs.length !== seqs.length) restructure = true;
        b.seqs = seqs;
      }
    }
    if (d.order !== null) {
      restructure = true;
      const kept = new Set(d.order);
      for (const b of this.blocks) if (!kept.has(b.id)) this.byId[b.id] = undefined;
      const blocks: Block[] = [];
      for (const id of d.order) {
        const b = this.byId[id];
        if (b !== undefined) blocks.push(b);
      }
      this.blocks = blocks;
    }
    if (d.where !== null) {
      for (const [seq, block] of d.where) if (block !== TAIL) table.setBlock(seq, block);
    }
    if (restructure) {
      // Drop emptied blocks, merge a small block into its small predecessor, renumber.
      const blocks: Block[] = [];
      for (const b of this.blocks) {
        if (b.seqs.length === 0) {
          this.byId[b.id] = undefined;
          continue;
        }
        const prev = blocks[blocks.length - 1];
        if (prev !== undefined && prev.seqs.length + b.seqs.length <= BLOCK_SIZE / 2) {
          for (const s of b.seqs) {
            prev.seqs.push(s);
            table.setBlock(s, prev.id);
          }
          this.byId[b.id] = undefined;
          continue;
        }
        blocks.push(b);
      }
      let start = 0;
      for (let i = 0; i < blocks.length; i++) {
        const b = blocks[i] as Block;
        b.pos = i;
        b.start = start;
        start += b.seqs.length;
      }
      this.blocks = blocks;
      this.length = start;
    }
    this.version++;
    for (const seq of d.tail) this.append(seq);
  }
}

/**
 * A copy-on-write overlay over a {@link ChunkedSurface}: what the surface would be after the
 * events planned so far. Never mutates the base.
 */
export class SurfaceDraft {
  /** Version of the base this draft was built on. */
  readonly baseVersion: number;
  /** Copied (modified) base blocks by id. */
  mod: Map<number, number[]> | null = null;
  /** Block order when a replace spanned blocks (ids of base blocks still present). */
  order: number[] | null = null;
  private orderPos: Map<number, number> | null = null;
  /** Seq -> block overrides (OFF = shadowed, TAIL = in the tail). */
  where: Map<number, number> | null = null;
  /**
   * Single-node replaces in base blocks not copied yet, as (block, index, seq) triples: a prune
   * costs O(1) memory instead of a block copy. Materialized into `mod` when the block is read.
   */
  subst: number[] | null = null;
  /** Seqs appended after the last base block. */
  tail: number[] = [];
  /** Surface length. */
  length: number;
  /** Number of replaces planned. */
  replaces = 0;
  /** Base block starts are stale (a base block changed length). */
  private startsDirty = false;
  private starts: Map<number, number> | null = null;

  constructor(readonly base: ChunkedSurface) {
    this.baseVersion = base.version;
    this.length = base.length;
  }

  private blockOf(seq: number): number {
    if (this.where !== null) {
      const w = this.where.get(seq);
      if (w !== undefined) return w;
    }
    return this.base.table.blockOf(seq);
  }

  private seqsOf(block: number): readonly number[] {
    if (block === TAIL) return this.tail;
    if (this.subst !== null) this.materialize(block);
    const m = this.mod?.get(block);
    if (m !== undefined) return m;
    return (this.base.byId[block] as Block).seqs;
  }

  private posOf(block: number): number {
    if (block === TAIL) return Number.MAX_SAFE_INTEGER;
    if (this.order === null) return (this.base.byId[block] as Block).pos;
    if (this.orderPos === null) {
      this.orderPos = new Map();
      for (let i = 0; i < this.order.length; i++) this.orderPos.set(this.order[i] as number, i);
    }
    return this.orderPos.get(block) ?? -1;
  }

  private currentOrder(): number[] {
    return this.order ?? this.base.blocks.map((b) => b.id);
  }

  private setWhere(seq: number, block: number): void {
    (this.where ??= new Map()).set(seq, block);
  }

  /** Moves pending substitutions of `block` into its copy. */
  private materialize(block: number): void {
    const sub = this.subst as number[];
    let found = false;
    for (let i = 0; i < sub.length; i += 3) if (sub[i] === block) found = true;
    if (!found) return;
    this.subst = null;
    const arr = this.cow(block);
    const rest: number[] = [];
    for (let i = 0; i < sub.length; i += 3) {
      if (sub[i] === block) arr[sub[i + 1] as number] = sub[i + 2] as number;
      else rest.push(sub[i] as number, sub[i + 1] as number, sub[i + 2] as number);
    }
    this.subst = rest.length > 0 ? rest : null;
  }

  private cow(block: number): number[] {
    if (block === TAIL) return this.tail;
    if (this.subst !== null) this.materialize(block);
    const mod = (this.mod ??= new Map());
    let m = mod.get(block);
    if (m === undefined) {
      m = (this.base.byId[block] as Block).seqs.slice();
      mod.set(block, m);
    }
    return m;
  }

  /** Location of `seq` on the draft surface, or undefined if it is not on it. */
  locate(seq: number): SurfaceLocation | undefined {
    const block = this.blockOf(seq);
    if (block === OFF) return undefined;
    const index = this.seqsOf(block).indexOf(seq);
    return index < 0 ? undefined : { block, index };
  }

  /** Negative, 0 or positive as `a` is before, at or after `b` in surface order. */
  compare(a: SurfaceLocation, b: SurfaceLocation): number {
    if (a.block === b.block) return a.index - b.index;
    return this.posOf(a.block) - this.posOf(b.block);
  }

  /** Global surface index of a location. */
  indexOf(loc: SurfaceLocation): number {
    if (loc.block === TAIL) return this.length - this.tail.length + loc.index;
    if (!this.startsDirty && this.order === null) return (this.base.byId[loc.block] as Block).start + loc.index;
    if (this.starts === null) {
      this.starts = new Map();
      let s = 0;
      for (const id of this.currentOrder()) {
        this.starts.set(id, s);
        s += this.seqsOf(id).length;
      }
    }
    return (this.starts.get(loc.block) ?? 0) + loc.index;
  }

  /** The seqs from `a` to `b` inclusive (a must not be after b). */
  range(a: SurfaceLocation, b: SurfaceLocation): number[] {
    if (a.block === b.block) return this.seqsOf(a.block).slice(a.index, b.index + 1);
    const out = this.seqsOf(a.block).slice(a.index);
    if (b.block === TAIL) {
      const order = this.currentOrder();
      for (let p = this.posOf(a.block) + 1; p < order.length; p++) out.push(...this.seqsOf(order[p] as number));
    } else {
      const order = this.currentOrder();
      const pb = this.posOf(b.block);
      for (let p = this.posOf(a.block) + 1; p < pb; p++) out.push(...this.seqsOf(order[p] as number));
    }
    const last = this.seqsOf(b.block);
    for (let i = 0; i <= b.index; i++) out.push(last[i] as number);
    return out;
  }

  /** Appends `seq` at the end. */
  append(seq: number): void {
    this.tail.push(seq);
    this.setWhere(seq, TAIL);
    this.length++;
  }

  /** Replaces the range a..b (whose seqs are `shadowed`) by `seq`. */
  replace(a: SurfaceLocation, b: SurfaceLocation, shadowed: readonly number[], seq: number): void {
    for (const s of shadowed) this.setWhere(s, OFF);
    this.setWhere(seq, a.block);
    this.starts = null;
    if (a.block === b.block && a.index === b.index && a.block !== TAIL && this.mod?.has(a.block) !== true) {
      (this.subst ??= []).push(a.block, a.index, seq);
    } else if (a.block === b.block) {
      const arr = this.cow(a.block);
      arr.splice(a.index, b.index - a.index + 1, seq);
      if (a.block !== TAIL && b.index !== a.index) this.startsDirty = true;
    } else {
      this.startsDirty = true;
      const first = this.cow(a.block);
      first.length = a.index;
      first.push(seq);
      const order = this.currentOrder();
      const pa = this.posOf(a.block);
      if (b.block === TAIL) {
        this.tail = this.tail.slice(b.index + 1);
        for (const s of this.tail) this.setWhere(s, TAIL);
        this.order = order.slice(0, pa + 1);
      } else {
        const pb = this.posOf(b.block);
        const rest = this.cow(b.block);
        rest.splice(0, b.index + 1);
        this.order = [...order.slice(0, pa + 1), ...order.slice(pb)];
      }
      this.orderPos = null;
    }
    this.length -= shadowed.length - 1;
    this.replaces++;
  }
}
