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
 * The tables and triggers are created by migration 0006-search-index.ts (schema version 6), which
 * also indexes the events a file already had, in the migration's transaction.
 */
import type Database from 'better-sqlite3';
import type { Json } from '../../domain/event.js';
import { SEARCH_EVENT_TYPES, searchDoc } from '../../domain/search-text.js';

/** The indexed types as an SQL list (the migration's trigger has its own frozen copy). */
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
  const d = searchDoc(type, JSON.parse(dataText) as Json, dataText);
  return { t: d?.text ?? '', c: d?.calls ?? [], r: d?.callId ?? null };
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
