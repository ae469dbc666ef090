/**
 * The follower's indexing of a batch on PostgreSQL (issue #40): the events of the batch's ranges
 * are read, their index entries (text, tool calls, the call a result answers) computed here by
 * the domain's searchDoc (src/domain/search-text.ts), and written by set-wise statements of
 * CHUNK entries (one JSON parameter each: node's JSON.stringify is cheaper than pg's array
 * literals), each sent before node computes the next chunk (the two processes overlap).
 *
 * Why here and not in SQL: search_text (migrations 5 and 8), its SQL twin, walks each event's
 * jsonb with a recursive query, which cost about 20 times the append of the event
 * (bench/search-pg-profile.mjs); in node the walk is a few microseconds over the JSON text read
 * back. The contract suite holds the two definitions equal, and reindex and verify still run the
 * SQL twin, so `verify` checks what the follower wrote against it.
 *
 * The tsvector is made here too: to_tsvector('simple', …) of the text normalised in node
 * (searchNormalize; schema 10, migrations/0010-search-tsv-written.ts).
 *
 * The tools of an entry, as the set-wise SQL did: a tool result's, the name of the latest earlier
 * call with its id in the batch (same session), else the one search_calls held before the
 * statement; an assistant message's, the names of its calls in order. search_calls then holds
 * each call id's latest name.
 */
import type pg from 'pg';
import type { Json } from '../../domain/event.js';
import { searchDoc } from '../../domain/search-text.js';
import { SEARCH_TYPES_SQL } from '../search-types-sql.js';

/**
 * The text the tsvector is made of: runs of ASCII punctuation, controls and spaces become one
 * space, so the parser of to_tsvector('simple', …) sees only runs of letters and digits (no URLs,
 * hosts, paths or hyphenated compounds of its own). The twin of search_normalize (migration 5),
 * which reindex and verify run: the same character class, over code points there and UTF-16 code
 * units here, which for ASCII is the same.
 */
export function searchNormalize(text: string): string {
  return text.replace(/[\x01-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+/g, ' ');
}


/** An entry as the statement reads it (json_to_recordset): short keys, one JSON text per chunk. */
interface Doc {
  /** session id, seq, type, time */
  s: string; q: number; y: string; t: number;
  /** entered, replace */
  e: boolean; r: boolean;
  /** Tool names, or null when `l` holds the call id to look up in search_calls. */
  o: string[] | null;
  l: string | null;
  /** text, and searchNormalize(text) or null when that is the text itself */
  x: string; n: string | null;
}

/** A chunk's index entries and calls. */
class Entries {
  readonly docs: Doc[] = [];
  /** This chunk's calls, latest name per (session, call id). */
  readonly calls = new Map<string, Map<string, string>>();
  /** The batch's calls so far, latest name per (session, call id). */
  readonly #seen: Map<string, Map<string, string>>;

  constructor(seen: Map<string, Map<string, string>>) {
    this.#seen = seen;
  }

  add(r: Row): void {
    const doc = searchDoc(r.type, JSON.parse(r.data) as Json, r.data);
    if (doc === undefined) return;
    let seen = this.#seen.get(r.session_id);
    if (seen === undefined) this.#seen.set(r.session_id, (seen = new Map()));
    let tools: string[] | null;
    let lookup: string | null = null;
    if (doc.callId !== undefined) {
      const name = seen.get(doc.callId);
      tools = name === undefined ? null : [name];
      if (name === undefined) lookup = doc.callId;
    } else {
      tools = doc.calls.map((c) => c[1]);
      let calls = this.calls.get(r.session_id);
      if (calls === undefined && doc.calls.length > 0) this.calls.set(r.session_id, (calls = new Map()));
      for (const [id, name] of doc.calls) {
        seen.set(id, name);
        calls!.set(id, name);
      }
    }
    const norm = searchNormalize(doc.text);
    this.docs.push({
      s: r.session_id, q: Number(r.seq), y: r.type, t: Number(r.time), e: r.surface_op !== null, r: r.surface_op !== null && r.surface_op !== 'append',
      o: tools, l: lookup, x: doc.text, n: norm === doc.text ? null : norm,
    });
  }
}

type Row = { session_id: string; seq: number | string; type: string; time: number | string; surface_op: string | null; data: string };

/** Seqs per read, entries per statement: node computes a chunk while PostgreSQL writes the last one. */
const CHUNK = 500;

/** Sub-ranges of at most CHUNK seqs in all, each session's in seq order: the reads of a batch. */
function groups(ids: readonly string[], lo: readonly number[], hi: readonly number[]): [string[], number[], number[]][] {
  const out: [string[], number[], number[]][] = [];
  let cur: [string[], number[], number[]] = [[], [], []];
  let n = 0;
  for (let i = 0; i < ids.length; i++) {
    let from = lo[i]!;
    while (from < hi[i]!) {
      const to = Math.min(hi[i]!, from + CHUNK - n);
      cur[0].push(ids[i]!);
      cur[1].push(from);
      cur[2].push(to);
      n += to - from;
      from = to;
      if (n >= CHUNK) {
        out.push(cur);
        cur = [[], [], []];
        n = 0;
      }
    }
  }
  if (cur[0].length > 0) out.push(cur);
  return out;
}

/** Promise `p`, with its failure left to whoever awaits it (no unhandled rejection meanwhile). */
function later<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

/**
 * Indexes the events of the ranges [lo[i], hi[i]) of sessions ids[i] (see the module comment), a
 * group of at most CHUNK seqs at a time (memory stays bounded whatever the batch, e.g. a whole
 * tenant caught up after a retention gap). On the one connection the order is: read g+1, write
 * g, read g+2, write g+1, …, and node computes entries g+1 while PostgreSQL writes g.
 */
export async function indexRanges(c: pg.PoolClient, s: string, ids: readonly string[], lo: readonly number[], hi: readonly number[]): Promise<void> {
  const read = ([gi, glo, ghi]: [string[], number[], number[]]): Promise<pg.QueryResult<Row>> => later(c.query<Row>(`SELECT e.session_id, e.seq, e.type, e.time, e.surface_op, e.data
    FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS r(session_id, lo, hi)
    JOIN ${s}.events e ON e.session_id = r.session_id AND e.seq >= r.lo AND e.seq < r.hi
   WHERE e.type IN (${SEARCH_TYPES_SQL}) ORDER BY e.session_id, e.seq`, [gi, glo, ghi]));
  const all = groups(ids, lo, hi);
  // The calls seen so far in the batch, per session: a result's tool is looked up in search_calls
  // only when its call is not among them (a session's earlier groups are, as they come in order).
  const seen = new Map<string, Map<string, string>>();
  let next = all.length > 0 ? read(all[0]!) : undefined;
  let writing: Promise<unknown> | undefined;
  for (let g = 0; g < all.length; g++) {
    const rows = (await next!).rows;
    next = g + 1 < all.length ? read(all[g + 1]!) : undefined;
    const x = new Entries(seen);
    for (const r of rows) x.add(r);
    await writing;
    writing = x.docs.length === 0 ? undefined : later(write(c, s, x));
  }
  await writing;
}

/** Writes `x` by one statement: the entries' lookups see search_calls as it was before it. */
function write(c: pg.PoolClient, s: string, x: Entries): Promise<unknown> {
  const calls: { s: string; i: string; n: string }[] = [];
  for (const [session, named] of x.calls) for (const [id, name] of named) calls.push({ s: session, i: id, n: name });
  return c.query(`
WITH done AS (
  INSERT INTO ${s}.search_calls (session_id, call_id, name) SELECT * FROM json_to_recordset($2::json) AS c(s text, i text, n text)
    ON CONFLICT (session_id, call_id) DO UPDATE SET name = EXCLUDED.name
)
INSERT INTO ${s}.search_docs (session_id, seq, type, time, entered, replace, tools, text, tsv)
  SELECT u.s, u.q, u.y, u.t, u.e, u.r,
    CASE WHEN u.l IS NOT NULL THEN coalesce((SELECT ARRAY[c.name] FROM ${s}.search_calls c WHERE c.session_id = u.s AND c.call_id = u.l), '{}')
         WHEN json_array_length(u.o) = 0 THEN '{}'
         ELSE ARRAY(SELECT t FROM json_array_elements_text(u.o) WITH ORDINALITY AS x(t, o) ORDER BY o) END,
    u.x, to_tsvector('simple'::regconfig, coalesce(u.n, u.x))
  FROM json_to_recordset($1::json) AS u(s text, q bigint, y text, t bigint, e boolean, r boolean, o json, l text, x text, n text)`,
  [JSON.stringify(x.docs), JSON.stringify(calls)]);
}
