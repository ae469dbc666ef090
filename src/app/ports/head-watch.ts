/** Store port, head watch role: hints that a session's head moved because of another process's commit. */

/** Store-level head notifications: a hint only. */
export interface HeadWatch {
  /**
   * Calls `onHead(nextSeq)` (or `onHead('deleted')`) when the stored head of `sessionId` may have
   * moved because of a commit by another process or store instance over the same database
   * (duplicates and spurious calls allowed; subscribers read the events from the store by seq and
   * drop anything at or below their cursor). Commits made through this very store instance may or
   * may not be reported: the app publishes those itself. Returns the function that stops watching.
   */
  watch(sessionId: string, onHead: (head: number | 'deleted') => void): () => void;
  /**
   * Optional (the session feed, issue #35): calls `onChange(tenant)` when a session of `tenant`
   * may have changed through another process or store instance (PostgreSQL: a NOTIFY of the
   * schema's channel, its payload's storage key naming the tenant), and `onChange()` when any
   * tenant's may have (after every (re)connect of the LISTEN connection). A hint only: the feed
   * reads the store by position. Without it the feed polls. Returns the function that stops.
   */
  watchFeed?(onChange: (tenant?: string) => void): () => void;
  /**
   * Optional: calls `onDeleted(sessionId)` when a session may have been deleted through another
   * process or store instance (PostgreSQL: a deletion hint of the schema's channel), whether or not
   * it is watched, so the process drops what it holds of it (the hot-session cache, issue #33). A
   * hint only: it may come late, twice, or not at all. Returns the function that stops.
   */
  watchDeletes?(onDeleted: (sessionId: string) => void): () => void;
  /** Stops every watch. */
  close(): Promise<void>;
}

/** The head watch role of the store port. */
export interface HeadWatchSource {
  /** A head watch over this store's database (see {@link HeadWatch}); close it before the store. */
  openHeadWatch(): HeadWatch;
}
