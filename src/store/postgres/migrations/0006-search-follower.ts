/**
 * Version 6: the search index is kept by a follower of the session feed instead of the writer
 * (issue #40; ../search-follow.ts), one indexer at a time across replicas (an advisory lock).
 *
 * - The search_index_event trigger (and its function) are dropped: appends no longer index.
 * - search_follow: per tenant, `position`: the tenant's feed records at or below it are indexed
 *   (a tenant's positions are given under its feed_heads row lock, so they commit in order).
 * - search_progress: per session, `next_seq`: its events below it are indexed.
 * - search_index_range(session, from, to): indexes a session's message events with seq in
 *   [from, to), in seq order: what the dropped trigger did per event (tools of a tool result from
 *   the calls indexed before it).
 * - search_forget_session() also forgets the session's progress.
 *
 * The index the trigger kept was complete: marks start at feed_heads, progress at next_seq.
 */
import type { PostgresMigration } from './migration.js';

const TYPES = `'user/message', 'assistant/message', 'tool/result', 'steering/message'`;

export const migration: PostgresMigration = {
  version: 6,
  description: 'search index kept by a feed follower: search_index_event dropped, search_follow, search_progress, search_index_range',
  async up(client, s) {
    await client.query(`
DROP TRIGGER search_index_event ON ${s}.events;
DROP FUNCTION ${s}.search_index_event();

CREATE TABLE ${s}.search_follow (
  tenant   text   NOT NULL PRIMARY KEY,
  position bigint NOT NULL
);
CREATE TABLE ${s}.search_progress (
  session_id text   COLLATE "C" NOT NULL PRIMARY KEY,
  next_seq   bigint NOT NULL
);
INSERT INTO ${s}.search_follow (tenant, position) SELECT tenant, position FROM ${s}.feed_heads;
INSERT INTO ${s}.search_progress (session_id, next_seq) SELECT id, next_seq FROM ${s}.sessions WHERE next_seq > 0;

CREATE FUNCTION ${s}.search_index_range(p_session text, p_from bigint, p_to bigint) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  r record;
  d jsonb;
  v_call text;
  v_tools text[];
BEGIN
  FOR r IN SELECT e.seq, e.type, e.time, e.surface_op, e.data FROM ${s}.events e
            WHERE e.session_id = p_session AND e.seq >= p_from AND e.seq < p_to AND e.type IN (${TYPES}) ORDER BY e.seq LOOP
    d := ${s}.search_data(r.data);
    v_call := ${s}.search_result_call(r.type, d);
    IF v_call IS NOT NULL THEN
      SELECT coalesce(array_agg(c.name), '{}') INTO v_tools FROM ${s}.search_calls c WHERE c.session_id = p_session AND c.call_id = v_call;
    ELSE
      SELECT coalesce(array_agg(x.name ORDER BY x.ord), '{}') INTO v_tools FROM ${s}.search_calls_of(r.type, d) x;
      INSERT INTO ${s}.search_calls AS sc (session_id, call_id, name)
        SELECT DISTINCT ON (x.call_id) p_session, x.call_id, x.name FROM ${s}.search_calls_of(r.type, d) x ORDER BY x.call_id, x.ord DESC
        ON CONFLICT (session_id, call_id) DO UPDATE SET name = EXCLUDED.name;
    END IF;
    INSERT INTO ${s}.search_docs (session_id, seq, type, time, entered, replace, tools, text)
      VALUES (p_session, r.seq, r.type, r.time, r.surface_op IS NOT NULL, coalesce(r.surface_op <> 'append', false), v_tools,
              coalesce(${s}.search_text(d), ''));
  END LOOP;
END
$fn$;

CREATE OR REPLACE FUNCTION ${s}.search_forget_session() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  DELETE FROM ${s}.search_docs WHERE session_id = OLD.id;
  DELETE FROM ${s}.search_calls WHERE session_id = OLD.id;
  DELETE FROM ${s}.search_progress WHERE session_id = OLD.id;
  RETURN NULL;
END
$fn$;
`);
  },
};
