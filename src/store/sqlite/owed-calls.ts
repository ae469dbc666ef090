/**
 * The calls a writer thread owes answers to. Their ids are consecutive (the next id is always the
 * last plus one), so a call sits at `id - first` in one array, and an answered slot is cleared at
 * once. Not a Map: V8 links a Map's replaced tables, so one set and cleared per call promotes
 * what it holds (bench/README.md, sixth round).
 */
export class OwedCalls<T> {
  #calls: (T | undefined)[] = [];
  /** The id of `#calls[0]`. */
  #first = 0;
  /** Index of the oldest slot that may be unanswered. */
  #head = 0;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Adds a call; its id must follow the last one added (any id when none is owed). */
  add(id: number, call: T): void {
    if (this.#calls.length === 0) this.#first = id;
    else if (id !== this.#first + this.#calls.length) throw new Error(`OwedCalls: id ${id} does not follow ${this.#first + this.#calls.length - 1}`);
    this.#calls.push(call);
    this.#size++;
  }

  /** Removes and returns the call with `id` (undefined when none is owed). */
  take(id: number): T | undefined {
    const i = id - this.#first;
    if (i < this.#head || i >= this.#calls.length) return undefined;
    const call = this.#calls[i];
    if (call === undefined) return undefined;
    this.#calls[i] = undefined;
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
    this.#calls = [];
    this.#head = 0;
    this.#size = 0;
    return out;
  }

  #advance(): void {
    const calls = this.#calls;
    while (this.#head < calls.length && calls[this.#head] === undefined) this.#head++;
    if (this.#head === calls.length) {
      calls.length = 0;
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= calls.length) {
      // Under steady load the array never empties: drop the answered prefix now and then.
      calls.splice(0, this.#head);
      this.#first += this.#head;
      this.#head = 0;
    }
  }
}
