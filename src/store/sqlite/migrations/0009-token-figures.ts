/**
 * Version 9: the token figures of every event row (issue #37; src/store/sqlite/token-figures.ts,
 * src/domain/event-tokens.ts), so that GetSession's `surface_tokens` and `usage` are sums over
 * structural columns instead of a parse of every message event's data.
 *
 * - events.tokens: the event's token estimate (the one estimator over the message it contributes
 *   to the model history); NULL for 0 (no message); -1 when the row's data holds blob references
 *   (the estimate needs the blob's bytes: readers compute it from the event).
 * - events.usage: an assistant/message's usage as "input,output,cacheRead,cacheWrite"; NULL when
 *   the event records none.
 * - events_structure is rebuilt with both columns last, still covering the structural scan, and
 *   covering the figure scan too (no `data` page read).
 * - Backfill: every existing row of a message type gets its figures from its data, with the same
 *   JS code new writes use (in chunks of the primary key: a statement cannot write while another
 *   iterates on the connection).
 */
import type Database from 'better-sqlite3';
import type { SqliteMigration } from './migration.js';
import type { Json, SessionEvent } from '../../../domain/event.js';
import { tokenColumns } from '../token-figures.js';
import { decodeSurfaceOp } from '../codec.js';

const BACKFILL_CHUNK = 2000;
const MESSAGE_TYPES = `('user/message', 'assistant/message', 'tool/result', 'steering/message')`;

export const migration: SqliteMigration = {
  version: 9,
  description: 'events.tokens and events.usage: each event\'s token figures, in events_structure',
  up(db: Database.Database): void {
    db.exec(`
ALTER TABLE events ADD COLUMN tokens INTEGER;
ALTER TABLE events ADD COLUMN usage TEXT;
DROP INDEX events_structure;
CREATE INDEX events_structure ON events (session_id, seq, type, surface_op, source_event_seqs, ignorable, scrc, dcrc, tokens, usage);
`);
    const select = db.prepare(
      `SELECT session_id, seq, type, data, surface_op FROM events
       WHERE (session_id > ? OR (session_id = ? AND seq > ?)) AND type IN ${MESSAGE_TYPES}
       ORDER BY session_id, seq LIMIT ${BACKFILL_CHUNK}`,
    ).raw();
    const update = db.prepare('UPDATE events SET tokens = ?, usage = ? WHERE session_id = ? AND seq = ?');
    let after: [string, number] = ['', -1];
    for (;;) {
      const rows = select.all(after[0], after[0], after[1]) as [string, number, string, string, string | null][];
      for (const [sessionId, seq, type, data, op] of rows) {
        const event = { type, seq, data: JSON.parse(data) as Json, surfaceOp: op === null ? undefined : decodeSurfaceOp(op) } as Pick<SessionEvent, 'type' | 'seq' | 'data' | 'surfaceOp'>;
        const [tokens, usage] = tokenColumns(event, data);
        if (tokens !== null || usage !== null) update.run(tokens, usage, sessionId, seq);
      }
      if (rows.length < BACKFILL_CHUNK) return;
      const last = rows[rows.length - 1]!;
      after = [last[0], last[1]];
    }
  },
};
