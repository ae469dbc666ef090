/**
 * The prepared statements of the SQLite store, created once per connection (never in a loop or a
 * request handler).
 */
import type Database from 'better-sqlite3';
import { EVENT_COLUMNS, EVENT_LINE, EVENT_PAGE, SESSION_COLUMNS, SESSION_READ_COLUMNS, type EventRow } from './row-codec.js';
import { SELECT_TOKEN_FIGURES, TOKEN_COLUMNS } from './token-figures.js';

/** Columns of an event row (EventRow: session_id and EVENT_COLUMNS). */
const ROW_WIDTH = 1 + EVENT_COLUMNS.split(',').length + TOKEN_COLUMNS.split(',').length;
const ROW_VALUES = `(${Array<string>(ROW_WIDTH).fill('?').join(', ')})`;
/** Rows per multi-row INSERT (no gain beyond ~10 rows: 40 per statement cost 17.8k instructions per row). */
const INSERT_CHUNK = 10;

/**
 * Prepares every statement of the store on `db`. With `checked`, event reads select each row's
 * line (EVENT_LINE: checked by the checksum extension, sqlite-ext.ts, one value per row)
 * instead of its columns and checksums.
 */
export function prepareStatements(db: Database.Database, checked: boolean) {
  const read = checked ? EVENT_LINE : EVENT_COLUMNS;
  /** A row per event: its line (pluck) or its columns (raw). */
  const rows = (st: Database.Statement): Database.Statement => (checked ? st.pluck() : st.raw());
  const listSql = (tenant: boolean, labels: boolean): string =>
    `SELECT ${SESSION_READ_COLUMNS} FROM sessions AS s
     WHERE s.pending = 0 ${tenant ? 'AND s.tenant = @tenant' : ''}
       AND (s.created_at < @createdAt OR (s.created_at = @createdAt AND s.id < @id))
       ${
         labels
           ? `AND NOT EXISTS (SELECT 1 FROM json_each(@labels) AS w
                WHERE NOT EXISTS (SELECT 1 FROM json_each(s.labels) AS l WHERE l.key = w.key AND l.value = w.value))`
           : ''
       }
     ORDER BY s.created_at DESC, s.id DESC LIMIT @limit`;
  const insertEvent = db.prepare(`INSERT INTO events (session_id, ${EVENT_COLUMNS}, ${TOKEN_COLUMNS}) VALUES ${ROW_VALUES}`);
  const insertChunk = db.prepare(`INSERT INTO events (session_id, ${EVENT_COLUMNS}, ${TOKEN_COLUMNS}) VALUES ${Array<string>(INSERT_CHUNK).fill(ROW_VALUES).join(', ')}`);
  const chunkArgs: unknown[] = new Array(INSERT_CHUNK * ROW_WIDTH);
  const insertOne = (r: EventRow): Database.RunResult => insertEvent.run(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11]);
  return {
    insertSession: db.prepare(
      `INSERT INTO sessions (${SESSION_COLUMNS}, pending, pending_owner, lease_until, digest)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO NOTHING`,
    ),
    selectSession: db.prepare(`SELECT ${SESSION_READ_COLUMNS} FROM sessions WHERE id = ? AND pending = 0`).raw(),
    // UpdateSession (issue #35): a compare-and-set on the metadata version; labels bytes count toward the quota.
    selectForUpdate: db.prepare('SELECT metadata_version, tenant, labels FROM sessions WHERE id = ? AND pending = 0').raw(),
    updateLabels: db.prepare('UPDATE sessions SET labels = ?, metadata_version = metadata_version + 1, data_bytes = data_bytes + ? WHERE id = ?'),
    selectVisible: db.prepare('SELECT 1 FROM sessions WHERE id = ? AND pending = 0').pluck(),
    selectHead: db.prepare('SELECT next_seq, writer, tenant, created_at, digest, surface_length FROM sessions WHERE id = ? AND pending = 0').raw(),
    selectPendingHead: db.prepare('SELECT next_seq, pending_owner, tenant, digest FROM sessions WHERE id = ? AND pending = 1').raw(),
    selectDigest: db.prepare('SELECT digest, next_seq, created_at FROM sessions WHERE id = ?').raw(),
    selectForDelete: db.prepare('SELECT tenant, data_bytes, next_seq, created_at, pending FROM sessions WHERE id = ?').raw(),
    selectOwnedPending: db.prepare('SELECT tenant, data_bytes FROM sessions WHERE id = ? AND pending = 1 AND pending_owner = ?').raw(),
    selectTenant: db.prepare('SELECT session_count, data_bytes FROM tenants WHERE tenant = ?').raw(),
    selectTenantBytes: db.prepare('SELECT data_bytes FROM tenants WHERE tenant = ?').pluck(),
    selectTenantCounts: db.prepare('SELECT tenant, session_count FROM tenants').raw(),
    addTenant: db.prepare(
      `INSERT INTO tenants (tenant, session_count, data_bytes) VALUES (?, ?, ?)
       ON CONFLICT (tenant) DO UPDATE SET session_count = session_count + excluded.session_count, data_bytes = data_bytes + excluded.data_bytes`,
    ),
    deleteSessionStmt: db.prepare('DELETE FROM sessions WHERE id = ?'),
    publishStmt: db.prepare('UPDATE sessions SET pending = 0, pending_owner = NULL, lease_until = NULL WHERE id = ? AND pending = 1 AND pending_owner = ?'),
    // An import's metadata trailer (issue #35), set before the publish in its transaction.
    publishMetadata: db.prepare(
      'UPDATE sessions SET labels = ?, pairing_guard = ?, data_bytes = data_bytes + ? WHERE id = ? AND pending = 1 AND pending_owner = ? RETURNING tenant',
    ).pluck(),
    updateCounters: db.prepare(
      'UPDATE sessions SET next_seq = ?, event_count = event_count + ?, data_bytes = data_bytes + ?, writer = ?, digest = ?, surface_length = ? WHERE id = ?',
    ),
    updatePending: db.prepare(
      'UPDATE sessions SET next_seq = ?, event_count = event_count + ?, data_bytes = data_bytes + ?, lease_until = ?, digest = ? WHERE id = ?',
    ),
    /**
     * Inserts event rows in order: INSERT_CHUNK rows per statement, then the rest one by one, the
     * values passed as arguments (better-sqlite3 reads an array argument element by element
     * through the V8 API). Instructions per row, callgrind, 40,000 rows: 29.5k one row per
     * statement from an array, 24.9k as arguments, 16.5k ten rows per statement.
     */
    insertEvents: (rows: readonly EventRow[]): void => {
      let i = 0;
      if (rows.length >= INSERT_CHUNK) {
        try {
          for (; i + INSERT_CHUNK <= rows.length; i += INSERT_CHUNK) {
            for (let k = 0; k < INSERT_CHUNK; k++) {
              const r = rows[i + k]!;
              for (let c = 0; c < ROW_WIDTH; c++) chunkArgs[k * ROW_WIDTH + c] = r[c];
            }
            insertChunk.run(...chunkArgs);
          }
        } finally {
          // Holds no row past the call (nor past a failed one).
          chunkArgs.fill(undefined);
        }
      }
      for (; i < rows.length; i++) insertOne(rows[i]!);
    },
    selectTokenFigures: db.prepare(SELECT_TOKEN_FIGURES).pluck(),
    selectIdempotent: db.prepare('SELECT request_hash, seqs, surface_length FROM idempotency WHERE session_id = ? AND key = ?').raw(),
    insertIdempotent: db.prepare(
      'INSERT INTO idempotency (session_id, key, request_hash, seqs, surface_length, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    readForward: rows(db.prepare(`SELECT ${read} FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`)),
    readBackward: rows(db.prepare(`SELECT ${read} FROM events WHERE session_id = ? AND seq <= ? ORDER BY seq DESC LIMIT ?`)),
    readForwardTyped: rows(
      db.prepare(
        `SELECT ${read} FROM events WHERE session_id = ? AND seq >= ?
         AND type IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT ?`,
      ),
    ),
    readBackwardTyped: rows(
      db.prepare(
        `SELECT ${read} FROM events WHERE session_id = ? AND seq <= ?
         AND type IN (SELECT value FROM json_each(?)) ORDER BY seq DESC LIMIT ?`,
      ),
    ),
    // A page in the wire form (EncodedEventPage; sqlite-ext/sqlite-checksums.c palimpsest_event_page),
    // with the extension only: at most @rows rows (the page and one more, for its next seq).
    readPage: checked ? pageStatements(db) : undefined,
    selectBySeqs: rows(
      db.prepare(
        `SELECT ${read} FROM events WHERE session_id = ? AND seq IN (SELECT value FROM json_each(?)) ORDER BY seq`,
      ),
    ),
    // One TEXT value per row (see decodeStructureLine): better-sqlite3 materialises a value per
    // column and an array per raw row through the V8 API, which dominates a 1M-row scan; one
    // plucked string per row halves the time and the memory of five raw columns (measured).
    // hex(NULL) is '', hence the explicit '-' for an absent list.
    selectStructure: db
      .prepare(
        `SELECT scrc || ',' || dcrc || ',' || CASE WHEN surface_op IS NULL AND source_event_seqs IS NULL AND ignorable IS NULL
           THEN seq || '\t' || type
           WHEN surface_op = 'append' AND source_event_seqs IS NULL AND ignorable IS NULL
           THEN seq || '+\t' || type
           ELSE seq || ':' || coalesce(surface_op, '') || '\t' || iif(source_event_seqs IS NULL, '-', hex(source_event_seqs)) || '\t' ||
                coalesce(ignorable, '') || '\t' || type
         END
         FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`,
      )
      .pluck(),
    // Time travel (issue #14): the surface rows of a prefix only, in decodeStructureLine's format
    // (with the row checksums: a damaged row is never replayed silently).
    selectSurfaceStructure: db
      .prepare(
        `SELECT scrc || ',' || dcrc || ',' || CASE WHEN surface_op = 'append' AND source_event_seqs IS NULL AND ignorable IS NULL
           THEN seq || '+\t' || type
           ELSE seq || ':' || surface_op || '\t' || iif(source_event_seqs IS NULL, '-', hex(source_event_seqs)) || '\t' ||
                coalesce(ignorable, '') || '\t' || type
         END
         FROM events WHERE session_id = ? AND seq <= ? AND surface_op IS NOT NULL ORDER BY seq`,
      )
      .pluck(),
    selectHeadAtOrBefore: db.prepare('SELECT max(seq) FROM events WHERE session_id = ? AND seq <= ?').pluck(),
    listStatements: [
      db.prepare(listSql(false, false)).raw(),
      db.prepare(listSql(false, true)).raw(),
      db.prepare(listSql(true, false)).raw(),
      db.prepare(listSql(true, true)).raw(),
    ],
  };
}

/** ListEvents pages encoded by the extension, forward / backward, all types / some (json_each(@types)). */
function pageStatements(db: Database.Database) {
  const page = (forward: boolean, typed: boolean): Database.Statement =>
    db
      .prepare(
        // No ORDER BY inside the aggregate (that sorts the rows again: twice the time): the rows
        // come in the subquery's order, which the extension checks (out of order, it hands back).
        `SELECT ${EVENT_PAGE}(@limit, @budget, ${forward ? 1 : 0}, ${EVENT_COLUMNS})
         FROM (SELECT ${EVENT_COLUMNS} FROM events WHERE session_id = @sessionId AND seq ${forward ? '>=' : '<='} @fromSeq
           ${typed ? 'AND type IN (SELECT value FROM json_each(@types))' : ''} ORDER BY seq${forward ? '' : ' DESC'} LIMIT @rows)`,
      )
      .pluck();
  return { forward: page(true, false), backward: page(false, false), forwardTyped: page(true, true), backwardTyped: page(false, true) };
}

/** The store's statements. */
export type Statements = ReturnType<typeof prepareStatements>;
