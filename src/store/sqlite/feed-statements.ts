/**
 * The session feed's reads and retention on SQLite (issue #35, the port's `readFeed`, `feedEnd`,
 * `feedPrunedUpTo` and `pruneFeed`; schema.ts FEED_SQL): the feed's positions are global
 * (AUTOINCREMENT, never reused), each tenant's records read through feed_by_tenant. So a tenant's
 * positions have holes (other tenants' records), and the highest position pruned per tenant is
 * kept in feed_pruned (migration 8) rather than derived.
 *
 * A prune is one transaction (on the store's own connection, off the write path): the records
 * before the first one recorded at or after `before` (a prefix by position, so a prefix of every
 * tenant's records; found by walking the primary key from the oldest record, i.e. over the rows
 * being removed), except each tenant's last record, which keeps feedEnd (and from_now) where it
 * was. First each affected tenant's highest removed position goes to feed_pruned, then the DELETE
 * with the same condition.
 */
import type Database from 'better-sqlite3';
import type { FeedQuery, FeedRecord } from '../../app/store-port.js';
import { decodeFeedRow, type RawFeedRow } from './row-codec.js';

/**
 * What a feed read may answer at once (the store's `readFeed`): the records the writer thread's
 * gate knows durable. `durableUpTo` is undefined when nothing visible is owed a sync (all of
 * `records` are durable), else the highest position known durable. The records above it were
 * committed by a group whose background sync has not ended: they are left for the next read (the
 * session feed reads again when that group's writes are answered, which pokes it), and only a
 * read with none known durable waits for the sync (`wait`, the store's rule for every read); an
 * empty read answers at once (it showed nothing). So a feed record is delivered once ITS group is
 * durable, not once the group committed after it is.
 */
export function durableFeedRecords(
  records: FeedRecord[],
  durableUpTo: number | undefined,
  wait: (records: FeedRecord[]) => FeedRecord[] | Promise<FeedRecord[]>,
): FeedRecord[] | Promise<FeedRecord[]> {
  if (records.length === 0) return records; // nothing seen, nothing to wait for
  if (durableUpTo === undefined) return wait(records);
  let n = 0;
  while (n < records.length && records[n]!.position <= durableUpTo) n++;
  if (n === 0) return wait(records);
  return n === records.length ? records : records.slice(0, n);
}

/** The statements of the feed, prepared once per connection. */
export interface FeedStatements {
  /** The tenant's records after `query.after`, at most `query.limit`. */
  readFeed(query: FeedQuery): FeedRecord[];
  /** The tenant's last position (0 when it has none). */
  feedEnd(tenant: string): number;
  /** The highest position pruned from the tenant's records (0 when none was). */
  feedPrunedUpTo(tenant: string): number;
  /** Removes the records older than `before` (ms), each tenant's last one kept; returns how many. */
  pruneFeed(before: number): number;
}

/** The records a prune removes: `@before` (ms) binds the cutoff time. */
const PRUNED = `position < coalesce((SELECT position FROM feed WHERE time >= @before ORDER BY position LIMIT 1), 9007199254740991)
        AND position NOT IN (SELECT max(position) FROM feed GROUP BY tenant)`;

/** Prepares the feed's statements on `db`. */
export function feedStatements(db: Database.Database): FeedStatements {
  const read = db.prepare(
    `SELECT position, tenant, session_id, kind, created_at, next_seq, event_count, surface_length, event_types, labels, previous_labels, time
     FROM feed WHERE tenant = ? AND position > ? ORDER BY position LIMIT ?`,
  ).raw();
  const end = db.prepare('SELECT max(position) FROM feed WHERE tenant = ?').pluck();
  const mark = db.prepare('SELECT position FROM feed_pruned WHERE tenant = ?').pluck();
  const marks = db.prepare(
    `INSERT INTO feed_pruned (tenant, position) SELECT tenant, max(position) FROM feed WHERE ${PRUNED} GROUP BY tenant
       ON CONFLICT (tenant) DO UPDATE SET position = max(position, excluded.position)`,
  );
  const remove = db.prepare(`DELETE FROM feed WHERE ${PRUNED}`);
  const prune = db.transaction((before: number): number => {
    marks.run({ before });
    return remove.run({ before }).changes;
  });
  return {
    readFeed: (query) => {
      if (query.limit <= 0) return [];
      return (read.all(query.tenant, Math.max(0, Math.floor(query.after)), query.limit) as RawFeedRow[]).map(decodeFeedRow);
    },
    feedEnd: (tenant) => (end.get(tenant) as number | null) ?? 0,
    feedPrunedUpTo: (tenant) => (mark.get(tenant) as number | undefined) ?? 0,
    pruneFeed: (before) => prune(Math.floor(before)),
  };
}
