/**
 * SearchEvents on PostgreSQL (issue #40): the query compiled to one statement over search_docs
 * (migration 0005-search-index.ts: a tsvector of the `simple` configuration under a GIN index,
 * written by the indexer from schema 10 on).
 * User text reaches the tsquery only as the domain tokenizer's tokens (letters and digits), each
 * single-quoted with quotes and backslashes doubled anyway, in a bound parameter of
 * `to_tsquery('simple', $n)`: a phrase is `'a' <-> 'b'`, a prefix `'a':*`. Every other value is a
 * bound parameter too.
 *
 * pg_trgm is not used: the queries of the language are token queries (words, phrases, prefixes),
 * which the tsvector answers exactly as FTS5 does once punctuation is normalised; trigram
 * substring search would find different events than SQLite for the same query.
 *
 * The index has its own small pool (reads do not queue behind the store's writes).
 */
import pg from 'pg';
import type { SearchCandidate, SearchCandidateQuery, SearchFollowBatch, SearchIndex, SearchIndexReport, SearchLag } from '../../app/search-port.js';
import { followPostgresFeed, postgresLaggingSessions, postgresSearchLag } from './search-follow.js';
import type { SearchTerm } from '../../domain/search-query.js';
import { positiveValues } from '../../domain/search-fields.js';
import { SCHEMA_NAME_PATTERN } from './schema.js';
import { watchPoolErrors } from './open-database.js';
import { reindexSql } from './search-reindex.js';

/** What {@link PostgresSearchIndex.verifyEntries} compared and found. */
export interface SearchVerifySample extends SearchIndexReport {
  /** Sessions whose entries were compared. */
  readonly sessions: number;
  /** Sessions there are (not pending). */
  readonly of: number;
}

/** The tsquery text of a term (see the module comment). */
export function tsqueryOf(t: SearchTerm): string {
  const lexemes = t.tokens.map((tok, i) => {
    const quoted = `'${tok.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
    return t.prefix && i === t.tokens.length - 1 ? `${quoted}:*` : quoted;
  });
  return lexemes.join(' <-> ');
}

type Row = { session_id: string; seq: string | number; type: string; time: string | number; text: string; entered: boolean; replaced: boolean; score: number };

/** The statement and parameters of a candidate query over schema `s`. */
export function compilePostgresSearch(s: string, q: SearchCandidateQuery): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const p = (v: unknown): string => {
    params.push(v);
    return `$${params.length}`;
  };
  const where: string[] = [`s.tenant = ${p(q.tenant)}`, 's.pending_owner IS NULL'];
  const positive = q.query.terms.filter((t) => !t.negated);
  const query = positive.length > 0 ? `to_tsquery('simple', ${p(positive.map((t) => `(${tsqueryOf(t)})`).join(' & '))})` : undefined;
  if (query !== undefined) where.push(`d.tsv @@ ${query}`);
  for (const t of q.query.terms.filter((x) => x.negated)) where.push(`NOT (d.tsv @@ to_tsquery('simple', ${p(tsqueryOf(t))}))`);
  if (q.types.length > 0) where.push(`d.type = ANY(${p(q.types)}::text[])`);
  if (q.sessionIds.length > 0) where.push(`d.session_id = ANY(${p(q.sessionIds)}::text[])`);
  for (const [k, v] of Object.entries(q.labels)) where.push(`s.labels ->> ${p(k)} = ${p(v)}`);
  if (q.fromTime !== undefined) where.push(`d.time >= ${p(q.fromTime)}`);
  if (q.toTime !== undefined) where.push(`d.time < ${p(q.toTime)}`);
  if (q.tool !== undefined) where.push(`${p(q.tool)} = ANY(d.tools)`);
  const fields = q.query.fields;
  const types = positiveValues(fields, 'type');
  if (types) where.push(`d.type = ANY(${p(types)}::text[])`);
  const sessions = positiveValues(fields, 'session');
  if (sessions) where.push(`d.session_id = ANY(${p(sessions)}::text[])`);
  const tools = positiveValues(fields, 'tool');
  if (tools) where.push(`d.tools && ${p(tools)}::text[]`);
  for (const f of fields) {
    if (f.field === 'label') {
      const cond = `coalesce(s.labels ->> ${p(f.labelKey)} = ${p(f.value)}, false)`;
      where.push(f.negated ? `NOT ${cond}` : cond);
    } else if (f.negated) {
      where.push(f.field === 'type' ? `d.type <> ${p(f.value)}` : f.field === 'session' ? `d.session_id <> ${p(f.value)}` : `NOT (${p(f.value)} = ANY(d.tools))`);
    }
  }
  const byScore = q.order === 'score' && query !== undefined;
  const after = q.after;
  if (after?.kind === 'newest' && q.order === 'newest') where.push(`(d.time, d.session_id, d.seq) < (${p(after.time)}, ${p(after.sessionId)}::text COLLATE "C", ${p(after.seq)})`);
  const newest = 'd.time DESC, d.session_id DESC, d.seq DESC';
  const score = byScore ? `ts_rank(d.tsv, ${query})` : '0';
  const sql = `SELECT d.session_id, d.seq, d.type, d.time, d.text, d.entered,
      EXISTS (SELECT 1 FROM ${s}.search_docs r WHERE r.session_id = d.session_id AND r.replace) AS replaced, ${score}::float8 AS score
    FROM ${s}.search_docs d JOIN ${s}.sessions s ON s.id = d.session_id
    WHERE ${where.join(' AND ')}
    ORDER BY ${byScore ? `score DESC, ${newest}` : newest} LIMIT ${p(q.limit)}${q.order === 'score' && after?.kind === 'score' ? ` OFFSET ${p(after.offset)}` : ''}`;
  return { sql, params };
}

const TYPES = {
  getTypeParser(oid: number, format?: string): (value: string) => unknown {
    if (oid === 20) return Number;
    return (pg.types.getTypeParser as (oid: number, format?: string) => (value: string) => unknown)(oid, format);
  },
};

/** The PostgreSQL search index of schema `schema` at `url`. */
export class PostgresSearchIndex implements SearchIndex {
  readonly #pool: pg.Pool;
  readonly #s: string;

  constructor(options: { url: string; schema?: string; poolSize?: number; onError?: (e: unknown) => void }) {
    const s = options.schema ?? 'palimpsest';
    if (!SCHEMA_NAME_PATTERN.test(s)) throw new Error(`schema name ${JSON.stringify(s)} must match ${SCHEMA_NAME_PATTERN}`);
    this.#s = s;
    this.#pool = new pg.Pool({ connectionString: options.url, types: TYPES, application_name: 'palimpsest-search', max: options.poolSize ?? 2, idleTimeoutMillis: 30_000 });
    watchPoolErrors(this.#pool, (e) => options.onError?.(e));
  }

  async searchCandidates(q: SearchCandidateQuery): Promise<SearchCandidate[]> {
    const { sql, params } = compilePostgresSearch(this.#s, q);
    const res = await this.#pool.query<Row>(sql, params);
    // A session with events not followed yet may hold a replace the index does not know of: the
    // app then reads its surface.
    const lagging = res.rows.length === 0 ? undefined : await postgresLaggingSessions(this.#pool, this.#s, q.tenant);
    return res.rows.map((r) => ({
      sessionId: r.session_id, seq: Number(r.seq), type: r.type, time: Number(r.time), text: r.text, score: r.score,
      entered: r.entered, sessionReplaced: r.replaced || lagging?.has(r.session_id) === true,
    }));
  }

  followBatch(maxEvents: number): Promise<SearchFollowBatch> {
    return followPostgresFeed(this.#pool, this.#s, maxEvents);
  }

  lag(): Promise<SearchLag> {
    return postgresSearchLag(this.#pool, this.#s);
  }

  async reindex(onSession?: (sessionId: string, events: number) => void): Promise<{ sessions: number; events: number }> {
    const s = this.#s;
    const ids = (await this.#pool.query<{ id: string }>(`SELECT id FROM ${s}.sessions WHERE pending_owner IS NULL ORDER BY id`)).rows.map((r) => r.id);
    let events = 0;
    for (const id of ids) {
      const client = await this.#pool.connect();
      try {
        await client.query('BEGIN');
        // The session row's lock: an append of this session waits for its reindex (and vice versa).
        const locked = await client.query(`SELECT 1 FROM ${s}.sessions WHERE id = $1 FOR UPDATE`, [id]);
        if (locked.rowCount === 0) {
          await client.query('ROLLBACK');
          continue;
        }
        await client.query(reindexSql(s, `e.session_id = '${id.replaceAll("'", "''")}'`));
        await client.query(`INSERT INTO ${s}.search_progress (session_id, next_seq) SELECT id, next_seq FROM ${s}.sessions WHERE id = $1
          ON CONFLICT (session_id) DO UPDATE SET next_seq = EXCLUDED.next_seq`, [id]);
        const n = (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${s}.search_docs WHERE session_id = $1`, [id])).rows[0]!.n;
        await client.query('COMMIT');
        events += n;
        onSession?.(id, n);
      } catch (e) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw e;
      } finally {
        client.release();
      }
    }
    await this.#pool.query(`DELETE FROM ${s}.search_docs d WHERE NOT EXISTS (SELECT 1 FROM ${s}.sessions x WHERE x.id = d.session_id)`);
    await this.#pool.query(`DELETE FROM ${s}.search_calls d WHERE NOT EXISTS (SELECT 1 FROM ${s}.sessions x WHERE x.id = d.session_id)`);
    await this.#pool.query(`DELETE FROM ${s}.search_progress d WHERE NOT EXISTS (SELECT 1 FROM ${s}.sessions x WHERE x.id = d.session_id)`);
    return { sessions: ids.length, events };
  }

  /** Compares every session's entries with the index rebuilt from its events (slow on a large database: see {@link verifyEntries}). */
  async verifyIndex(): Promise<SearchIndexReport> {
    const { events, problems } = await this.verifyEntries();
    return { events, problems };
  }

  /**
   * Compares the entries of every session with the index rebuilt from their events (in a
   * transaction rolled back), `tsv` included, and finds entries of sessions that are gone. With
   * `sample`, of a bounded sample, each compared exactly: the `newest` sessions (by creation) and
   * `random` others chosen at random; entries of deleted sessions are then found by their progress
   * rows (the delete trigger removes them with the entries), not by a scan of every entry.
   * `sessions` is how many were compared, `of` how many there are.
   */
  async verifyEntries(sample?: { readonly newest: number; readonly random: number }): Promise<SearchVerifySample> {
    const s = this.#s;
    const client = await this.#pool.connect();
    try {
      // The expected index, built in a temporary copy inside a transaction that is rolled back.
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      const live = `SELECT id FROM ${s}.sessions WHERE pending_owner IS NULL`;
      await client.query(sample === undefined
        ? `CREATE TEMP TABLE want_sessions ON COMMIT DROP AS ${live}`
        : `CREATE TEMP TABLE want_sessions ON COMMIT DROP AS
            (${live} ORDER BY created_at DESC, id DESC LIMIT ${Math.max(0, Math.floor(sample.newest))})
            UNION (SELECT id FROM (${live} ORDER BY created_at DESC, id DESC OFFSET ${Math.max(0, Math.floor(sample.newest))}) o ORDER BY random() LIMIT ${Math.max(0, Math.floor(sample.random))})`);
      await client.query('CREATE UNIQUE INDEX ON want_sessions (id); ANALYZE want_sessions');
      await client.query(`CREATE TEMP TABLE want_docs (LIKE ${s}.search_docs INCLUDING ALL) ON COMMIT DROP`);
      await client.query(`CREATE TEMP TABLE want_calls (LIKE ${s}.search_calls INCLUDING ALL) ON COMMIT DROP`);
      const where = 'e.session_id IN (SELECT id FROM want_sessions)';
      const sql = reindexSql(s, where)
        .replaceAll(`DELETE FROM ${s}.search_docs e WHERE ${where};`, '')
        .replaceAll(`DELETE FROM ${s}.search_calls e WHERE ${where};`, '')
        .replaceAll(`INSERT INTO ${s}.search_docs `, 'INSERT INTO want_docs ')
        .replaceAll(`INSERT INTO ${s}.search_calls `, 'INSERT INTO want_calls ');
      await client.query(sql);
      // Events the follower has not reached yet are the lag, not missing entries.
      await client.query(`DELETE FROM want_docs w WHERE w.seq >= coalesce((SELECT p.next_seq FROM ${s}.search_progress p WHERE p.session_id = w.session_id), 0)`);
      const problems: string[] = [];
      const cols = 'session_id, seq, type, time, entered, replace, tools, text, tsv';
      // The index's side: the compared sessions' entries, and (every session compared) those of sessions that are gone.
      const indexed = `SELECT ${cols} FROM ${s}.search_docs WHERE session_id IN (SELECT id FROM want_sessions)${sample === undefined ? ` OR session_id NOT IN (SELECT id FROM ${s}.sessions)` : ''}`;
      const diff = await client.query<{ session_id: string; seq: number; side: string }>(`
        (SELECT session_id, seq, 'missing' AS side FROM (SELECT ${cols} FROM want_docs EXCEPT ${indexed}) a)
        UNION ALL
        (SELECT session_id, seq, 'extra' AS side FROM (${indexed} EXCEPT SELECT ${cols} FROM want_docs) b)
        ORDER BY session_id, seq, side DESC LIMIT 100`);
      for (const r of diff.rows) {
        problems.push(`search index: session ${JSON.stringify(r.session_id)} seq ${r.seq} ${r.side === 'missing' ? 'is missing or differs from its event' : 'is indexed but differs from the events'} (run palimpsest reindex)`);
      }
      if (sample !== undefined) {
        const gone = (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${s}.search_progress p WHERE NOT EXISTS (SELECT 1 FROM ${s}.sessions x WHERE x.id = p.session_id)`)).rows[0]!.n;
        if (gone > 0) problems.push(`search index: entries of ${gone} deleted sessions (run palimpsest reindex)`);
      }
      const counts = (await client.query<{ events: number; sessions: number; of: number }>(
        `SELECT (SELECT count(*)::int FROM want_docs) AS events, (SELECT count(*)::int FROM want_sessions) AS sessions, (SELECT count(*)::int FROM (${live}) l) AS of`)).rows[0]!;
      await client.query('ROLLBACK');
      return { events: counts.events, problems, sessions: counts.sessions, of: counts.of };
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}
