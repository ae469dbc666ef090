/**
 * The PostgreSQL search index's follower (issue #40, schema 7): the index is kept off the append
 * path by following the session feed, in batches of many events per transaction, one indexer at
 * a time across every replica (a transaction-scoped advisory lock; a replica that does not get it
 * answers `busy` and tries again later).
 *
 * - search_follow.position per tenant: the tenant's feed records at or below it are indexed. A
 *   tenant's positions are consecutive and commit in order (schema.ts), so a record never appears
 *   below a position read, and a gap after the mark means retention removed records unread: the
 *   tenant's sessions whose progress is behind their next_seq are then caught up by a scan.
 * - The sessions the batch's records name are read FOR KEY SHARE (appends lock their row FOR NO
 *   KEY UPDATE, which does not conflict, so they go on; a delete waits for the batch and then
 *   removes what it indexed); each one's events from its progress to its next_seq are read,
 *   their entries computed in node and written by one set-wise statement for the whole batch
 *   (search-docs.ts), and the progress moves.
 * - A batch commits asynchronously (synchronous_commit off): it adds no WAL flush wait of its own,
 *   and a crash loses at most the last batches, atomically, which the follower does again.
 */
import type pg from 'pg';
import type { SearchFollowBatch, SearchLag } from '../../app/search-port.js';
import { indexRanges } from './search-docs.js';

/** Feed records read per tenant per batch. */
const RECORDS_PER_BATCH = 1000;

/** Ranges to index, gathered over a batch's records. */
class Ranges {
  readonly ids: string[] = [];
  readonly lo: number[] = [];
  readonly hi: number[] = [];
  events = 0;

  /** Session rows, FOR KEY SHARE (appends go on; a delete waits for the batch), with their progress. */
  static async read(c: pg.PoolClient, s: string, ids: readonly string[]): Promise<Map<string, [number, number]>> {
    const res = await c.query<{ id: string; next_seq: number; from: number | null }>(
      `SELECT x.id, x.next_seq, p.next_seq AS from FROM ${s}.sessions x LEFT JOIN ${s}.search_progress p ON p.session_id = x.id
        WHERE x.id = ANY($1::text[]) AND x.pending_owner IS NULL FOR KEY SHARE OF x`, [ids]);
    return new Map(res.rows.map((r) => [r.id, [Number(r.from ?? 0), Number(r.next_seq)]]));
  }

  add(id: string, span: [number, number] | undefined): void {
    if (span === undefined || span[0] >= span[1] || this.ids.includes(id)) return;
    this.ids.push(id);
    this.lo.push(span[0]);
    this.hi.push(span[1]);
    this.events += span[1] - span[0];
  }

  async index(c: pg.PoolClient, s: string): Promise<void> {
    if (this.ids.length === 0) return;
    await indexRanges(c, s, this.ids, this.lo, this.hi);
    await c.query(`INSERT INTO ${s}.search_progress (session_id, next_seq) SELECT * FROM unnest($1::text[], $2::bigint[])
      ON CONFLICT (session_id) DO UPDATE SET next_seq = EXCLUDED.next_seq`, [this.ids, this.hi]);
  }
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
    // The index is derived data: its batch does not wait for the WAL flush. A crash may lose the
    // last batches whole (entries, progress and marks together), and the follower does them again.
    await c.query('BEGIN; SET LOCAL synchronous_commit = off');
    const got = await c.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock(hashtext('palimpsest search follower ' || $1)) AS ok", [s]);
    if (!got.rows[0]!.ok) {
      await c.query('ROLLBACK');
      return { events: 0, caughtUp: false, busy: true };
    }
    const ranges = new Ranges();
    let caughtUp = true;
    for (const [tenant, start, head] of await behind(c, s)) {
      let mark = start;
      const records = await c.query<{ position: number; session_id: string }>(
        `SELECT position, session_id FROM ${s}.feed WHERE tenant = $1 AND position > $2 ORDER BY position LIMIT $3`, [tenant, mark, RECORDS_PER_BATCH]);
      if (records.rows.length === 0 || Number(records.rows[0]!.position) !== mark + 1) {
        // Records retention removed before they were followed: every session of the tenant that is behind.
        const ids = await c.query<{ id: string }>(`SELECT x.id FROM ${s}.sessions x LEFT JOIN ${s}.search_progress p ON p.session_id = x.id
          WHERE x.tenant = $1 AND x.pending_owner IS NULL AND x.next_seq > coalesce(p.next_seq, 0)`, [tenant]);
        const spans = await Ranges.read(c, s, ids.rows.map((r) => r.id));
        for (const [id, span] of spans) ranges.add(id, span);
        mark = head;
      } else {
        const spans = await Ranges.read(c, s, [...new Set(records.rows.map((r) => r.session_id))]);
        for (const r of records.rows) {
          ranges.add(r.session_id, spans.get(r.session_id));
          mark = Number(r.position);
          if (ranges.events >= maxEvents) break;
        }
      }
      await c.query(`INSERT INTO ${s}.search_follow (tenant, position) VALUES ($1, $2) ON CONFLICT (tenant) DO UPDATE SET position = EXCLUDED.position`, [tenant, mark]);
      if (mark < head) caughtUp = false;
      if (ranges.events >= maxEvents) {
        caughtUp = false;
        break;
      }
    }
    await ranges.index(c, s);
    const events = ranges.events;
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
