/**
 * SearchEvents on SQLite (issue #40): the query compiled to one statement over search_docs and
 * the FTS5 index (search-schema.ts). User text reaches FTS5 only as the quoted tokens of the
 * domain's tokenizer (letters and digits, every `"` doubled all the same) in a bound parameter;
 * every other value is a bound parameter too.
 *
 * - Positive terms: one MATCH of `"tok tok" "tok"*` (FTS5 ANDs them), the outer loop of the
 *   join; each negated term: a `NOT IN` of its own MATCH. Fields and filters: plain SQL over
 *   search_docs and sessions.
 * - Newest order sorts the hits (keyset cursor); without terms it walks search_docs_newest. Score
 *   order is FTS5's bm25 (`rank`), negated so that higher is better, with an offset cursor.
 * - The index lives in its own file, attached as `search` (search-file.ts): a hit's session is
 *   joined live, on the incarnation the index holds, so a deleted session is never answered.
 * - The file keeps no text (search_fts is contentless since its version 2): a hit's text, for its
 *   snippet, is made again from its event (searchSnippetText, cut as the follower's text is) when
 *   the app first reads it (lazyTextCandidate): only the hits a page returns, never a candidate
 *   the app drops or one past the page. A hit is answered only if the query's snapshot of the
 *   events holds its event (VISIBLE).
 * - The index has its own connection: reads do not queue behind the store's statements, and
 *   `reindex` writes one session per transaction to the index file only (online: appends and
 *   searches go on). The follower's batches run in a worker thread on a third connection
 *   (search-follow-thread.ts).
 */
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { SearchCandidate, SearchCandidateQuery, SearchFollowBatch, SearchIndex, SearchIndexReport, SearchLag } from '../../app/search-port.js';
import type { SearchTerm } from '../../domain/search-query.js';
import { positiveValues } from '../../domain/search-fields.js';
import { SEARCH_TYPES_SQL } from '../search-types-sql.js';
import { searchDocOf, searchSnippetText } from './search-schema.js';
import { SEARCH_FTS_FORGET, SEARCH_FTS_INSERT, attachSearchFile, inSearchTransaction, searchIndexPath, type SearchFileOpened } from './search-file.js';
import { SearchFollowThread } from './search-follow-thread.js';
import { SQLITE_CATCHING_UP_SQL, followSqliteFeed, sqliteDeletedUnfollowedSql, sqliteFeedHead, sqliteFollowed, sqliteLaggingSessions, sqliteRenewedUncaughtSql, sqliteSearchLag } from './search-follow.js';

/** An FTS5 phrase of a term: its tokens quoted (quotes doubled), `*` after for a prefix. */
export function fts5Phrase(t: SearchTerm): string {
  return `"${t.tokens.join(' ').replaceAll('"', '""')}"${t.prefix ? '*' : ''}`;
}

/**
 * The hit's session as it is now, and the incarnation the index holds of it: a session deleted
 * (or deleted and created again) is never answered from its old entries, even before the
 * follower forgot them. While the follower catches up behind retention, a session indexed past
 * its last event is another life too (one created again shorter, its `deleted` record pruned);
 * outside a catch-up that cannot happen (a `deleted` record not followed excludes the session), so
 * the condition is not applied there: a search's snapshot of the events may be older than the
 * index's by an append the follower just indexed.
 */
const LIVE = `JOIN main.sessions s ON s.id = d.session_id JOIN search.search_progress sp ON sp.session_id = d.session_id AND sp.created_at = s.created_at
  AND (sp.next_seq <= s.next_seq OR NOT ${SQLITE_CATCHING_UP_SQL})`;

/**
 * The hit's event is in the events' snapshot the search answers from. In one statement SQLite
 * opens `main`'s snapshot before `search`'s, so the index may hold an entry the follower just made
 * for an event this snapshot does not see yet (outside a catch-up LIVE lets it through): it is no
 * hit of this search (and would have no text to show). A session's seqs are contiguous from 0, so
 * its row in the same snapshot says it: `seq < next_seq` (no lookup per match).
 */
const VISIBLE = 'd.seq < s.next_seq';

/** A candidate row of {@link compileSqliteSearch}'s statement. */
export type Row = { session_id: string; seq: number; type: string; time: number; entered: number; created_at: number; replaced: number; score: number };

/** The statement and parameters of a candidate query. */
export function compileSqliteSearch(q: SearchCandidateQuery): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const where: string[] = ['s.tenant = ?', 's.pending = 0', `NOT ${sqliteDeletedUnfollowedSql('d.session_id')}`, `NOT ${sqliteRenewedUncaughtSql('d.session_id')}`, VISIBLE];
  params.push(q.tenant);
  const positive = q.query.terms.filter((t) => !t.negated);
  const byScore = q.order === 'score' && positive.length > 0;
  if (positive.length > 0) {
    where.push('search_fts MATCH ?');
    params.push(positive.map(fts5Phrase).join(' '));
  }
  for (const t of q.query.terms.filter((x) => x.negated)) {
    where.push('d.doc NOT IN (SELECT rowid FROM search.search_fts WHERE search_fts MATCH ?)');
    params.push(fts5Phrase(t));
  }
  const inList = (column: string, values: readonly string[]): void => {
    where.push(`${column} IN (${values.map(() => '?').join(', ')})`);
    params.push(...values);
  };
  const toolIs = 'EXISTS (SELECT 1 FROM json_each(d.tools) WHERE value = ?)';
  const labelIs = 'EXISTS (SELECT 1 FROM json_each(s.labels) l WHERE l.key = ? AND l.value = ?)';
  if (q.types.length > 0) inList('d.type', q.types);
  if (q.sessionIds.length > 0) inList('d.session_id', q.sessionIds);
  for (const [k, v] of Object.entries(q.labels)) {
    where.push(labelIs);
    params.push(k, v);
  }
  if (q.fromTime !== undefined) {
    where.push('d.time >= ?');
    params.push(q.fromTime);
  }
  if (q.toTime !== undefined) {
    where.push('d.time < ?');
    params.push(q.toTime);
  }
  if (q.tool !== undefined) {
    where.push(toolIs);
    params.push(q.tool);
  }
  const fields = q.query.fields;
  const types = positiveValues(fields, 'type');
  if (types) inList('d.type', types);
  const sessions = positiveValues(fields, 'session');
  if (sessions) inList('d.session_id', sessions);
  const tools = positiveValues(fields, 'tool');
  if (tools) {
    where.push(`(${tools.map(() => toolIs).join(' OR ')})`);
    params.push(...tools);
  }
  for (const f of fields) {
    if (f.field === 'label') {
      where.push(f.negated ? `NOT ${labelIs}` : labelIs);
      params.push(f.labelKey, f.value);
    } else if (f.negated) {
      where.push(f.field === 'type' ? 'd.type <> ?' : f.field === 'session' ? 'd.session_id <> ?' : `NOT ${toolIs}`);
      params.push(f.value);
    }
  }
  const after = q.after;
  if (after?.kind === 'newest' && !byScore) {
    where.push('(d.time, d.session_id, d.seq) < (?, ?, ?)');
    params.push(after.time, after.sessionId, after.seq);
  }
  const cols = `d.session_id, d.seq, d.type, d.time, d.entered, s.created_at,
    EXISTS (SELECT 1 FROM search.search_docs r WHERE r.session_id = d.session_id AND r.replace = 1) AS replaced`;
  const newest = 'd.time DESC, d.session_id DESC, d.seq DESC';
  let sql: string;
  if (byScore) {
    sql = `SELECT ${cols}, -search_fts.rank AS score FROM search.search_fts CROSS JOIN search.search_docs d ON d.doc = search_fts.rowid ${LIVE}
      WHERE ${where.join(' AND ')} ORDER BY search_fts.rank, ${newest} LIMIT ? OFFSET ?`;
    params.push(q.limit, after?.kind === 'score' ? after.offset : 0);
  } else {
    // With terms, the FTS match drives (CROSS JOIN keeps it the outer loop) and its hits are
    // sorted: a walk of search_docs_newest probing each row would read every newer non-hit first.
    const from = positive.length > 0 ? 'search.search_fts CROSS JOIN search.search_docs d ON d.doc = search_fts.rowid' : 'search.search_docs d';
    sql = `SELECT ${cols}, 0 AS score FROM ${from} ${LIVE}
      WHERE ${where.join(' AND ')} ORDER BY ${newest} LIMIT ?`;
    params.push(q.limit);
    if (q.order === 'score' && after?.kind === 'score') {
      // A score order without positive terms is the newest order, paged by offset.
      sql += ' OFFSET ?';
      params.push(after.offset);
    }
  }
  return { sql, params };
}

/** Rebuilds one session's entries from its events (in the caller's inSearchTransaction). */
function indexSession(db: Database.Database, sessionId: string): number {
  db.prepare(SEARCH_FTS_FORGET).run(sessionId);
  db.prepare('DELETE FROM search.search_docs WHERE session_id = ?').run(sessionId);
  db.prepare('DELETE FROM search.search_calls WHERE session_id = ?').run(sessionId);
  db.prepare('DELETE FROM search.search_progress WHERE session_id = ?').run(sessionId);
  const rows = db.prepare(`SELECT seq, type, time, data, surface_op FROM main.events WHERE session_id = ? AND type IN (${SEARCH_TYPES_SQL}) ORDER BY seq`).raw().iterate(sessionId) as IterableIterator<[number, string, number, string, string | null]>;
  const insertDoc = db.prepare('INSERT INTO search.search_docs (session_id, seq, type, time, entered, replace, tools) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const insertCall = db.prepare('INSERT OR REPLACE INTO search.search_calls (session_id, call_id, name) VALUES (?, ?, ?)');
  const calls = new Map<string, string>();
  const docs: [unknown[], string][] = [];
  for (const [seq, type, time, data, op] of rows) {
    const p = searchDocOf(type, data);
    const answered = p.r === null ? undefined : calls.get(p.r);
    const tools = p.r === null ? p.c.map(([, n]) => n) : answered === undefined ? [] : [answered];
    if (type === 'assistant/message') for (const [id, name] of p.c) calls.set(id, name);
    docs.push([[sessionId, seq, type, time, op === null ? 0 : 1, op !== null && op !== 'append' ? 1 : 0, JSON.stringify(tools)], p.t]);
  }
  const insertFts = db.prepare(SEARCH_FTS_INSERT);
  for (const [d, text] of docs) insertFts.run(insertDoc.run(...d).lastInsertRowid, text);
  for (const [id, name] of calls) insertCall.run(sessionId, id, name);
  db.prepare(`INSERT INTO search.search_progress (session_id, created_at, next_seq) SELECT id, created_at, next_seq FROM main.sessions WHERE id = ? AND pending = 0`).run(sessionId);
  return docs.length;
}

/**
 * A candidate of row `r` whose text is made from its event (searchSnippetText) when it is first
 * read, not before: the app reads it only for the hits it returns, after the surface filters, so
 * a page costs one event's data per hit returned, never one per candidate. The event is read then,
 * outside the search's read transaction (the query saw it, see VISIBLE); a session deleted since
 * gives an empty text, and so does one created again since (another created_at, or another type at that seq).
 */
export function lazyTextCandidate(r: Row, sessionReplaced: boolean, data: Database.Statement): SearchCandidate {
  let text: string | undefined;
  const c = { sessionId: r.session_id, seq: r.seq, type: r.type, time: r.time, text: '', score: r.score, entered: r.entered === 1, sessionReplaced };
  return Object.defineProperty(c, 'text', {
    enumerable: true,
    get: (): string => {
      if (text === undefined) {
        const d = data.get(r.created_at, r.session_id, r.seq, r.type) as string | undefined;
        text = d === undefined ? '' : searchSnippetText(r.type, d);
      }
      return text;
    },
  });
}

/** Events per follower batch at most (one transaction holding the index file's write lock; see docs/search.md). */
export const SQLITE_FOLLOW_BATCH_EVENTS = 2000;

/** Options of {@link SqliteSearchIndex}. */
export interface SqliteSearchIndexOptions {
  /** Busy timeout of its connections, ms. Default 5000. */
  readonly busyTimeoutMs?: number;
  /** Run the follower's batches on the caller's thread instead of a worker thread (tools, benches). */
  readonly inProcess?: boolean;
  /** Events per follower batch at most. Default {@link SQLITE_FOLLOW_BATCH_EVENTS}. */
  readonly maxBatchEvents?: number;
}

/**
 * The SQLite search index over the database at `path`: searches, lag, reindex and verify on a
 * connection of its own; the follower's batches in a worker thread with another
 * (search-follow-thread.ts), so indexing never blocks the caller's event loop.
 */
export class SqliteSearchIndex implements SearchIndex {
  readonly #db: Database.Database;
  readonly #thread: SearchFollowThread | undefined;
  readonly #maxBatch: number;
  #data: Database.Statement | undefined;

  /** How the index file was found at opening (search-file.ts): the caller logs a rebuild. */
  readonly opened: SearchFileOpened;

  constructor(path: string, options: SqliteSearchIndexOptions = {}) {
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    // Not fileMustExist: an ATTACH opens with the main file's flags, and the index file may have to be created.
    if (!existsSync(path)) throw new Error(`no database at ${path}`);
    this.#db = new Database(path);
    try {
      this.#db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      this.opened = attachSearchFile(this.#db, true, busyTimeoutMs);
      // In the try: a constructor that throws leaves no connection open.
      this.#thread = options.inProcess === true ? undefined : new SearchFollowThread({ path, busyTimeoutMs });
    } catch (e) {
      this.#db.close();
      throw e;
    }
    this.#maxBatch = Math.max(1, options.maxBatchEvents ?? SQLITE_FOLLOW_BATCH_EVENTS);
  }

  /** The follower's thread (undefined in process). */
  get followThread(): SearchFollowThread | undefined {
    return this.#thread;
  }

  searchCandidates(q: SearchCandidateQuery): Promise<SearchCandidate[]> {
    const { sql, params } = compileSqliteSearch(q);
    // Statements differ by the query's shape; SQLite's own cache of prepared statements is the
    // better-sqlite3 statement object, so a prepare per search (~20 µs) is the price of one SQL per shape.
    // One read transaction: the hits and their events at one snapshot.
    return Promise.resolve(this.#db.transaction(() => {
      const rows = this.#db.prepare(sql).all(...params) as Row[];
      // A session with events not followed yet may hold a replace the index does not know of: the
      // app then reads its surface (as for a session with a replace).
      const lagging = sqliteFollowed(this.#db) < sqliteFeedHead(this.#db) ? sqliteLaggingSessions(this.#db) : undefined;
      const data = this.#eventData();
      return rows.map((r) => lazyTextCandidate(r, r.replaced === 1 || lagging?.has(r.session_id) === true, data));
    }).deferred());
  }

  /** The statement reading an event's data (prepared once). */
  #eventData(): Database.Statement {
    this.#data ??= this.#db.prepare(`SELECT e.data FROM main.events e JOIN main.sessions s ON s.id = e.session_id AND s.created_at = ?
      WHERE e.session_id = ? AND e.seq = ? AND e.type = ?`).pluck();
    return this.#data;
  }

  followBatch(maxEvents: number): Promise<SearchFollowBatch> {
    const n = Math.min(maxEvents, this.#maxBatch);
    if (this.#thread !== undefined) return this.#thread.followBatch(n);
    return Promise.resolve(followSqliteFeed(this.#db, n));
  }

  lag(): Promise<SearchLag> {
    return Promise.resolve(sqliteSearchLag(this.#db));
  }

  async reindex(onSession?: (sessionId: string, events: number) => void): Promise<{ sessions: number; events: number }> {
    // An FTS index that fails FTS5's own check (SQLITE_CORRUPT*) is emptied first, and the whole
    // index with it (a contentless table cannot be rebuilt from a content table): entries, calls,
    // progress and the follower's mark, in one transaction, so a reindex interrupted after it
    // leaves an index the follower completes, never entries marked indexed without their FTS rows.
    // Every session's entries are then written again below. Any other error is thrown.
    inSearchTransaction(this.#db, () => {
      try {
        this.#db.prepare("INSERT INTO search.search_fts (search_fts, rank) VALUES ('integrity-check', 0)").run();
      } catch (e) {
        if (!String((e as { code?: unknown }).code).startsWith('SQLITE_CORRUPT')) throw e;
        this.#db.prepare("INSERT INTO search.search_fts (search_fts) VALUES ('delete-all')").run();
        for (const t of ['search_docs', 'search_calls', 'search_progress']) this.#db.prepare(`DELETE FROM search.${t}`).run();
        this.#db.prepare('UPDATE search.search_follow SET position = 0').run();
      }
    });
    const ids = this.#db.prepare('SELECT id FROM main.sessions WHERE pending = 0 ORDER BY id').pluck().all() as string[];
    let events = 0;
    for (const id of ids) {
      const n = inSearchTransaction(this.#db, () => indexSession(this.#db, id));
      events += n;
      onSession?.(id, n);
      // Let the server's other work run between sessions.
      await new Promise((r) => setImmediate(r));
    }
    // Entries of sessions that no longer exist (the follower forgets them too, when it reaches
    // their delete), and FTS rows without an entry (one transaction on the index file; appends go on).
    inSearchTransaction(this.#db, () => {
      const gone = 'NOT IN (SELECT id FROM main.sessions WHERE pending = 0)';
      this.#db.prepare(`DELETE FROM search.search_fts WHERE rowid IN (SELECT doc FROM search.search_docs WHERE session_id ${gone})`).run();
      this.#db.prepare(`DELETE FROM search.search_docs WHERE session_id ${gone}`).run();
      this.#db.prepare(`DELETE FROM search.search_calls WHERE session_id ${gone}`).run();
      this.#db.prepare(`DELETE FROM search.search_progress WHERE session_id ${gone}`).run();
      this.#db.prepare('DELETE FROM search.search_fts WHERE rowid IN (SELECT id FROM search.search_fts_docsize EXCEPT SELECT doc FROM search.search_docs)').run();
    });
    return { sessions: ids.length, events };
  }

  verifyIndex(): Promise<SearchIndexReport> {
    return Promise.resolve(verifySqliteSearch(this.#db));
  }

  async close(): Promise<void> {
    await this.#thread?.close();
    if (this.#db.open) this.#db.close();
  }
}

/**
 * Attaches the index file of `db` (read-only when `db` is) for `verify`; false when it has none
 * (the server creates it at start and builds it from the events).
 */
export function attachSearchIndexForVerify(db: Database.Database): boolean {
  if (!existsSync(searchIndexPath(db.name))) return false;
  attachSearchFile(db, false);
  return true;
}

/**
 * Compares search_docs and the FTS index with what the events give; problems start with
 * "search index:". Sessions in `skip` (damaged ones, reported by the caller) are not compared. Writes nothing (FTS5's own check runs only on a writable connection).
 */
export function verifySqliteSearch(db: Database.Database, skip: ReadonlySet<string> = new Set()): SearchIndexReport {
  const problems: string[] = [];
  let events = 0;
  const note = (p: string): void => {
    if (problems.length < 100) problems.push(p);
  };
  // The follower's progress bounds what must be indexed: events at or above it are the lag, not missing.
  const docs = db.prepare('SELECT seq, type, time, entered, replace, tools FROM search.search_docs WHERE session_id = ? ORDER BY seq').raw();
  const evs = db.prepare(`SELECT seq, type, time, data, surface_op FROM main.events WHERE session_id = ? AND seq < ? AND type IN (${SEARCH_TYPES_SQL}) ORDER BY seq`).raw();
  const progress = db.prepare('SELECT next_seq, created_at FROM search.search_progress WHERE session_id = ?').raw();
  // Sessions with feed records not followed yet: a delete or another incarnation there is lag, not a problem.
  const lagging = sqliteLaggingSessions(db);
  const deletedUnfollowed = new Set(db.prepare(`SELECT id FROM main.sessions WHERE ${sqliteDeletedUnfollowedSql('id')}`).pluck().all() as string[]);
  // Retention removed records the follower has not read: its catch-up of every session is lag.
  const catchingUp = db.prepare(`SELECT ${SQLITE_CATCHING_UP_SQL}`).pluck().get() === 1;
  for (const [id, createdAt, nextSeq] of db.prepare('SELECT id, created_at, next_seq FROM main.sessions WHERE pending = 0').raw().all() as [string, number, number][]) {
    if (skip.has(id)) continue;
    const p = progress.get(id) as [number, number] | undefined;
    const other = p !== undefined && (p[1] !== createdAt || p[0] > nextSeq); // another incarnation than the one indexed
    if ((lagging.has(id) || catchingUp) && (other || deletedUnfollowed.has(id))) continue;
    const upTo = p === undefined ? 0 : p[0];
    const have = new Map((docs.all(id) as unknown[][]).map((r) => [r[0] as number, JSON.stringify(r.slice(1))]));
    const calls = new Map<string, string>();
    for (const [seq, type, time, data, op] of evs.all(id, upTo) as [number, string, number, string, string | null][]) {
      events++;
      const d = searchDocOf(type, data);
      const answered = d.r === null ? undefined : calls.get(d.r);
      const tools = d.r === null ? d.c.map(([, n]) => n) : answered === undefined ? [] : [answered];
      if (type === 'assistant/message') for (const [cid, name] of d.c) calls.set(cid, name);
      const want = JSON.stringify([type, time, op === null ? 0 : 1, op !== null && op !== 'append' ? 1 : 0, JSON.stringify(tools)]);
      const got = have.get(seq);
      if (got === undefined) note(`search index: session ${JSON.stringify(id)} seq ${seq} is missing (run palimpsest reindex)`);
      else if (got !== want) note(`search index: session ${JSON.stringify(id)} seq ${seq} differs from its event (run palimpsest reindex)`);
      have.delete(seq);
    }
    for (const seq of have.keys()) note(`search index: session ${JSON.stringify(id)} seq ${seq} is indexed but is no message event (run palimpsest reindex)`);
  }
  const orphanSessions = db.prepare('SELECT DISTINCT session_id FROM search.search_docs WHERE session_id NOT IN (SELECT id FROM main.sessions WHERE pending = 0)').pluck().all() as string[];
  const orphans = orphanSessions.filter((id) => !lagging.has(id) && !skip.has(id)).length;
  if (orphans > 0) note(`search index: entries of ${orphans} deleted sessions (run palimpsest reindex)`);
  const ahead = db.prepare(`SELECT count(*) FROM search.search_progress p JOIN main.sessions s ON s.id = p.session_id AND s.created_at = p.created_at
    WHERE p.next_seq > s.next_seq AND NOT ${sqliteDeletedUnfollowedSql('s.id')}`).pluck().get() as number;
  if (ahead > 0 && !catchingUp) note(`search index: ${ahead} sessions marked indexed past their last event (run palimpsest reindex)`);
  // Every entry has its FTS row and no FTS row is without one (the text itself is not kept: FTS5's check below reads the index alone).
  const unmatched = db.prepare(`SELECT (SELECT count(*) FROM search.search_docs d WHERE NOT EXISTS (SELECT 1 FROM search.search_fts_docsize z WHERE z.id = d.doc)),
    (SELECT count(*) FROM search.search_fts_docsize z WHERE NOT EXISTS (SELECT 1 FROM search.search_docs d WHERE d.doc = z.id))`).raw().get() as [number, number];
  if (unmatched[0] > 0) note(`search index: ${unmatched[0]} entries have no FTS row (run palimpsest reindex)`);
  if (unmatched[1] > 0) note(`search index: ${unmatched[1]} FTS rows have no entry (run palimpsest reindex)`);
  try {
    db.prepare("INSERT INTO search.search_fts (search_fts, rank) VALUES ('integrity-check', 0)").run();
  } catch (e) {
    // A read-only connection (palimpsest verify) cannot run FTS5's check, which is a write command.
    if ((e as { code?: unknown }).code !== 'SQLITE_READONLY') note(`search index: the FTS5 index does not match search_docs (run palimpsest reindex): ${(e as Error).message}`);
  }
  return { events, problems };
}
