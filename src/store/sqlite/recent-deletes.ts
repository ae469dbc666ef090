/**
 * The session incarnations this store deleted lately, remembered against late head lines: a group
 * commit of a session that committed just before its delete records its head once its sync ends
 * (head-record.ts), and that line must not bring the deleted incarnation back. Such a line comes
 * within a sync of the delete, so the latest deletes are enough: an entry is kept for `maxAgeMs`
 * (minutes, where a sync takes milliseconds to seconds) and at most `maxEntries` are kept.
 *
 * Why not one Set of `${createdAt} ${id}` strings, kept to the last 10,000 deletes: under steady
 * deletes (retention, a client rotating sessions) that Set grew for as long as the 10,000 took to
 * come (about 150 bytes per entry: two cons strings, the number's string, the id), which the soak
 * (bench/soak.md) saw as the only growing object of the server's heap. Here an entry is the id
 * (the caller's string), its incarnation and the time of the delete, and it leaves after
 * `maxAgeMs`: the set stays at the deletes of the last few minutes.
 */

/** How long a deleted incarnation is remembered (a sync ends long before). */
export const RECENT_DELETE_MS = 5 * 60_000;
/** At most this many are remembered, whatever their age. */
export const RECENT_DELETES_KEPT = 10_000;

export class RecentDeletes {
  /** id -> [createdAt, deletedAt, createdAt, deletedAt, ...] of its deleted incarnations, oldest id first. */
  readonly #byId = new Map<string, number[]>();
  #entries = 0;

  constructor(
    private readonly maxAgeMs = RECENT_DELETE_MS,
    private readonly maxEntries = RECENT_DELETES_KEPT,
    private readonly now: () => number = Date.now,
  ) {}

  /** Deleted incarnations remembered now. */
  get size(): number {
    return this.#entries;
  }

  /** Remembers that the incarnation `createdAt` of `id` was deleted now. */
  add(id: string, createdAt: number): void {
    const t = this.now();
    const list = this.#byId.get(id);
    // Moved to the end: the map stays ordered by each id's latest delete.
    if (list !== undefined) this.#byId.delete(id);
    this.#byId.set(id, list === undefined ? [createdAt, t] : [...list, createdAt, t]);
    this.#entries++;
    this.#prune(t);
  }

  /** True when the incarnation `createdAt` of `id` was deleted lately. */
  has(id: string, createdAt: number): boolean {
    const list = this.#byId.get(id);
    if (list === undefined) return false;
    for (let i = 0; i < list.length; i += 2) if (list[i] === createdAt) return true;
    return false;
  }

  /** Forgets `id`'s incarnation `createdAt` (its head was recorded again: it is live). */
  forget(id: string, createdAt: number): void {
    const list = this.#byId.get(id);
    if (list === undefined) return;
    const kept: number[] = [];
    for (let i = 0; i < list.length; i += 2) if (list[i] !== createdAt) kept.push(list[i]!, list[i + 1]!);
    this.#entries -= (list.length - kept.length) / 2;
    if (kept.length === 0) this.#byId.delete(id);
    else this.#byId.set(id, kept);
  }

  #prune(t: number): void {
    for (const [id, list] of this.#byId) {
      const newest = list[list.length - 1]!;
      if (this.#entries <= this.maxEntries && t - newest <= this.maxAgeMs) return;
      this.#byId.delete(id);
      this.#entries -= list.length / 2;
    }
  }
}
