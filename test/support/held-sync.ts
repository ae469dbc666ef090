/**
 * A WAL sync (src/store/sqlite/wal-sync.ts) whose completion the test decides: `request()` starts
 * one and `finish()` completes every sync requested so far, so a test can hold a group's
 * durability and look at what the store does meanwhile.
 */
export class HeldSync {
  dirty = false;
  running = false;
  readonly broken = false;
  readonly error = undefined;
  completed = 0;
  #waiters: (() => void)[] = [];
  get owed(): boolean {
    return this.dirty || this.running;
  }
  owe(): void {
    this.dirty = true;
  }
  request(): Promise<void> {
    this.running = true;
    this.dirty = false;
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
  /** Completes every sync requested so far. */
  finish(): void {
    const w = this.#waiters;
    this.#waiters = [];
    this.running = false;
    this.completed++;
    for (const r of w) r();
  }
}
