/**
 * Version 6: the search index (issue #40), kept by the writer in the append transaction.
 *
 * - search_docs: one row per message event (user/message, assistant/message, tool/result,
 *   steering/message): session, seq, type, time, whether it entered the surface (`entered`) and
 *   whether it is a replace (`replace`), the tools it calls or answers (a JSON array) and its
 *   searchable text (src/domain/search-text.ts). `doc` is the FTS rowid. search_docs_newest
 *   serves the newest-first order, search_docs_replaces tells whether a session has a replace.
 * - search_calls: a session's tool calls (call id -> tool name, the latest wins), so a tool/result
 *   is indexed under the name of the call it answers.
 * - search_fts: FTS5, external content (search_docs.text), tokenizer
 *   `unicode61 remove_diacritics 2`, prefix indexes of 2 and 3 characters; kept in step with
 *   search_docs by search_docs_ai / search_docs_ad.
 * - search_events_ai: indexes a message event in the transaction that inserts it, whichever
 *   connection does (it calls palimpsest_search_doc, which every Palimpsest connection
 *   registers: ../search-schema.ts). search_sessions_ad: a deleted session (retention too)
 *   leaves nothing in the index.
 *
 * Existing events are indexed here, in the migration's transaction (one pass over the message
 * events, in seq order per session); `palimpsest reindex` rebuilds the index online later.
 */
import type Database from 'better-sqlite3';
import { searchDocOf } from '../search-schema.js';
import type { SqliteMigration } from './migration.js';

const DDL = `
CREATE TABLE search_docs (
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
CREATE UNIQUE INDEX search_docs_event ON search_docs (session_id, seq);
CREATE INDEX search_docs_newest ON search_docs (time DESC, session_id DESC, seq DESC);
CREATE INDEX search_docs_replaces ON search_docs (session_id) WHERE replace = 1;

CREATE TABLE search_calls (
  session_id TEXT NOT NULL,
  call_id    TEXT NOT NULL,
  name       TEXT NOT NULL,
  PRIMARY KEY (session_id, call_id)
) STRICT, WITHOUT ROWID;

CREATE VIRTUAL TABLE search_fts USING fts5(
  text, content = 'search_docs', content_rowid = 'doc', tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3'
);

CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN
  INSERT INTO search_fts (rowid, text) VALUES (NEW.doc, NEW.text);
END;
CREATE TRIGGER search_docs_ad AFTER DELETE ON search_docs BEGIN
  INSERT INTO search_fts (search_fts, rowid, text) VALUES ('delete', OLD.doc, OLD.text);
END;

CREATE TRIGGER search_events_ai AFTER INSERT ON events WHEN NEW.type IN ('user/message', 'assistant/message', 'tool/result', 'steering/message') BEGIN
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

CREATE TRIGGER search_sessions_ad AFTER DELETE ON sessions BEGIN
  DELETE FROM search_docs WHERE session_id = OLD.id;
  DELETE FROM search_calls WHERE session_id = OLD.id;
END;
`;

/** Indexes the events a database already has (what the trigger would have done, in seq order per session). */
function indexExisting(db: Database.Database): void {
  const rows = db.prepare(`SELECT seq, type, time, data, surface_op FROM events
    WHERE session_id = ? AND type IN ('user/message', 'assistant/message', 'tool/result', 'steering/message') ORDER BY seq`).raw();
  const insertDoc = db.prepare('INSERT INTO search_docs (session_id, seq, type, time, entered, replace, tools, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  const insertCall = db.prepare('INSERT OR REPLACE INTO search_calls (session_id, call_id, name) VALUES (?, ?, ?)');
  for (const sid of db.prepare('SELECT id FROM sessions').pluck().all() as string[]) {
    const calls = new Map<string, string>();
    for (const [seq, type, time, data, op] of rows.all(sid) as [number, string, number, string, string | null][]) {
      const p = searchDocOf(type, data);
      const answered = p.r === null ? undefined : calls.get(p.r);
      const tools = p.r === null ? p.c.map(([, n]) => n) : answered === undefined ? [] : [answered];
      if (type === 'assistant/message') {
        for (const [id, name] of p.c) {
          calls.set(id, name);
          insertCall.run(sid, id, name);
        }
      }
      insertDoc.run(sid, seq, type, time, op === null ? 0 : 1, op !== null && op !== 'append' ? 1 : 0, JSON.stringify(tools), p.t);
    }
  }
}

export const migration: SqliteMigration = {
  version: 6,
  description: 'search index (issue #40): search_docs, search_calls, FTS5 search_fts, kept by triggers; existing events indexed',
  up(db: Database.Database): void {
    db.exec(DDL);
    indexExisting(db);
  },
};
