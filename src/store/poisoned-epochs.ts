/**
 * The write-pipeline epochs that had a failed append (see SessionStore.append): every later
 * append of such an epoch is refused. Bounded: the oldest entries are forgotten first (a pipeline
 * that failed long ago has no append in flight any more).
 */
export class PoisonedEpochs {
  readonly #set = new Set<string>();

  constructor(private readonly capacity = 10_000) {}

  /** Marks an epoch failed. */
  add(epoch: string): void {
    this.#set.add(epoch);
    if (this.#set.size > this.capacity) {
      const oldest = this.#set.values().next().value;
      if (oldest !== undefined) this.#set.delete(oldest);
    }
  }

  /** Whether an epoch had a failed append. */
  has(epoch: string): boolean {
    return this.#set.has(epoch);
  }
}
