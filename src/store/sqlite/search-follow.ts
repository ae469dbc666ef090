/**
 * The SQLite search index's follower (issue #40): the index is kept off the append path by
 * following the session feed (schema.ts FEED_SQL), in batches of many events per transaction.
 * Since schema 11 the index lives in its own file (search-file.ts, attached as `search`): a batch
 * reads the events' file and writes only the index's, so it never takes the events' write lock.
 *
 * - search_follow.position: every feed record at or below it is indexed. Feed positions are an
 *   AUTOINCREMENT rowid written in commit order (SQLite has one writer), so a record never
 *   appears below a position already read.
 * - search_progress (created_at, next_seq): per session incarnation, its events below next_seq
 *   are indexed. A record names a session; the follower indexes that session's events from its
 *   progress up to the session's `next_seq` (read in the same transaction, so only committed
 *   events), then moves its progress and the mark. A later record of the same session then finds
 *   nothing left to do. A `deleted` record forgets the session (whatever `sessions` holds under its
 *   id by then: a life created again in the same millisecond has the same created_at), and so does
 *   a session found gone or another incarnation: a deleted session leaves nothing in the index.
 * - A batch is one transaction (search-file.ts inSearchTransaction): its reads see one snapshot of
 *   the events' file, its writes go to the index's.
 * - Feed records retention removed before the follower read them (feed_pruned above the mark) are
 *   made up for by a scan of every session whose progress is behind its next_seq (or past it:
 *   another incarnation), and of every indexed session that is gone, after forgetting every
 *   session with a `deleted` or `created` record left below the pruned position of a life with its
 *   created_at (docs/search.md, "Behind feed retention"); then the records above the pruned
 *   position are followed as usual.
 */
import type Database from 'better-sqlite3';
import type { SearchFollowBatch, SearchLag } from '../../app/search-port.js';
import { SEARCH_FTS_FORGET, SEARCH_FTS_INSERT, inSearchTransaction } from './search-file.js';
import { SEARCH_TYPES_SQL } from '../search-types-sql.js';
import { searchDocOf } from './search-schema.js';

/** Feed records read per batch (a batch also stops once it indexed its share of events). */
const RECORDS_PER_BATCH = 1000;

/** The statements of one connection. */
interface Statements {
  readonly mark: Database.Statement;
  readonly setMark: Database.Statement;
  readonly head: Database.Statement;
  readonly pruned: Database.Statement;
  readonly records: Database.Statement;
  readonly session: Database.Statement;
  readonly progress: Database.Statement;
  readonly setProgress: Database.Statement;
  readonly events: Database.Statement;
  readonly nthIndexed: Database.Statement;
  readonly call: Database.Statement;
  readonly insertCall: Database.Statement;
  readonly insertDoc: Database.Statement;
  readonly behind: Database.Statement;
  readonly insertFts: Database.Statement;
  readonly forgetFts: Database.Statement;
  readonly forgetDocs: Database.Statement;
  readonly forgetCalls: Database.Statement;
  readonly forgetProgress: Database.Statement;
  readonly renewed: Database.Statement;
}

const cache = new WeakMap<Database.Database, Statements>();

function statements(db: Database.Database): Statements {
  let s = cache.get(db);
  if (s === undefined) {
    s = {
      mark: db.prepare('SELECT position FROM search.search_follow WHERE id = 0').pluck(),
      setMark: db.prepare('INSERT INTO search.search_follow (id, position) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET position = excluded.position'),
      head: db.prepare("SELECT coalesce((SELECT seq FROM main.sqlite_sequence WHERE name = 'feed'), 0)").pluck(),
      pruned: db.prepare('SELECT coalesce(max(position), 0) FROM main.feed_pruned').pluck(),
      records: db.prepare('SELECT position, session_id, kind FROM main.feed WHERE position > ? ORDER BY position LIMIT ?').raw(),
      session: db.prepare('SELECT next_seq, created_at FROM main.sessions WHERE id = ? AND pending = 0').raw(),
      progress: db.prepare('SELECT next_seq, created_at FROM search.search_progress WHERE session_id = ?').raw(),
      setProgress: db.prepare('INSERT INTO search.search_progress (session_id, created_at, next_seq) VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET created_at = excluded.created_at, next_seq = excluded.next_seq'),
      events: db.prepare(`SELECT seq, type, time, data, surface_op FROM main.events WHERE session_id = ? AND seq >= ? AND seq < ? AND type IN (${SEARCH_TYPES_SQL}) ORDER BY seq`).raw(),
      // The seq of the n-th (OFFSET, from 0) indexed event in a seq range: an index-only walk of events_structure.
      nthIndexed: db.prepare(`SELECT seq FROM main.events WHERE session_id = ? AND seq >= ? AND seq < ? AND type IN (${SEARCH_TYPES_SQL}) ORDER BY seq LIMIT 1 OFFSET ?`).pluck(),
      call: db.prepare('SELECT name FROM search.search_calls WHERE session_id = ? AND call_id = ?').pluck(),
      insertCall: db.prepare('INSERT OR REPLACE INTO search.search_calls (session_id, call_id, name) VALUES (?, ?, ?)'),
      insertDoc: db.prepare('INSERT INTO search.search_docs (session_id, seq, type, time, entered, replace, tools) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      // Sessions behind (or another incarnation than the one indexed: another created_at, or marked
      // indexed past the session's last event), then indexed ones that are gone.
      behind: db.prepare(`SELECT s.id FROM main.sessions s LEFT JOIN search.search_progress p ON p.session_id = s.id
        WHERE s.pending = 0 AND (s.next_seq <> coalesce(p.next_seq, 0) OR p.created_at <> s.created_at)
        UNION ALL SELECT p.session_id FROM search.search_progress p
        WHERE NOT EXISTS (SELECT 1 FROM main.sessions s WHERE s.id = p.session_id AND s.pending = 0)`).pluck(),
      insertFts: db.prepare(SEARCH_FTS_INSERT),
      forgetFts: db.prepare(SEARCH_FTS_FORGET),
      forgetDocs: db.prepare('DELETE FROM search.search_docs WHERE session_id = ?'),
      forgetCalls: db.prepare('DELETE FROM search.search_calls WHERE session_id = ?'),
      forgetProgress: db.prepare('DELETE FROM search.search_progress WHERE session_id = ?'),
      // Live sessions with a `deleted` or `created` record between the mark and the last pruned
      // position of a life with their created_at (see followSqliteFeed's catch-up).
      renewed: db.prepare(`SELECT DISTINCT s.id FROM main.feed f JOIN main.sessions s ON s.id = f.session_id AND s.created_at = f.created_at
        WHERE f.position > ? AND f.position < ? AND f.kind IN ('deleted', 'created') AND s.pending = 0`).pluck(),
    };
    cache.set(db, s);
  }
  return s;
}

/** Forgets what the index holds of session `sid` (its entries, calls and progress). */
function forgetSession(s: Statements, sid: string): void {
  s.forgetFts.run(sid);
  s.forgetDocs.run(sid);
  s.forgetCalls.run(sid);
  s.forgetProgress.run(sid);
}

/**
 * Events of other types a batch may pass over per indexed event it may index: passing over one is
 * an index-only step, so they cost the batch 1/SKIP_RATIO each, and a session of plugin or tick
 * events takes one transaction per `limit * SKIP_RATIO` of them, not per `limit`.
 */
const SKIP_RATIO = 50;

/**
 * Indexes session `sid`'s events from its progress towards its next_seq: at most `limit` events of
 * the indexed types, within at most `limit * SKIP_RATIO` seqs. Returns the events indexed, the
 * batch budget they cost (indexed events 1, others 1/SKIP_RATIO) and whether the session is done
 * (its progress reached its next_seq).
 */
function followSession(s: Statements, sid: string, limit: number): { events: number; cost: number; done: boolean } {
  const cur = s.session.get(sid) as [number, number] | undefined;
  let had = s.progress.get(sid) as [number, number] | undefined;
  if (cur === undefined || (had !== undefined && (had[1] !== cur[1] || had[0] > cur[0]))) {
    // Gone, or another incarnation than the one indexed (another created_at, or indexed past the
    // session's last event: a session's next_seq never goes down within a life): forget what the
    // index holds of it.
    forgetSession(s, sid);
    if (cur === undefined) return { events: 0, cost: 0, done: true };
    had = undefined;
  }
  const [next, createdAt] = cur;
  const from = had === undefined ? 0 : had[0];
  if (from >= next) return { events: 0, cost: 0, done: true };
  const n = Math.max(1, limit);
  const window = Math.min(next, from + n * SKIP_RATIO);
  // A window of at most n seqs holds at most n indexed events: no need to find the n-th (the
  // follower's usual case, a session's last append or two).
  const last = window - from <= n ? undefined : s.nthIndexed.get(sid, from, window, n - 1) as number | undefined;
  const to = last === undefined ? window : last + 1;
  let indexed = 0;
  for (const [seq, type, time, data, op] of s.events.all(sid, from, to) as [number, string, number, string, string | null][]) {
    indexed++;
    const p = searchDocOf(type, data);
    let tools: string[];
    if (p.r !== null) {
      const name = s.call.get(sid, p.r) as string | undefined;
      tools = name === undefined ? [] : [name];
    } else {
      tools = p.c.map(([, n]) => n);
      for (const [id, name] of p.c) s.insertCall.run(sid, id, name);
    }
    const doc = s.insertDoc.run(sid, seq, type, time, op === null ? 0 : 1, op !== null && op !== 'append' ? 1 : 0, JSON.stringify(tools)).lastInsertRowid;
    s.insertFts.run(doc, p.t);
  }
  s.setProgress.run(sid, createdAt, to);
  return { events: indexed, cost: indexed + Math.ceil((to - from - indexed) / SKIP_RATIO), done: to === next };
}

/**
 * One batch: follows the feed from the mark, covering at most `maxEvents` events (at least one;
 * an event of a type the index skips counts 1/SKIP_RATIO), and stopping at the feed's end. One
 * transaction writing only the index file, so its length (and the index write lock's hold) is bounded by `maxEvents`
 * (and RECORDS_PER_BATCH records): a session with more events to index than the batch's share is
 * indexed over several batches (its progress moves, the mark stays before its record until it is
 * done).
 */
export function followSqliteFeed(db: Database.Database, maxEvents: number): SearchFollowBatch {
  const s = statements(db);
  // Nothing to follow: no transaction (an idle server polls this).
  const seen = s.mark.get() as number | undefined;
  if (seen !== undefined && seen >= (s.head.get() as number) && (s.pruned.get() as number) <= seen) return { events: 0, caughtUp: true };
  return inSearchTransaction(db, (): SearchFollowBatch => {
    let mark = (s.mark.get() as number | undefined) ?? 0;
    const head = s.head.get() as number;
    let events = 0;
    // The batch's budget: indexed events count 1, events passed over 1/SKIP_RATIO (followSession).
    let cost = 0;
    const pruned = s.pruned.get() as number;
    if (pruned > mark) {
      // Records were removed by retention before they were followed: catch up every session by a
      // scan, then follow the records after the last pruned position (`pruned`) as usual.
      if (mark < pruned - 1) {
        // First, once (the mark then moves to just below `pruned`): the records left between the
        // mark and `pruned` (each tenant's last one is kept) include `deleted` and `created` records
        // the scan would pass over. A session with one, of a life with its created_at, may be
        // another life than the one indexed that created_at cannot tell apart (deleted and created
        // again in the same millisecond, or imported again from an export): forget it, the scan
        // indexes it from seq 0. A life with another created_at, or indexed past its last event,
        // is told apart by followSession.
        for (const sid of s.renewed.all(mark, pruned) as string[]) forgetSession(s, sid);
        mark = pruned - 1;
        s.setMark.run(mark);
      }
      // The mark moves once none is left behind (a batch covers at most maxEvents of them).
      for (const sid of s.behind.all() as string[]) {
        const f = followSession(s, sid, maxEvents - cost);
        events += f.events;
        cost += f.cost;
        if (!f.done || cost >= maxEvents) return { events, caughtUp: false };
      }
      s.setMark.run(pruned);
      return { events, caughtUp: pruned >= head };
    }
    const records = s.records.all(mark, RECORDS_PER_BATCH) as [number, string, string][];
    for (const [position, sid, kind] of records) {
      if (kind === 'deleted') {
        // The end of a life: forget it whatever the sessions table holds now. A life created again
        // in the same millisecond has the same created_at, so only this record tells them apart;
        // the next life is indexed from seq 0 (the records after this one).
        forgetSession(s, sid);
        mark = position;
        continue;
      }
      const f = followSession(s, sid, maxEvents - cost);
      events += f.events;
      cost += f.cost;
      if (!f.done) break;
      mark = position;
      if (cost >= maxEvents) break;
    }
    s.setMark.run(mark);
    return { events, caughtUp: mark >= head };
  });
}

/** The feed's last position (what a search that must see every acknowledged append waits for). */
export function sqliteFeedHead(db: Database.Database): number {
  return statements(db).head.get() as number;
}

/** The followed position. */
export function sqliteFollowed(db: Database.Database): number {
  return statements(db).mark.get() as number;
}

/** How far the index is behind the feed (a read; see SearchLag). */
export function sqliteSearchLag(db: Database.Database, now = Date.now()): SearchLag {
  const row = db.prepare(`SELECT
      (SELECT min(time) FROM main.feed WHERE position > (SELECT position FROM search.search_follow WHERE id = 0)) AS oldest,
      (SELECT coalesce(sum(s.next_seq - (CASE WHEN p.created_at = s.created_at AND NOT ${sqliteDeletedUnfollowedSql('s.id')} THEN p.next_seq ELSE 0 END)), 0)
        FROM main.sessions s LEFT JOIN search.search_progress p ON p.session_id = s.id
        WHERE s.pending = 0 AND s.id IN (SELECT session_id FROM main.feed WHERE position > (SELECT position FROM search.search_follow WHERE id = 0))) AS events`).get() as { oldest: number | null; events: number };
  return { events: row.events, seconds: row.oldest === null ? 0 : Math.max(0, (now - row.oldest) / 1000) };
}

/**
 * The SQL condition (on a session id column) of a session with a `deleted` feed record the index
 * has not followed yet: what the index holds of it may be a deleted life's (one created again in
 * the same millisecond has the same created_at), so a search answers none of it until the
 * follower forgot it and indexed the new life.
 */
export function sqliteDeletedUnfollowedSql(column: string): string {
  return `${column} IN (SELECT session_id FROM main.feed WHERE position > (SELECT position FROM search.search_follow WHERE id = 0) AND kind = 'deleted')`;
}

/**
 * The SQL condition: `column` names a session with a kept `created` record between the follower's
 * mark and the last position retention removed. While the follower catches up, such a session may
 * be a life created again after a `deleted` record retention removed (in the same millisecond, so
 * with the same created_at, and at least as long as the old life): its entries may be the old
 * life's, so a search answers none of them until the catch-up's first batch (which moves the mark
 * past the pruned position: the range is then empty, as it is outside a catch-up).
 */
export function sqliteRenewedUncaughtSql(column: string): string {
  return `${column} IN (SELECT session_id FROM main.feed WHERE position > (SELECT position FROM search.search_follow WHERE id = 0)
    AND position < (SELECT coalesce(max(position), 0) FROM main.feed_pruned) AND kind = 'created')`;
}

/** The SQL condition: retention removed feed records the follower has not read (it catches up by a scan). */
export const SQLITE_CATCHING_UP_SQL = '((SELECT coalesce(max(position), 0) FROM main.feed_pruned) > (SELECT position FROM search.search_follow WHERE id = 0))';

/** Sessions (ids) with feed records the index has not followed yet: their entries are not complete. */
export function sqliteLaggingSessions(db: Database.Database): Set<string> {
  return new Set(db.prepare('SELECT DISTINCT session_id FROM main.feed WHERE position > (SELECT position FROM search.search_follow WHERE id = 0)').pluck().all() as string[]);
}
