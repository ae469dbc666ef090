/**
 * The follower's indexing of a batch on PostgreSQL (issue #40): the events of the batch's ranges
 * are read, their index entries (text, tool calls, the call a result answers) computed here by
 * the domain's searchDoc (src/domain/search-text.ts), and written by set-wise statements of
 * CHUNK entries, each sent before node computes the next chunk (the two processes overlap).
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

const TYPES = `'user/message', 'assistant/message', 'tool/result', 'steering/message'`;

/** Index entries (and their calls) in columns for unnest. */
class Entries {
  readonly session: string[] = [];
  readonly seq: number[] = [];
  readonly type: string[] = [];
  readonly time: number[] = [];
  readonly entered: boolean[] = [];
  readonly replace: boolean[] = [];
  /** JSON array of tool names, or null when `lookup` holds the call id to look up in search_calls. */
  readonly tools: (string | null)[] = [];
  readonly lookup: (string | null)[] = [];
  readonly text: string[] = [];
  /** searchNormalize(text), or null when that is the text itself. */
  readonly norm: (string | null)[] = [];
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
    let tools: string | null;
    let lookup: string | null = null;
    if (doc.callId !== undefined) {
      const name = seen.get(doc.callId);
      tools = name === undefined ? null : JSON.stringify([name]);
      if (name === undefined) lookup = doc.callId;
    } else {
      tools = doc.calls.length === 0 ? '[]' : JSON.stringify(doc.calls.map((c) => c[1]));
      let calls = this.calls.get(r.session_id);
      if (calls === undefined && doc.calls.length > 0) this.calls.set(r.session_id, (calls = new Map()));
      for (const [id, name] of doc.calls) {
        seen.set(id, name);
        calls!.set(id, name);
      }
    }
    this.session.push(r.session_id);
    this.seq.push(Number(r.seq));
    this.type.push(r.type);
    this.time.push(Number(r.time));
    this.entered.push(r.surface_op !== null);
    this.replace.push(r.surface_op !== null && r.surface_op !== 'append');
    this.tools.push(tools);
    this.lookup.push(lookup);
    this.text.push(doc.text);
    const norm = searchNormalize(doc.text);
    this.norm.push(norm === doc.text ? null : norm);
  }
}

type Row = { session_id: string; seq: number | string; type: string; time: number | string; surface_op: string | null; data: string };

/** Entries per statement: node computes the next chunk while PostgreSQL writes the last one. */
const CHUNK = 500;

/** Indexes the events of the ranges [lo[i], hi[i]) of sessions ids[i] (see the module comment). */
export async function indexRanges(c: pg.PoolClient, s: string, ids: readonly string[], lo: readonly number[], hi: readonly number[]): Promise<void> {
  const rows = (await c.query<Row>(`SELECT e.session_id, e.seq, e.type, e.time, e.surface_op, e.data
    FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS r(session_id, lo, hi)
    JOIN ${s}.events e ON e.session_id = r.session_id AND e.seq >= r.lo AND e.seq < r.hi
   WHERE e.type IN (${TYPES}) ORDER BY e.session_id, e.seq`, [ids, lo, hi])).rows;
  // The calls seen so far in the batch, per session: a result's tool is looked up in search_calls
  // only when its call is not among them (an earlier chunk's calls are, as rows come in order).
  const seen = new Map<string, Map<string, string>>();
  let writing: Promise<unknown> | undefined;
  for (let at = 0; at < rows.length; at += CHUNK) {
    const x = new Entries(seen);
    for (const r of rows.slice(at, at + CHUNK)) x.add(r);
    await writing;
    writing = x.session.length === 0 ? undefined : write(c, s, x);
    // Awaited after the next chunk is computed (or below); a failure is thrown there.
    writing?.catch(() => undefined);
  }
  await writing;
}

/** Writes `x` by one statement: the entries' lookups see search_calls as it was before it. */
function write(c: pg.PoolClient, s: string, x: Entries): Promise<unknown> {
  const cs: string[] = [];
  const ci: string[] = [];
  const cn: string[] = [];
  for (const [session, calls] of x.calls) {
    for (const [id, name] of calls) {
      cs.push(session);
      ci.push(id);
      cn.push(name);
    }
  }
  return c.query(`
WITH done AS (
  INSERT INTO ${s}.search_calls (session_id, call_id, name) SELECT * FROM unnest($10::text[], $11::text[], $12::text[])
    ON CONFLICT (session_id, call_id) DO UPDATE SET name = EXCLUDED.name
)
INSERT INTO ${s}.search_docs (session_id, seq, type, time, entered, replace, tools, text, tsv)
  SELECT u.session_id, u.seq, u.type, u.time, u.entered, u.replace,
    CASE WHEN u.lookup IS NOT NULL THEN coalesce((SELECT ARRAY[c.name] FROM ${s}.search_calls c WHERE c.session_id = u.session_id AND c.call_id = u.lookup), '{}')
         WHEN u.tools = '[]' THEN '{}'
         ELSE ARRAY(SELECT t FROM jsonb_array_elements_text(u.tools::jsonb) WITH ORDINALITY AS x(t, o) ORDER BY o) END,
    u.text, to_tsvector('simple'::regconfig, coalesce(u.norm, u.text))
  FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::boolean[], $6::boolean[], $7::text[], $8::text[], $9::text[], $13::text[])
    AS u(session_id, seq, type, time, entered, replace, tools, lookup, text, norm)`,
  [x.session, x.seq, x.type, x.time, x.entered, x.replace, x.tools, x.lookup, x.text, cs, ci, cn, x.norm]);
}
