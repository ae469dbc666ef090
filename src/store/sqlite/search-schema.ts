/**
 * The SQLite search index (issue #40), kept by the writer in the append transaction: a trigger on
 * `events` indexes every message event in the transaction that inserts it, whichever connection
 * inserts it (the store's, its writer thread's, another process's), so there is no lag; a trigger
 * on `sessions` removes a deleted session's entries in the delete's transaction (retention too).
 *
 * The searchable text is computed by the domain (search-text.ts) through SQL functions this file
 * registers on every connection that writes (configureConnection): a connection without them
 * cannot insert message events (SQLite says "no such function: palimpsest_search_doc"), which
 * is why every Palimpsest connection registers them.
 *
 * - search_docs: one row per indexed event: its type, time, whether it entered the surface
 *   (`entered`) and whether it is a replace (`replace`), the tools it calls or answers (a JSON
 *   array) and its searchable text. `doc` is the FTS rowid.
 * - search_calls: the session's tool calls (call id -> tool name, the latest wins), so a
 *   tool/result is indexed under the name of the call it answers.
 * - search_fts: an FTS5 external-content table over search_docs.text, tokenizer
 *   `unicode61 remove_diacritics 2` (letters, digits and private-use characters are token
 *   characters; case and diacritics folded), with prefix indexes for 2- and 3-character
 *   prefixes (`foo*` with a short prefix stays an index range scan). Kept in step with
 *   search_docs by its triggers.
 *
 * Until the schema migrations land (issue #39), this DDL is added at open like the feed (every
 * statement idempotent, no version bump); a file that had events before gets them indexed in the
 * same transaction (see ensureSearch in search.ts).
 */
import type Database from 'better-sqlite3';
import type { Json } from '../../domain/event.js';
import { SEARCH_EVENT_TYPES, searchResultCallId, searchText, searchToolCalls } from '../../domain/search-text.js';

/** The indexed types as an SQL list. */
export const SEARCH_TYPES_SQL = [...SEARCH_EVENT_TYPES].map((t) => `'${t}'`).join(', ');

/** What the index derives from one event (see {@link searchDocOf}). */
export interface SearchDocParts {
  /** Searchable text. */
  readonly t: string;
  /** Tool calls it makes: [call id, tool name]. */
  readonly c: [string, string][];
  /** The call id it answers, or null. */
  readonly r: string | null;
}

/** The index entry parts of an event of an indexed type, from its stored data text. */
export function searchDocOf(type: string, dataText: string): SearchDocParts {
  const data = JSON.parse(dataText) as Json;
  return { t: searchText(type, data, dataText) ?? '', c: searchToolCalls(type, data), r: searchResultCallId(type, data) ?? null };
}

/**
 * Registers palimpsest_search_doc(type, data) -> JSON of SearchDocParts on a connection. The
 * trigger calls it twice for an assistant message (its text, then its calls): the last answer is
 * kept for the second call.
 */
export function registerSearchFunctions(db: Database.Database): void {
  let lastType = '';
  let lastData = '';
  let last = '';
  db.function('palimpsest_search_doc', { deterministic: true }, (type: unknown, data: unknown) => {
    const t = String(type);
    const d = String(data);
    if (t === lastType && d === lastData) return last;
    last = JSON.stringify(searchDocOf(t, d));
    lastType = t;
    lastData = d;
    return last;
  });
}

/** The search index DDL (idempotent). */
export const SEARCH_SQL = `
CREATE TABLE IF NOT EXISTS search_docs (
  doc        INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  seq        INTEGER NOT NULL,
  type       TEXT    NOT NULL,
  time       INTEGER NOT NULL,
  entered    INTEGER NOT NULL,
  replace    INTEGER NOT NULL,
  tools      TEXT    NOT NULL,
  text       TEXT    NOT NULL
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS search_docs_event ON search_docs (session_id, seq);
CREATE INDEX IF NOT EXISTS search_docs_newest ON search_docs (time DESC, session_id DESC, seq DESC);
CREATE INDEX IF NOT EXISTS search_docs_replaces ON search_docs (session_id) WHERE replace = 1;

CREATE TABLE IF NOT EXISTS search_calls (
  session_id TEXT NOT NULL,
  call_id    TEXT NOT NULL,
  name       TEXT NOT NULL,
  PRIMARY KEY (session_id, call_id)
) STRICT, WITHOUT ROWID;

CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5(
  text, content = 'search_docs', content_rowid = 'doc', tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3'
);

CREATE TRIGGER IF NOT EXISTS search_docs_ai AFTER INSERT ON search_docs BEGIN
  INSERT INTO search_fts (rowid, text) VALUES (NEW.doc, NEW.text);
END;
CREATE TRIGGER IF NOT EXISTS search_docs_ad AFTER DELETE ON search_docs BEGIN
  INSERT INTO search_fts (search_fts, rowid, text) VALUES ('delete', OLD.doc, OLD.text);
END;

CREATE TRIGGER IF NOT EXISTS search_events_ai AFTER INSERT ON events WHEN NEW.type IN (${SEARCH_TYPES_SQL}) BEGIN
  INSERT INTO search_docs (session_id, seq, type, time, entered, replace, tools, text)
    SELECT NEW.session_id, NEW.seq, NEW.type, NEW.time, NEW.surface_op IS NOT NULL, coalesce(NEW.surface_op <> 'append', 0),
      CASE WHEN p.d ->> '$.r' IS NOT NULL
        THEN coalesce((SELECT json_array(c.name) FROM search_calls c WHERE c.session_id = NEW.session_id AND c.call_id = p.d ->> '$.r'), '[]')
        ELSE (SELECT json_group_array(e.value ->> '$[1]') FROM json_each(p.d, '$.c') e) END,
      p.d ->> '$.t'
    FROM (SELECT palimpsest_search_doc(NEW.type, NEW.data) AS d) p;
  INSERT OR REPLACE INTO search_calls (session_id, call_id, name)
    SELECT NEW.session_id, e.value ->> '$[0]', e.value ->> '$[1]'
      FROM json_each(CASE WHEN NEW.type = 'assistant/message' THEN palimpsest_search_doc(NEW.type, NEW.data) ELSE '{}' END, '$.c') e;
END;

CREATE TRIGGER IF NOT EXISTS search_sessions_ad AFTER DELETE ON sessions BEGIN
  DELETE FROM search_docs WHERE session_id = OLD.id;
  DELETE FROM search_calls WHERE session_id = OLD.id;
END;
`;
