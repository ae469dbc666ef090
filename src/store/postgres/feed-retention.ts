/**
 * Feed retention on PostgreSQL (issue #35, the port's `feedPrunedUpTo` / `pruneFeed`): positions are
 * dense per tenant (feed_heads, schema.ts), so a resume after `p` misses records exactly when the
 * oldest kept position is above `p + 1`.
 *
 * A prune is one DELETE statement (one transaction, off the write path): per tenant, the records
 * before its first one recorded at or after `before` (ms, the database's clock, which also
 * stamped them), except its last record (position = its feed_heads position). By position, not by
 * time: if the database's clock stepped back, a later record can carry an older time, and removing
 * it alone would leave a hole the mark above cannot show (a reader would skip it silently); so a
 * prune removes a prefix of each tenant's positions whatever the times say. It only reads
 * feed_heads, so it never waits for nor blocks a writer's feed lock; the cutoff walks each
 * tenant's records by position from its oldest (the primary key) up to the first recent one.
 */

/** The SQL of feed retention for the schema `s` (a quoted identifier). */
export function feedRetentionSql(s: string): { readonly feedPrunedUpTo: string; readonly pruneFeed: string } {
  return {
    // $1 tenant -> the highest pruned position: positions are dense per tenant from 1, and a prune
    // keeps the tenant's last record, so it is the oldest kept one's minus one (0: no records).
    feedPrunedUpTo: `SELECT coalesce(min(position) - 1, 0) AS position FROM ${s}.feed WHERE tenant = $1`,
    // $1 before (ms) -> n, the records removed.
    pruneFeed: `WITH c AS (SELECT h.tenant, least(h.position, coalesce((SELECT g.position FROM ${s}.feed AS g
                   WHERE g.tenant = h.tenant AND g.time >= $1 ORDER BY g.position LIMIT 1), h.position)) AS cut
                 FROM ${s}.feed_heads AS h),
                d AS (DELETE FROM ${s}.feed AS f USING c WHERE f.tenant = c.tenant AND f.position < c.cut RETURNING 1)
                SELECT count(*)::int AS n FROM d`,
  };
}
