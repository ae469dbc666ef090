/**
 * The search index rebuilt in SQL from the events (`palimpsest reindex`, and the expected index
 * `verify` compares with): the follower's work (search-docs.ts), set-wise, in seq order, with the
 * SQL twins of the domain's searchDoc (migrations 5 and 8: search_text, search_calls_of,
 * search_result_call) and of searchNormalize (search_normalize). Schema 10 on: `tsv` is written
 * here, not generated (migrations/0010-search-tsv-written.ts); migration 5 keeps its own frozen
 * copy for version 5.
 */
import { SEARCH_TYPES_SQL } from '../search-types-sql.js';

/** Reindexes sessions `where` (a condition on e.session_id) from their events. */
export function reindexSql(s: string, where: string): string {
  return `
DELETE FROM ${s}.search_docs e WHERE ${where};
DELETE FROM ${s}.search_calls e WHERE ${where};
WITH ev AS (
  SELECT e.session_id, e.seq, e.type, e.time, e.surface_op, ${s}.search_data(e.data) AS d
    FROM ${s}.events e WHERE e.type IN (${SEARCH_TYPES_SQL}) AND ${where}
), calls AS (
  SELECT ev.session_id, ev.seq, x.ord, x.call_id, x.name FROM ev, ${s}.search_calls_of(ev.type, ev.d) x
), done AS (
  INSERT INTO ${s}.search_calls (session_id, call_id, name)
    SELECT DISTINCT ON (session_id, call_id) session_id, call_id, name FROM calls ORDER BY session_id, call_id, seq DESC, ord DESC
)
INSERT INTO ${s}.search_docs (session_id, seq, type, time, entered, replace, tools, text, tsv)
  SELECT ev.session_id, ev.seq, ev.type, ev.time, ev.surface_op IS NOT NULL, coalesce(ev.surface_op <> 'append', false),
    CASE WHEN r.call_id IS NOT NULL THEN
      coalesce((SELECT ARRAY[c.name] FROM calls c WHERE c.session_id = ev.session_id AND c.call_id = r.call_id AND c.seq < ev.seq ORDER BY c.seq DESC, c.ord DESC LIMIT 1), '{}')
    ELSE coalesce((SELECT array_agg(c.name ORDER BY c.ord) FROM calls c WHERE c.session_id = ev.session_id AND c.seq = ev.seq), '{}') END,
    t.text, to_tsvector('simple'::regconfig, ${s}.search_normalize(t.text))
  FROM ev, LATERAL (SELECT ${s}.search_result_call(ev.type, ev.d) AS call_id) r, LATERAL (SELECT coalesce(${s}.search_text(ev.d), '') AS text) t;`;
}
