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

/** A log's figures from a seq (rows without figures left out), over the covering index. */
export const SELECT_TOKEN_FIGURES =
  `SELECT seq, tokens, usage FROM events INDEXED BY events_structure
   WHERE session_id = ? AND seq >= ? AND (tokens IS NOT NULL OR usage IS NOT NULL) ORDER BY seq`;

/** The token figure values of a row of `event` whose data text is `dataText` (`known`: the figures its writer gave). */
export function tokenColumns(event: Pick<SessionEvent, 'type' | 'seq' | 'data' | 'surfaceOp'>, dataText: string, known?: EventTokenFigures): [number | null, string | null] {
  const f = known ?? storedTokenFigures(event, dataText);
  return [f.tokens === 0 ? null : f.tokens, f.usage ?? null];
}

/** A raw row of SELECT_TOKEN_FIGURES. */
export type TokenFigureRaw = [seq: number, tokens: number | null, usage: string | null];

/** TokenFigureRows of the raw rows of SELECT_TOKEN_FIGURES. */
export function tokenFigureRows(raw: readonly TokenFigureRaw[]): TokenFigureRows {
  const n = raw.length;
  const seqs = new Array<number>(n);
  const tokens = new Array<number>(n);
  const usage = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const r = raw[i]!;
    seqs[i] = r[0];
    tokens[i] = r[1] ?? 0;
    usage[i] = r[2] ?? '';
  }
  return { seqs, tokens, usage };
}
