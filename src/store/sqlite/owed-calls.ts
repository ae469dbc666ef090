/**
 * The calls a writer thread owes answers to, by ascending id (the thread answers them nearly in
 * order). Two parallel arrays from the oldest unanswered id on, not a Map: a Map set and cleared
 * per call keeps rehashing, and V8 links each replaced table to its successor, so a table that
 * reached the old generation keeps every later table (and the calls' closures, and what they
 * hold) alive through young-generation collections until a full collection
 * (bench/README.md, sixth round). An answered slot is cleared at once.
 */
export class OwedCalls<T> {
  #ids: number[] = [];
  #calls: (T | undefined)[] = [];
  /** Index of the oldest slot that may be unanswered. */
  #head = 0;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Adds a call; ids must ascend. */
  add(id: number, call: T): void {
    const last = this.#ids[this.#ids.length - 1];
    if (last !== undefined && id <= last) throw new Error(`OwedCalls: id ${id} does not ascend (last ${last})`);
    this.#ids.push(id);
    this.#calls.push(call);
    this.#size++;
  }

  /** Removes and returns the call with `id` (undefined when none is owed). */
  take(id: number): T | undefined {
    const ids = this.#ids;
    let lo = this.#head;
    let hi = ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (ids[mid]! < id) lo = mid + 1;
      else hi = mid;
    }
    if (lo >= ids.length || ids[lo] !== id) return undefined;
    const call = this.#calls[lo];
    if (call === undefined) return undefined;
    this.#calls[lo] = undefined;
    this.#size--;
    this.#advance();
    return call;
  }

  /** Removes and returns every owed call, oldest first. */
  takeAll(): T[] {
    const out: T[] = [];
    for (let i = this.#head; i < this.#calls.length; i++) {
      const c = this.#calls[i];
      if (c !== undefined) out.push(c);
    }
    this.#ids = [];
    this.#calls = [];
    this.#head = 0;
    this.#size = 0;
    return out;
  }

  #advance(): void {
    const calls = this.#calls;
    while (this.#head < calls.length && calls[this.#head] === undefined) this.#head++;
    if (this.#head === calls.length) {
      this.#ids.length = 0;
      calls.length = 0;
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= calls.length) {
      // Out-of-order answers left a long answered prefix: drop it.
      this.#ids.splice(0, this.#head);
      calls.splice(0, this.#head);
      this.#head = 0;
    }
  }
}
