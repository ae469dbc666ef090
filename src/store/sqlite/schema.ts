/**
 * The SQLite schema of Palimpsest. The version lives in `PRAGMA user_version` and the file is
 * marked with `PRAGMA application_id`; there is no migration: a database of another schema
 * version is refused at open (export with the build that wrote it, import with this one).
 * Bump SCHEMA_VERSION on any change to the statements below.
 */

/** `PRAGMA application_id` of a Palimpsest database: 'PALI'. */
export const APPLICATION_ID = 0x50414c49;

/** The schema version this build reads and writes. */
export const SCHEMA_VERSION = 3;

/**
 * Schema objects, created in one transaction on a fresh database.
 *
 * - sessions: `pending` = 1 while a streamed import is in progress (invisible to readers), owned
 *   by `pending_owner` until `lease_until` (ms since epoch; a store open drops pending rows whose
 *   lease passed). `labels` is a JSON object of string values. The header's optional fields are
 *   NULL when absent. `writer` is the token of the last committed write (the conditional append's
 *   compare-and-set). `data_bytes` counts header + labels JSON bytes plus event data bytes (the
 *   quota's measure). `pairing_guard` is issue #14's session property. Version 3.
 * - tenants: per-tenant counters (`session_count` includes pending sessions; `data_bytes` is the
 *   sum of the tenant's sessions' data_bytes), updated in the transaction of every create,
 *   append, import chunk and delete, which checks the quota against them. Version 3.
 * - events: WITHOUT ROWID clustered on (session_id, seq), so a session's log is one contiguous
 *   b-tree range (a structural scan reads no other session's pages and there is no separate
 *   rowid b-tree to maintain on insert). `data` is the JSON text. `source_event_seqs` is NULL
 *   when absent, else a varint BLOB (zero-length for `[]`), see codec.ts. `surface_op` is NULL,
 *   the bare text `append`, or the replace object's JSON. `ignorable` is NULL or 1.
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
  data_bytes       INTEGER NOT NULL DEFAULT 0
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
  PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;

CREATE INDEX events_structure ON events (session_id, seq, type, surface_op, source_event_seqs, ignorable);

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
