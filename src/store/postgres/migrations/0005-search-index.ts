/**
 * Version 5: the search index (issue #40), kept by the writer in the append transaction.
 *
 * - search_text(data): an event's searchable text, the SQL twin of src/domain/search-text.ts
 *   (the contract suite compares them): every string in `data` at any depth, except under the
 *   skipped keys, in jsonb's key order, joined with newlines, cut to 65,536 characters; '' when
 *   the JSON text holds a NUL or surrogate escape (jsonb cannot hold it).
 * - search_normalize(text): ASCII punctuation and spaces become one space before
 *   to_tsvector('simple', …), so the default parser sees only runs of letters and digits (no
 *   URLs, hosts, file paths or hyphenated compounds of its own): `rm -rf` and `invoice 4711` are
 *   the tokens SQLite's unicode61 makes of them. The `simple` configuration: no stemming, no
 *   stop words, lower case.
 * - search_docs: one row per message event (user/message, assistant/message, tool/result,
 *   steering/message): type, time, `entered` (has a surface op), `replace` (is a replace), the
 *   tools it calls or answers, its text, and `tsv`, the text's tsvector (a stored generated
 *   column) under a GIN index. search_docs_newest serves the newest-first order.
 * - search_calls: a session's tool calls (call id -> tool name, the latest wins).
 * - search_index_event (trigger AFTER INSERT ON events): indexes a message event in the
 *   transaction that inserts it; search_forget_session (AFTER DELETE ON sessions): a deleted
 *   session (retention too) leaves nothing in the index.
 *
 * Existing events are indexed here, in the migrating transaction (one INSERT … SELECT per
 * table in seq order); `palimpsest reindex` rebuilds the index online later.
 */
import type { PostgresMigration } from './migration.js';

const TYPES = `'user/message', 'assistant/message', 'tool/result', 'steering/message'`;

/** The parts of event `d` (jsonb, NULL when unindexable) the index needs: text, calls, answered call id. */
function ddl(s: string): string {
  return `
CREATE FUNCTION ${s}.search_text(p_data jsonb) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  WITH RECURSIVE w(path, val) AS (
    SELECT ARRAY[]::int[], p_data
    UNION ALL
    SELECT w.path || c.ord::int, c.value
      FROM w, LATERAL (
        SELECT e.key, e.value, e.ord FROM jsonb_each(CASE WHEN jsonb_typeof(w.val) = 'object' THEN w.val END) WITH ORDINALITY AS e(key, value, ord)
        UNION ALL
        SELECT NULL, a.value, a.ord FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.val) = 'array' THEN w.val END) WITH ORDINALITY AS a(value, ord)
      ) AS c
     WHERE c.key IS NULL
        OR c.key <> ALL (ARRAY['id', 'type', 'role', 'toolCallId', 'callId', 'source', 'provenance', 'replayState', 'meta', 'attachment', 'usage'])
  )
  SELECT left(coalesce(string_agg(val #>> '{}', E'\\n' ORDER BY path), ''), 65536) FROM w WHERE jsonb_typeof(val) = 'string'
$fn$;

CREATE FUNCTION ${s}.search_normalize(p_text text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT regexp_replace(p_text, '[\\x01-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7f]+', ' ', 'g')
$fn$;

CREATE FUNCTION ${s}.search_data(p_data text) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT CASE WHEN p_data ~* '\\\\u(0000|d[89a-f][0-9a-f]{2})' THEN NULL ELSE p_data::jsonb END
$fn$;

CREATE FUNCTION ${s}.search_calls_of(p_type text, d jsonb) RETURNS TABLE (ord bigint, call_id text, name text) LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT b.ord, b.value ->> 'id', b.value ->> 'name'
    FROM jsonb_array_elements(CASE
           WHEN p_type <> 'assistant/message' THEN NULL
           WHEN jsonb_typeof(d -> 'message' -> 'content') = 'array' THEN d -> 'message' -> 'content'
           WHEN jsonb_typeof(d -> 'content') = 'array' THEN d -> 'content' END) WITH ORDINALITY AS b(value, ord)
   WHERE jsonb_typeof(b.value) = 'object' AND b.value ->> 'type' = 'tool-call'
     AND jsonb_typeof(b.value -> 'id') = 'string' AND jsonb_typeof(b.value -> 'name') = 'string'
$fn$;

CREATE FUNCTION ${s}.search_result_call(p_type text, d jsonb) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT CASE
    WHEN p_type <> 'tool/result' THEN NULL
    WHEN jsonb_typeof(d -> 'message' -> 'content') = 'array' AND jsonb_typeof(d -> 'message' -> 'content' -> 0 -> 'toolCallId') = 'string'
      THEN d -> 'message' -> 'content' -> 0 ->> 'toolCallId'
    WHEN jsonb_typeof(d -> 'callId') = 'string' THEN d ->> 'callId' END
$fn$;

CREATE TABLE ${s}.search_docs (
  session_id text    COLLATE "C" NOT NULL,
  seq        bigint  NOT NULL,
  type       text    NOT NULL,
  time       bigint  NOT NULL,
  entered    boolean NOT NULL,
  replace    boolean NOT NULL,
  tools      text[]  NOT NULL,
  text       text    NOT NULL,
  tsv        tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, ${s}.search_normalize(text))) STORED,
  PRIMARY KEY (session_id, seq)
);
CREATE INDEX search_docs_tsv ON ${s}.search_docs USING gin (tsv);
CREATE INDEX search_docs_newest ON ${s}.search_docs (time DESC, session_id DESC, seq DESC);
CREATE INDEX search_docs_replaces ON ${s}.search_docs (session_id) WHERE replace;

CREATE TABLE ${s}.search_calls (
  session_id text COLLATE "C" NOT NULL,
  call_id    text NOT NULL,
  name       text NOT NULL,
  PRIMARY KEY (session_id, call_id)
);

CREATE FUNCTION ${s}.search_index_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  d jsonb := ${s}.search_data(NEW.data);
  v_call text := ${s}.search_result_call(NEW.type, d);
  v_tools text[];
BEGIN
  IF v_call IS NOT NULL THEN
    SELECT coalesce(array_agg(c.name), '{}') INTO v_tools FROM ${s}.search_calls c WHERE c.session_id = NEW.session_id AND c.call_id = v_call;
  ELSE
    SELECT coalesce(array_agg(x.name ORDER BY x.ord), '{}') INTO v_tools FROM ${s}.search_calls_of(NEW.type, d) x;
    INSERT INTO ${s}.search_calls AS sc (session_id, call_id, name)
      SELECT DISTINCT ON (x.call_id) NEW.session_id, x.call_id, x.name FROM ${s}.search_calls_of(NEW.type, d) x ORDER BY x.call_id, x.ord DESC
      ON CONFLICT (session_id, call_id) DO UPDATE SET name = EXCLUDED.name;
  END IF;
  INSERT INTO ${s}.search_docs (session_id, seq, type, time, entered, replace, tools, text)
    VALUES (NEW.session_id, NEW.seq, NEW.type, NEW.time, NEW.surface_op IS NOT NULL, coalesce(NEW.surface_op <> 'append', false), v_tools,
            coalesce(${s}.search_text(d), ''));
  RETURN NULL;
END
$fn$;
CREATE TRIGGER search_index_event AFTER INSERT ON ${s}.events FOR EACH ROW WHEN (NEW.type IN (${TYPES})) EXECUTE FUNCTION ${s}.search_index_event();

CREATE FUNCTION ${s}.search_forget_session() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  DELETE FROM ${s}.search_docs WHERE session_id = OLD.id;
  DELETE FROM ${s}.search_calls WHERE session_id = OLD.id;
  RETURN NULL;
END
$fn$;
CREATE TRIGGER search_forget_session AFTER DELETE ON ${s}.sessions FOR EACH ROW EXECUTE FUNCTION ${s}.search_forget_session();
`;
}

/** Reindexes sessions `where` (a condition on e.session_id) from their events: the trigger's work, set-wise, in seq order. */
export function reindexSql(s: string, where: string): string {
  return `
DELETE FROM ${s}.search_docs e WHERE ${where};
DELETE FROM ${s}.search_calls e WHERE ${where};
WITH ev AS (
  SELECT e.session_id, e.seq, e.type, e.time, e.surface_op, ${s}.search_data(e.data) AS d
    FROM ${s}.events e WHERE e.type IN (${TYPES}) AND ${where}
), calls AS (
  SELECT ev.session_id, ev.seq, x.ord, x.call_id, x.name FROM ev, ${s}.search_calls_of(ev.type, ev.d) x
), done AS (
  INSERT INTO ${s}.search_calls (session_id, call_id, name)
    SELECT DISTINCT ON (session_id, call_id) session_id, call_id, name FROM calls ORDER BY session_id, call_id, seq DESC, ord DESC
)
INSERT INTO ${s}.search_docs (session_id, seq, type, time, entered, replace, tools, text)
  SELECT ev.session_id, ev.seq, ev.type, ev.time, ev.surface_op IS NOT NULL, coalesce(ev.surface_op <> 'append', false),
    CASE WHEN r.call_id IS NOT NULL THEN
      coalesce((SELECT ARRAY[c.name] FROM calls c WHERE c.session_id = ev.session_id AND c.call_id = r.call_id AND c.seq < ev.seq ORDER BY c.seq DESC, c.ord DESC LIMIT 1), '{}')
    ELSE coalesce((SELECT array_agg(c.name ORDER BY c.ord) FROM calls c WHERE c.session_id = ev.session_id AND c.seq = ev.seq), '{}') END,
    coalesce(${s}.search_text(ev.d), '')
  FROM ev, LATERAL (SELECT ${s}.search_result_call(ev.type, ev.d) AS call_id) r;`;
}

export const migration: PostgresMigration = {
  version: 5,
  description: 'search index (issue #40): search_docs with a tsvector GIN index, search_calls, kept by triggers; existing events indexed',
  async up(client, s) {
    await client.query(ddl(s));
    await client.query(reindexSql(s, 'true'));
  },
};
