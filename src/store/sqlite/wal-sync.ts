/**
 * The WAL sync worker of durability 'full' in background mode (see WalSync).
 */
import fs from 'node:fs';
import { dirname } from 'node:path';

/**
 * Background durability for WAL mode under synchronous=NORMAL: SQLite has written (write(2)) every
 * committed frame to the WAL file when COMMIT returns; an fdatasync of that file started after the
 * commit makes it durable (fsync covers the file, whichever descriptor wrote it; fdatasync includes
 * the file size). Checkpoints keep their own syncs (synchronous=NORMAL syncs the WAL before and the
 * database after each checkpoint), so frames a checkpoint moves into the database stay durable.
 *
 * `owe()` after each commit; `request()` resolves once a sync that *started after* every commit
 * owed so far completed. At most one fdatasync runs at a time; commits made while it runs share the
 * next one. A failed fdatasync is fatal for the store (after a failed fsync the page cache state is
 * unknown, retrying proves nothing): that and every later request reject with the error.
 */
export class WalSync {
  completed = 0;
  private fd = -1;
  private running = false;
  /** Commits not covered by a started sync. */
  private dirty = false;
  /** Waiters for the sync in flight, and for the next one. */
  private current: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  private next: Array<{ resolve: () => void; reject: (e: unknown) => void }> = [];
  private failed: unknown = undefined;
  private hasFailed = false;
  /** Run once when the sync in flight ends, before the next one starts (see afterSync). */
  private ending: Array<() => void> = [];

  constructor(private readonly walPath: string) {}

  /** True once an fdatasync failed (the store is fail-stop from then on). */
  get broken(): boolean {
    return this.hasFailed;
  }

  /** The failed sync's error. */
  get error(): unknown {
    return this.failed;
  }

  /** True while some commit is not known durable. */
  get owed(): boolean {
    return this.dirty || this.running;
  }

  owe(): void {
    this.dirty = true;
  }

  /** True while an fdatasync runs. */
  get syncing(): boolean {
    return this.running;
  }

  /**
   * Runs `fn` once when the fdatasync in flight ends (or fails), after its waiters were resolved
   * and before the next sync starts: a commit `fn` makes is covered by that next sync. A group
   * commit holds the calls that arrive while a sync runs and writes them here, as one group
   * (group-commit.ts). At once if no sync runs.
   */
  afterSync(fn: () => void): void {
    if (this.running) this.ending.push(fn);
    else fn();
  }

  request(): Promise<void> {
    if (this.hasFailed) return Promise.reject(this.failed);
    return new Promise<void>((resolve, reject) => {
      // In flight and nothing new owed: the running sync covers every commit so far.
      if (this.running && !this.dirty) this.current.push({ resolve, reject });
      else this.next.push({ resolve, reject });
      if (!this.running) this.start();
    });
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -1;
  }

  private start(): void {
    if (this.next.length === 0) return;
    if (this.fd < 0) {
      try {
        // Read-write: fdatasync on a read-only descriptor fails on some platforms (Windows).
        this.fd = fs.openSync(this.walPath, 'r+');
        // The WAL file may be new: its directory entry must be durable too (once).
        const dir = fs.openSync(dirname(this.walPath), 'r');
        try {
          fs.fsyncSync(dir);
        } finally {
          fs.closeSync(dir);
        }
      } catch (error) {
        this.fail(error);
        return;
      }
    }
    this.running = true;
    this.dirty = false;
    this.current = this.next;
    this.next = [];
    fs.fdatasync(this.fd, (error) => {
      this.running = false;
      const waiters = this.current;
      this.current = [];
      if (error) {
        this.next = [...waiters, ...this.next];
        this.fail(error);
        return;
      }
      this.completed++;
      for (const w of waiters) w.resolve();
      this.runEnding();
      // Commits owed meanwhile (and any the callbacks made): their waiters are in `next`.
      if (!this.running && this.next.length > 0) this.start();
    });
  }

  private runEnding(): void {
    const ending = this.ending;
    this.ending = [];
    for (const fn of ending) fn();
  }

  private fail(error: unknown): void {
    this.hasFailed = true;
    this.failed = error;
    const waiters = [...this.current, ...this.next];
    this.current = [];
    this.next = [];
    for (const w of waiters) w.reject(error);
    // Calls held for the sync's end are refused now (the store is broken).
    this.runEnding();
  }
}
