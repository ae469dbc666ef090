/**
 * The SQLite schema of Palimpsest. The version lives in `PRAGMA user_version` and the file is
 * marked with `PRAGMA application_id`. The statements below are the BASE schema, version 4, and
 * never change: later versions are the migrations of ./migrations/ (its index says how to add
 * one), applied to a fresh file in its creation transaction and to an older file when it opens
 * (migrate.ts). A file of a newer version, or older than version 4, is refused at open.
 */

/** `PRAGMA application_id` of a Palimpsest database: 'PALI'. */
export const APPLICATION_ID = 0x50414c49;

/** The schema version this build reads and writes: the last migration's (migrations/index.ts). */
export const SCHEMA_VERSION = 12;

/**
 * Schema objects, created in one transaction on a fresh database.
 *
 * - sessions: `pending` = 1 while a streamed import is in progress (invisible to readers), owned
 *   by `pending_owner` until `lease_until` (ms since epoch; a store open drops pending rows whose
 *   lease passed). `labels` is a JSON object of string values. The header's optional fields are
 *   NULL when absent. `writer` is the token of the last committed write (the conditional append's
 *   compare-and-set). `data_bytes` counts header + labels JSON bytes plus event data bytes (the
 *   quota's measure). `pairing_guard` is issue #14's session property. Version 3. `digest` is the
 *   running digest of the session's rows (integrity.ts). Version 4.
 * - tenants: per-tenant counters (`session_count` includes pending sessions; `data_bytes` is the
 *   sum of the tenant's sessions' data_bytes), updated in the transaction of every create,
 *   append, import chunk and delete, which checks the quota against them. Version 3.
 * - events: WITHOUT ROWID clustered on (session_id, seq), so a session's log is one contiguous
 *   b-tree range (a structural scan reads no other session's pages and there is no separate
 *   rowid b-tree to maintain on insert). `data` is the JSON text. `source_event_seqs` is NULL
 *   when absent, else a varint BLOB (zero-length for `[]`), see codec.ts. `surface_op` is NULL,
 *   the bare text `append`, or the replace object's JSON. `ignorable` is NULL or 1. `scrc` and `dcrc` are the row's CRC-32C values
 *   (integrity.ts; version 4).
 *   events_structure is a covering index of the structural columns: a cold open
 *   (readStructure) scans it instead of the table, whose pages are mostly `data` (measured on
 *   1M typical rows: the SQLite side of the scan drops from ~530 ms to ~190 ms, for one more
 *   small b-tree insert per event).
 * - idempotency: one row per idempotency key, written in the transaction of the events it
 *   acknowledges; `seqs` uses the same varint encoding; `surface_length` is the surface length
 *   the original response carried. Added in version 2, NOT NULL since version 3.
 */
export const SCHEMA_SQL = `
CREATE TABLE sessions (
  id               TEXT    NOT NULL PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  labels           TEXT    NOT NULL DEFAULT '{}' CHECK (json_type(labels) = 'object'),
  tenant           TEXT    NOT NULL DEFAULT '',
  strict           INTEGER NOT NULL DEFAULT 0 CHECK (strict IN (0, 1)),
  pairing_guard    INTEGER NOT NULL DEFAULT 0 CHECK (pairing_guard IN (0, 1)),
  writer           TEXT    NOT NULL DEFAULT '',
  pending          INTEGER NOT NULL DEFAULT 0 CHECK (pending IN (0, 1)),
  pending_owner    TEXT,
  lease_until      INTEGER,
  next_seq         INTEGER NOT NULL DEFAULT 0,
  event_count      INTEGER NOT NULL DEFAULT 0,
  data_bytes       INTEGER NOT NULL DEFAULT 0,
  digest           INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX sessions_by_age ON sessions (created_at DESC, id DESC);
CREATE INDEX sessions_by_tenant_age ON sessions (tenant, created_at DESC, id DESC);

CREATE INDEX sessions_pending ON sessions (lease_until) WHERE pending = 1;

CREATE TABLE tenants (
  tenant        TEXT    NOT NULL PRIMARY KEY,
  session_count INTEGER NOT NULL DEFAULT 0,
  data_bytes    INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;

CREATE TABLE events (
  session_id        TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT    NOT NULL,
  time              INTEGER NOT NULL,
  data              TEXT    NOT NULL,
  source_event_seqs BLOB,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable = 1),
  scrc              INTEGER NOT NULL,
  dcrc              INTEGER NOT NULL,
  PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;

CREATE INDEX events_structure ON events (session_id, seq, type, surface_op, source_event_seqs, ignorable, scrc, dcrc);

CREATE TABLE idempotency (
  session_id   TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  key          TEXT    NOT NULL,
  request_hash TEXT    NOT NULL,
  seqs           BLOB    NOT NULL,
  surface_length INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (session_id, key)
) STRICT, WITHOUT ROWID;
`;

/** The database clock in ms since epoch (SQLite's own: triggers cannot call into JavaScript). */
const NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`;

/** Inserts a feed record of the session row `r` (NEW or OLD). */
const FEED_INSERT = (r: 'NEW' | 'OLD', kind: string, types: string, previous: string): string => `
  INSERT INTO feed (tenant, session_id, kind, created_at, next_seq, event_count, surface_length, event_types, labels, previous_labels, time)
  VALUES (${r}.tenant, ${r}.id, '${kind}', ${r}.created_at, ${r}.next_seq, ${r}.event_count, ${r}.surface_length, ${types}, ${r}.labels, ${previous}, ${NOW_MS});`;

/**
 * The session feed (issue #35), added by migration 5 (migrations/0005-history-and-feed.ts; a
 * version-4 file written by a build of the feed has it already, every statement is idempotent).
 * Frozen like the base: a change to the feed is a new migration.
 *
 * - sessions.surface_length: the surface length after the last append (set by the group commit);
 *   sessions.metadata_version: the labels' version (0 at create, one more per updateLabels).
 * - feed: one row per change of a visible session, written by the triggers below in the
 *   transaction of the change itself, whichever connection made it (the store's, its writer
 *   thread's, another process's). `position` is an AUTOINCREMENT rowid: SQLite has one writer at
 *   a time, so positions increase in commit order and are never reused (even after rows are
 *   deleted); a reader that read up to position p never sees a record below p appear later.
 *   Positions are global; a tenant's records are read through feed_by_tenant, so a tenant's
 *   positions increase but are not consecutive.
 * - The triggers: created (insert of a visible session, or publish of an import), deleted, the
 *   labels changed, appended (next_seq moved forward: the types of the new events, in
 *   first-appearance order, read back from the events the transaction inserted).
 */
export const FEED_SQL = `
CREATE TABLE IF NOT EXISTS feed (
  position        INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant          TEXT    NOT NULL,
  session_id      TEXT    NOT NULL,
  kind            TEXT    NOT NULL CHECK (kind IN ('created', 'deleted', 'labels_changed', 'appended')),
  created_at      INTEGER NOT NULL,
  next_seq        INTEGER NOT NULL,
  event_count     INTEGER NOT NULL,
  surface_length  INTEGER NOT NULL,
  event_types     TEXT    NOT NULL,
  labels          TEXT    NOT NULL,
  previous_labels TEXT,
  time            INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS feed_by_tenant ON feed (tenant, position);

CREATE TRIGGER IF NOT EXISTS feed_created AFTER INSERT ON sessions WHEN NEW.pending = 0
BEGIN ${FEED_INSERT('NEW', 'created', "'[]'", 'NULL')} END;

CREATE TRIGGER IF NOT EXISTS feed_published AFTER UPDATE OF pending ON sessions WHEN OLD.pending = 1 AND NEW.pending = 0
BEGIN ${FEED_INSERT('NEW', 'created', "'[]'", 'NULL')} END;

CREATE TRIGGER IF NOT EXISTS feed_deleted AFTER DELETE ON sessions WHEN OLD.pending = 0
BEGIN ${FEED_INSERT('OLD', 'deleted', "'[]'", 'NULL')} END;

CREATE TRIGGER IF NOT EXISTS feed_labels AFTER UPDATE OF labels ON sessions WHEN NEW.pending = 0 AND OLD.labels IS NOT NEW.labels
BEGIN ${FEED_INSERT('NEW', 'labels_changed', "'[]'", 'OLD.labels')} END;

CREATE TRIGGER IF NOT EXISTS feed_appended AFTER UPDATE OF next_seq ON sessions
  WHEN NEW.pending = 0 AND OLD.pending = 0 AND NEW.next_seq > OLD.next_seq
BEGIN ${FEED_INSERT('NEW', 'appended',
    `(SELECT json_group_array(type) FROM (SELECT type FROM events WHERE session_id = NEW.id AND seq >= OLD.next_seq GROUP BY type ORDER BY min(seq)))`,
    'NULL')} END;
`;
