/**
 * The PostgreSQL search index's follower (issue #40, schema 6): the index is kept off the append
 * path by following the session feed, in batches of many events per transaction, one indexer at
 * a time across every replica (a transaction-scoped advisory lock; a replica that does not get it
 * answers `busy` and tries again later).
 *
 * - search_follow.position per tenant: the tenant's feed records at or below it are indexed. A
 *   tenant's positions are consecutive and commit in order (schema.ts), so a record never appears
 *   below a position read, and a gap after the mark means retention removed records unread: the
 *   tenant's sessions whose progress is behind their next_seq are then caught up by a scan.
 * - Per record, the session's row is read FOR KEY SHARE (appends, which update other columns, go
 *   on; a delete waits for the batch and then removes what it indexed), its events from its
 *   progress to its next_seq are indexed by search_index_range, and the progress moves.
 */
import type pg from 'pg';
import type { SearchFollowBatch, SearchLag } from '../../app/search-port.js';

/** Feed records read per tenant per batch. */
const RECORDS_PER_BATCH = 1000;

/** Indexes session `sid` from its progress to its next_seq (in the caller's transaction); returns the events covered. */
async function followSession(c: pg.PoolClient, s: string, sid: string): Promise<number> {
  const row = await c.query<{ next_seq: number; from: number | null }>(
    `SELECT x.next_seq, (SELECT p.next_seq FROM ${s}.search_progress p WHERE p.session_id = x.id) AS from
       FROM ${s}.sessions x WHERE x.id = $1 AND x.pending_owner IS NULL FOR KEY SHARE OF x`, [sid]);
  const r = row.rows[0];
  if (r === undefined) return 0;
  const from = Number(r.from ?? 0);
  const to = Number(r.next_seq);
  if (from >= to) return 0;
  await c.query(`SELECT ${s}.search_index_range($1, $2, $3)`, [sid, from, to]);
  await c.query(`INSERT INTO ${s}.search_progress (session_id, next_seq) VALUES ($1, $2)
    ON CONFLICT (session_id) DO UPDATE SET next_seq = EXCLUDED.next_seq`, [sid, to]);
  return to - from;
}

/** The tenants whose feed is ahead of the index: [tenant, mark, head]. */
async function behind(q: pg.Pool | pg.PoolClient, s: string): Promise<[string, number, number][]> {
  const res = await q.query<{ tenant: string; mark: number; head: number }>(`SELECT h.tenant, coalesce(m.position, 0) AS mark, h.position AS head
    FROM ${s}.feed_heads h LEFT JOIN ${s}.search_follow m ON m.tenant = h.tenant WHERE h.position > coalesce(m.position, 0) ORDER BY h.tenant`);
  return res.rows.map((r) => [r.tenant, Number(r.mark), Number(r.head)]);
}

/** One batch (see the module comment); `lockKey` is the advisory lock's key. */
export async function followPostgresFeed(pool: pg.Pool, s: string, maxEvents: number): Promise<SearchFollowBatch> {
  if ((await behind(pool, s)).length === 0) return { events: 0, caughtUp: true };
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const got = await c.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock(hashtext('palimpsest search follower ' || $1)) AS ok", [s]);
    if (!got.rows[0]!.ok) {
      await c.query('ROLLBACK');
      return { events: 0, caughtUp: false, busy: true };
    }
    let events = 0;
    let caughtUp = true;
    for (const [tenant, start, head] of await behind(c, s)) {
      let mark = start;
      const records = await c.query<{ position: number; session_id: string }>(
        `SELECT position, session_id FROM ${s}.feed WHERE tenant = $1 AND position > $2 ORDER BY position LIMIT $3`, [tenant, mark, RECORDS_PER_BATCH]);
      if (records.rows.length === 0 || Number(records.rows[0]!.position) !== mark + 1) {
        // Records retention removed before they were followed: every session of the tenant that is behind.
        const ids = await c.query<{ id: string }>(`SELECT x.id FROM ${s}.sessions x LEFT JOIN ${s}.search_progress p ON p.session_id = x.id
          WHERE x.tenant = $1 AND x.pending_owner IS NULL AND x.next_seq > coalesce(p.next_seq, 0)`, [tenant]);
        for (const { id } of ids.rows) events += await followSession(c, s, id);
        mark = head;
      } else {
        for (const r of records.rows) {
          events += await followSession(c, s, r.session_id);
          mark = Number(r.position);
          if (events >= maxEvents) break;
        }
      }
      await c.query(`INSERT INTO ${s}.search_follow (tenant, position) VALUES ($1, $2) ON CONFLICT (tenant) DO UPDATE SET position = EXCLUDED.position`, [tenant, mark]);
      if (mark < head) caughtUp = false;
      if (events >= maxEvents) {
        caughtUp = false;
        break;
      }
    }
    await c.query('COMMIT');
    return { events, caughtUp };
  } catch (e) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw e;
  } finally {
    c.release();
  }
}

/** How far the index is behind the feed. */
export async function postgresSearchLag(pool: pg.Pool, s: string, now = Date.now()): Promise<SearchLag> {
  const res = await pool.query<{ events: number | null; oldest: number | null }>(`
    WITH pending AS (
      SELECT f.session_id, f.time FROM ${s}.feed f LEFT JOIN ${s}.search_follow m ON m.tenant = f.tenant WHERE f.position > coalesce(m.position, 0)
    )
    SELECT (SELECT sum(x.next_seq - coalesce(p.next_seq, 0)) FROM ${s}.sessions x LEFT JOIN ${s}.search_progress p ON p.session_id = x.id
             WHERE x.pending_owner IS NULL AND x.id IN (SELECT session_id FROM pending)) AS events,
           (SELECT min(time) FROM pending) AS oldest`);
  const r = res.rows[0]!;
  return { events: Number(r.events ?? 0), seconds: r.oldest === null ? 0 : Math.max(0, (now - Number(r.oldest)) / 1000) };
}

/** The tenant's sessions with feed records not followed yet. */
export async function postgresLaggingSessions(pool: pg.Pool, s: string, tenant: string): Promise<Set<string>> {
  const res = await pool.query<{ session_id: string }>(`SELECT DISTINCT f.session_id FROM ${s}.feed f
    WHERE f.tenant = $1 AND f.position > coalesce((SELECT position FROM ${s}.search_follow WHERE tenant = $1), 0)`, [tenant]);
  return new Set(res.rows.map((r) => r.session_id));
}
