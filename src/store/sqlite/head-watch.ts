/**
 * Head notifications for commits made by other connections to the same SQLite file (another
 * `palimpsest serve` process, or another store instance). `PRAGMA data_version` changes only when
 * another connection committed, and costs no I/O beyond the shared-memory header, so the watch polls
 * it (every `pollMs`, only while some session is watched) and reads the heads of the watched
 * sessions only when it moved. A changed head (or a vanished session) is reported to the
 * session's watchers; the report is a hint, readers read the events by seq.
 *
 * The store's own writer thread (append-thread.ts) is another connection too: its commits move
 * `data_version` before the store has acknowledged (and the app published) them. So the store
 * tells the watch the heads its own groups moved once acknowledged (`own`), and a head that its
 * own appends still in flight may have written (at most their planned next seq) is not reported
 * but looked at again at the next poll. A commit of another process within that range conflicts
 * with those appends, and its events reach subscribers through their gap check or that re-check.
 */
import type Database from 'better-sqlite3';
import type { HeadWatch } from '../../app/store-port.js';

type OnHead = (head: number | 'deleted') => void;

interface Watched {
  /** The head last seen (undefined: the session was not visible). */
  head: number | undefined;
  /** Its created_at: a session deleted and re-created between two polls is reported deleted. */
  createdAt: number | undefined;
  readonly listeners: Set<OnHead>;
  /** Since when a changed head is held back for this store's appends in flight (ms), if it is. */
  heldSince: number | undefined;
}

/**
 * How long a changed head is held back at most (appends of this store in flight that never
 * succeed, e.g. refused over and over), ms: then it is reported anyway (a spurious report costs a
 * subscription one catch-up read).
 */
const MAX_HOLD_MS = 1000;

/** The SQLite {@link HeadWatch} (see the module comment). */
export class SqliteHeadWatch implements HeadWatch {
  readonly #sessions = new Map<string, Watched>();
  readonly #selectHead: Database.Statement;
  #timer: NodeJS.Timeout | undefined;
  #version = 0;
  #closed = false;
  /** A session was skipped because of appends of this store in flight: poll it again. */
  #recheck = false;

  constructor(
    private readonly db: Database.Database,
    private readonly pollMs: number,
    private readonly storeClosed: () => boolean,
    /** The next seq the store's own appends in flight for a session may have made visible (undefined: none in flight). */
    private readonly ownPlanned: (sessionId: string) => number | undefined = () => undefined,
  ) {
    this.#selectHead = db.prepare('SELECT next_seq, created_at FROM sessions WHERE id = ? AND pending = 0').raw();
  }

  watch(sessionId: string, onHead: OnHead): () => void {
    if (this.#closed || this.storeClosed()) return () => undefined;
    let w = this.#sessions.get(sessionId);
    if (w === undefined) {
      if (this.#sessions.size === 0) this.#start();
      const row = this.#selectHead.get(sessionId) as [number, number] | undefined;
      w = { head: row?.[0], createdAt: row?.[1], listeners: new Set(), heldSince: undefined };
      this.#sessions.set(sessionId, w);
    }
    const watched = w;
    watched.listeners.add(onHead);
    return () => {
      watched.listeners.delete(onHead);
      if (watched.listeners.size === 0 && this.#sessions.get(sessionId) === watched) {
        this.#sessions.delete(sessionId);
        if (this.#sessions.size === 0) this.#stop();
      }
    };
  }

  /** A head this store's own commit moved, once acknowledged: not reported (the app publishes it). */
  own(sessionId: string, createdAt: number, nextSeq: number): void {
    const w = this.#sessions.get(sessionId);
    if (w === undefined) return;
    // A session watched before it was visible: its first head is this incarnation's.
    if (w.createdAt === undefined) w.createdAt = createdAt;
    if (w.createdAt === createdAt && (w.head === undefined || nextSeq > w.head)) {
      w.head = nextSeq;
      w.heldSince = undefined;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#sessions.clear();
    this.#stop();
  }

  #start(): void {
    this.#version = this.db.pragma('data_version', { simple: true }) as number;
    this.#timer = setInterval(() => this.#poll(), this.pollMs);
    this.#timer.unref();
  }

  #stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #poll(): void {
    if (this.storeClosed()) {
      void this.close();
      return;
    }
    let changed: Array<[Watched, [number, number] | undefined]>;
    try {
      const version = this.db.pragma('data_version', { simple: true }) as number;
      if (version === this.#version && !this.#recheck) return;
      this.#version = version;
      this.#recheck = false;
      changed = [];
      for (const [id, w] of this.#sessions) {
        const row = this.#selectHead.get(id) as [number, number] | undefined;
        if (row?.[0] === w.head && row?.[1] === w.createdAt) continue;
        if (row !== undefined && row[1] === w.createdAt) {
          const planned = this.ownPlanned(id);
          if (planned !== undefined && row[0] <= planned) {
            const now = Date.now();
            w.heldSince ??= now;
            if (now - w.heldSince < MAX_HOLD_MS) {
              this.#recheck = true;
              continue;
            }
          }
        }
        w.heldSince = undefined;
        changed.push([w, row]);
      }
    } catch {
      return; // the store is failing (or closing): its own calls report why
    }
    for (const [w, row] of changed) {
      const recreated = row !== undefined && w.createdAt !== undefined && row[1] !== w.createdAt;
      w.head = row?.[0];
      w.createdAt = row?.[1];
      for (const l of [...w.listeners]) {
        if (row === undefined || recreated) l('deleted');
        else l(row[0]);
      }
    }
  }
}

/**
 * Writer thread: a store's appends in flight per session, and the highest next seq they planned
 * (the head watch does not report the commits of its own store).
 */
export class OwnAppends {
  readonly #inflight = new Map<string, { count: number; planned: number }>();

  /** The highest next seq this store's appends in flight of the session planned, if any. */
  planned(sessionId: string): number | undefined {
    return this.#inflight.get(sessionId)?.planned;
  }

  /** Counts an append of this store in flight for the head watch; returns what to call when it settles. */
  add(sessionId: string, planned: number): () => void {
    const own = this.#inflight.get(sessionId);
    if (own === undefined) this.#inflight.set(sessionId, { count: 1, planned });
    else {
      own.count++;
      if (planned > own.planned) own.planned = planned;
    }
    return () => {
      const o = this.#inflight.get(sessionId);
      if (o !== undefined && --o.count === 0) this.#inflight.delete(sessionId);
    };
  }
}
