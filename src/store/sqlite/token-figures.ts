/**
 * The token figure columns of the SQLite events table (issue #37, domain/event-tokens.ts):
 * `tokens` (the event's estimate; NULL for 0; -1 when the row's data holds blob references, whose
 * bytes the estimate would need: the app reads such an event) and `usage` (the usage text of an
 * assistant/message, NULL for none). Written with the row; covered by events_structure, so
 * readTokenFigures scans that index, never a `data` page.
 */
import type { TokenFigureRows } from '../../app/ports/capabilities.js';
import type { SessionEvent } from '../../domain/event.js';
import { storedTokenFigures, type EventTokenFigures } from '../../domain/event-tokens.js';

/** The columns, in EventRow order after the event columns. */
export const TOKEN_COLUMNS = 'tokens, usage';

/**
 * A log's figures from a seq (rows without figures left out), over the covering index, as ONE
 * text: a line `<seq> <tokens>[ <usage>]` per row, ascending (NULL on no row). One value instead of
 * three per row: better-sqlite3 materialises every value through the V8 API, which dominated the
 * read (75k rows: ~3x the time of this text and its parse, measured).
 */
export const SELECT_TOKEN_FIGURES =
  `SELECT group_concat(seq || ' ' || coalesce(tokens, 0) || iif(usage IS NULL, '', ' ' || usage), char(10) ORDER BY seq)
     FROM events INDEXED BY events_structure
    WHERE session_id = ? AND seq >= ? AND (tokens IS NOT NULL OR usage IS NOT NULL)`;

/** The token figure values of a row of `event` whose data text is `dataText` (`known`: the figures its writer gave). */
export function tokenColumns(event: Pick<SessionEvent, 'type' | 'seq' | 'data' | 'surfaceOp'>, dataText: string, known?: EventTokenFigures): [number | null, string | null] {
  const f = known ?? storedTokenFigures(event, dataText);
  return [f.tokens === 0 ? null : f.tokens, f.usage ?? null];
}

/** The value of SELECT_TOKEN_FIGURES. */
export type TokenFigureRaw = string | null;

/** Reads an integer (a leading '-' allowed) of `text` at `pos`: [value, the position after it]. */
function intAt(text: string, pos: number): [number, number] {
  let negative = false;
  if (text.charCodeAt(pos) === 45 /* - */) {
    negative = true;
    pos++;
  }
  let n = 0;
  let code = text.charCodeAt(pos);
  while (code >= 48 && code <= 57) {
    n = n * 10 + (code - 48);
    code = text.charCodeAt(++pos);
  }
  return [negative ? -n : n, pos];
}

/** TokenFigureRows of the text of SELECT_TOKEN_FIGURES. */
export function tokenFigureRows(text: TokenFigureRaw): TokenFigureRows {
  const seqs: number[] = [];
  const tokens: number[] = [];
  const usage: string[] = [];
  if (text === null) return { seqs, tokens, usage };
  let pos = 0;
  while (pos < text.length) {
    const [seq, a] = intAt(text, pos);
    const [t, b] = intAt(text, a + 1);
    let end = b;
    let u = '';
    if (text.charCodeAt(b) === 32) {
      end = text.indexOf('\n', b + 1);
      if (end < 0) end = text.length;
      u = text.slice(b + 1, end);
    }
    seqs.push(seq);
    tokens.push(t);
    usage.push(u);
    pos = end + 1;
  }
  return { seqs, tokens, usage };
}
