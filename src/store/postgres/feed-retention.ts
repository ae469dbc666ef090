/**
 * Feed retention on PostgreSQL (issue #35, the port's `feedPrunedUpTo` / `pruneFeed`): positions are
 * dense per tenant (feed_heads, schema.ts), so a resume after `p` misses records exactly when the
 * oldest kept position is above `p + 1`.
 *
 * A prune is one DELETE statement (one transaction, off the write path): the records recorded
 * before `before` (ms, the database's clock, which also stamped them: a prefix of each tenant's
 * positions), except the tenant's last record (position = its feed_heads position). It only reads
 * feed_heads, so it never waits for nor blocks a writer's feed lock; the scan is sequential (no
 * index on time), acceptable for a sweep that runs once per retention interval.
 */

/** The SQL of feed retention for the schema `s` (a quoted identifier). */
export function feedRetentionSql(s: string): { readonly feedPrunedUpTo: string; readonly pruneFeed: string } {
  return {
    // $1 tenant -> the highest pruned position: positions are dense per tenant from 1, and a prune
    // keeps the tenant's last record, so it is the oldest kept one's minus one (0: no records).
    feedPrunedUpTo: `SELECT coalesce(min(position) - 1, 0) AS position FROM ${s}.feed WHERE tenant = $1`,
    // $1 before (ms) -> n, the records removed.
    pruneFeed: `WITH d AS (DELETE FROM ${s}.feed AS f USING ${s}.feed_heads AS h
                 WHERE f.tenant = h.tenant AND f.position < h.position AND f.time < $1 RETURNING 1)
                SELECT count(*)::int AS n FROM d`,
  };
}
