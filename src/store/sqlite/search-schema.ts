/**
 * The SQLite search index (issue #40). Since schema 11 its tables live in a file of their own
 * (search-file.ts; the list below is where they came from; the file's version 2 keeps no text and a contentless search_fts). Since schema 10 it is kept by a follower of the session
 * feed (search-follow.ts), off the append path; schemas 7 and 8 kept it in the append transaction
 * by a trigger calling the SQL functions this file registers (still registered on every
 * connection: migration 7 runs them when an older file is migrated). A trigger on `sessions`
 * removes a deleted session's entries in the delete's transaction (retention too).
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
 * The tables and triggers are created by migration 0006-search-index.ts (schema version 6), which
 * also indexes the events a file already had, in the migration's transaction.
 */
import type Database from 'better-sqlite3';
import type { Json } from '../../domain/event.js';
import { searchDoc, searchText } from '../../domain/search-text.js';

/** What the index derives from one event (see {@link searchDocOf}). */
export interface SearchDocParts {
  /** Searchable text. */
  readonly t: string;
  /** Tool calls it makes: [call id, tool name]. */
  readonly c: [string, string][];
  /** The call id it answers, or null. */
  readonly r: string | null;
}

/**
 * The index entry parts of an event of an indexed type, from its stored data text. Data that does
 * not parse (a damaged row: reads answer DATA_LOSS for it and `verify` names it) is indexed with
 * empty text, findable by its fields only: one bad row must not stop the follower, whose mark
 * would never move again for any tenant.
 */
export function searchDocOf(type: string, dataText: string): SearchDocParts {
  let data: Json;
  try {
    data = JSON.parse(dataText) as Json;
  } catch {
    return { t: '', c: [], r: null };
  }
  const d = searchDoc(type, data, dataText);
  return { t: d?.text ?? '', c: d?.calls ?? [], r: d?.callId ?? null };
}

/**
 * The searchable text of an event of an indexed type from its stored data text (cut as the index's
 * text is, to MAX_SEARCH_TEXT code points): what a hit's snippet is made from. Data that does not
 * parse gives '' (as {@link searchDocOf}).
 */
export function searchSnippetText(type: string, dataText: string): string {
  let data: Json;
  try {
    data = JSON.parse(dataText) as Json;
  } catch {
    return '';
  }
  return searchText(type, data, dataText) ?? '';
}

/**
 * Registers the trigger's functions on a connection: palimpsest_search_text(type, data) (the
 * searchable text), palimpsest_search_calls(type, data) (a JSON array of [call id, tool name], NULL
 * when none) and palimpsest_search_answers(type, data) (the call id a tool result answers, or
 * NULL). The trigger calls them on the same event one after the other: the last event's parts
 * are kept, so its data is parsed once.
 */
export function registerSearchFunctions(db: Database.Database): void {
  let lastType = '';
  let lastData = '';
  let last: SearchDocParts = { t: '', c: [], r: null };
  const parts = (type: unknown, data: unknown): SearchDocParts => {
    const t = String(type);
    const d = String(data);
    if (t !== lastType || d !== lastData) {
      last = searchDocOf(t, d);
      lastType = t;
      lastData = d;
    }
    return last;
  };
  db.function('palimpsest_search_text', { deterministic: true }, (type: unknown, data: unknown) => parts(type, data).t);
  db.function('palimpsest_search_calls', { deterministic: true }, (type: unknown, data: unknown) => {
    const c = parts(type, data).c;
    return c.length === 0 ? null : JSON.stringify(c);
  });
  db.function('palimpsest_search_answers', { deterministic: true }, (type: unknown, data: unknown) => parts(type, data).r);
}
