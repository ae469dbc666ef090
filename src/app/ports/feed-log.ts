/** Store port, feed log role: each tenant's session feed records (issue #35). */

/** What changed in a session feed record (see {@link FeedRecord}). */
export type FeedChangeKind = 'created' | 'deleted' | 'labels_changed' | 'appended';

/**
 * One change of one session, as the store recorded it in the transaction of the change itself
 * (issue #35, the session feed). Records of a tenant are read by `position`, which increases in
 * commit order within the tenant and is never reused: a reader resuming after a position gets every
 * later change exactly once, whichever process or replica committed it.
 */
export interface FeedRecord {
  /** The record's position in its tenant's feed (> 0). */
  readonly position: number;
  readonly tenant: string;
  /** The session's storage key (tenant-prefixed when authentication is on, see tenant-scope.ts). */
  readonly sessionId: string;
  readonly kind: FeedChangeKind;
  /** The session's creation time (its incarnation: a re-created id has another one). */
  readonly createdAt: number;
  /** The session's next seq after the change (the head seq is nextSeq - 1; 0 = empty log). */
  readonly nextSeq: number;
  /** Events stored after the change. */
  readonly eventCount: number;
  /** Surface length after the last append (0 until the first append through the service). */
  readonly surfaceLength: number;
  /** 'appended': the distinct types of the appended events, in first-appearance order; else empty. */
  readonly eventTypes: readonly string[];
  /** The session's labels after the change (before it for 'deleted'). */
  readonly labels: Readonly<Record<string, string>>;
  /** 'labels_changed': the labels before the change; else undefined. */
  readonly previousLabels: Readonly<Record<string, string>> | undefined;
  /** When the store recorded the change (ms since epoch, the database's clock). */
  readonly time: number;
}

/** A page of a tenant's feed. */
export interface FeedQuery {
  readonly tenant: string;
  /** Records with a position above this one (0 = from the beginning). */
  readonly after: number;
  /** At most this many records (ascending positions). */
  readonly limit: number;
}

/** The feed log role of the store port. */
export interface FeedLog {
  /**
   * The tenant's feed records after `query.after`, ascending by position (issue #35). Every
   * create (and import publish), delete, labels change and append is recorded in the transaction
   * of the change, so what a read returns is committed and no record below a returned position
   * can appear later. A read may return fewer than `limit` records while more are committed but
   * not yet durable (SQLite's writer thread under a background sync): a short read is the end as of
   * now, and the change that made the rest durable pokes the session feed again.
   */
  readFeed(query: FeedQuery): Promise<FeedRecord[]>;
  /** The position of the tenant's last feed record (0 when it has none): where `from_now` starts. */
  feedEnd(tenant: string): Promise<number>;
  /**
   * The highest position feed retention removed from the tenant's records (0 when none was).
   * Retention removes a prefix of each tenant's records, never its last one, so a reader after a
   * position below this mark has missed pruned records (FEED_POSITION_EXPIRED), and one at or above
   * it has not, whether the store's positions are dense per tenant or shared by all tenants.
   */
  feedPrunedUpTo(tenant: string): Promise<number>;
  /**
   * Feed retention (issue #35): removes the feed records of every tenant recorded before `before` (ms since
   * epoch, the store's clock), in one transaction, keeping each tenant's last record (where
   * `from_now` and positions continue). Returns the number of records removed. Runs off the write
   * path (a periodic sweep).
   */
  pruneFeed(before: number): Promise<number>;
}
