/**
 * Feed retention on SQLite (issue #35, the port's `feedStart` / `pruneFeed`): the feed's positions
 * are global (AUTOINCREMENT, never reused), each tenant's records read through feed_by_tenant.
 *
 * A prune is one DELETE (one transaction, on the store's own connection, off the write path): the
 * records before the first one recorded at or after `before` (a prefix by position, so a prefix of
 * every tenant's records; found by walking the primary key from the oldest record, i.e. over the
 * rows being removed), except each tenant's last record, which keeps feedEnd (and from_now) where
 * it was.
 */
import type Database from 'better-sqlite3';

/** The statements of feed retention, prepared once per connection. */
export interface FeedRetentionStatements {
  /** The tenant's oldest kept position (0 when it has no records). */
  feedStart(tenant: string): number;
  /** Removes the records older than `before` (ms), each tenant's last one kept; returns how many. */
  pruneFeed(before: number): number;
}

/** Prepares feed retention's statements on `db`. */
export function feedRetentionStatements(db: Database.Database): FeedRetentionStatements {
  const start = db.prepare('SELECT min(position) FROM feed WHERE tenant = ?').pluck();
  const prune = db.prepare(
    `DELETE FROM feed
      WHERE position < coalesce((SELECT position FROM feed WHERE time >= ? ORDER BY position LIMIT 1), 9007199254740991)
        AND position NOT IN (SELECT max(position) FROM feed GROUP BY tenant)`,
  );
  return {
    feedStart: (tenant) => (start.get(tenant) as number | null) ?? 0,
    pruneFeed: (before) => prune.run(Math.floor(before)).changes,
  };
}
