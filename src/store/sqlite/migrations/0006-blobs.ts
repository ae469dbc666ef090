/**
 * Version 6: content-addressed blobs (issue #39, docs/blobs.md, src/store/sqlite/sqlite-blobs.ts).
 *
 * - blobs: one row per tenant and digest. `bytes` last, so that reading the other columns never
 *   touches the blob's overflow pages; `crc` is the CRC-32 (zlib) of `bytes`, checked on every
 *   read; `refs` is the number of references the tenant's stored events hold (event_blobs.n
 *   summed), kept by the triggers below in the transaction of every insert and delete.
 * - event_blobs: which blobs each event references (`n` references to the digest in its data),
 *   inserted with the event by the write that stores it.
 * - Triggers: an event_blobs row adds its references; removing it takes them away, and a blob
 *   with none left is deleted and its size taken off its tenant's byte counter; deleting a
 *   session (delete, retention, a failed or expired import: all delete the sessions row) removes
 *   its event_blobs rows. So a blob never outlives its last reference.
 */
import type Database from 'better-sqlite3';
import type { SqliteMigration } from './migration.js';

export const migration: SqliteMigration = {
  version: 6,
  description: 'content-addressed blobs: blobs and event_blobs tables, reference-count triggers',
  up(db: Database.Database): void {
    db.exec(`
CREATE TABLE blobs (
  tenant     TEXT    NOT NULL,
  digest     TEXT    NOT NULL,
  size       INTEGER NOT NULL,
  media_type TEXT    NOT NULL,
  crc        INTEGER NOT NULL,
  refs       INTEGER NOT NULL DEFAULT 0,
  bytes      BLOB    NOT NULL,
  PRIMARY KEY (tenant, digest)
) STRICT;

CREATE TABLE event_blobs (
  session_id TEXT    NOT NULL,
  seq        INTEGER NOT NULL,
  digest     TEXT    NOT NULL,
  tenant     TEXT    NOT NULL,
  n          INTEGER NOT NULL,
  PRIMARY KEY (session_id, seq, digest)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER event_blobs_ref AFTER INSERT ON event_blobs
BEGIN
  UPDATE blobs SET refs = refs + NEW.n WHERE tenant = NEW.tenant AND digest = NEW.digest;
END;

CREATE TRIGGER event_blobs_unref AFTER DELETE ON event_blobs
BEGIN
  UPDATE blobs SET refs = refs - OLD.n WHERE tenant = OLD.tenant AND digest = OLD.digest;
  UPDATE tenants SET data_bytes = data_bytes - (SELECT size FROM blobs WHERE tenant = OLD.tenant AND digest = OLD.digest)
    WHERE tenant = OLD.tenant AND (SELECT refs FROM blobs WHERE tenant = OLD.tenant AND digest = OLD.digest) <= 0;
  DELETE FROM blobs WHERE tenant = OLD.tenant AND digest = OLD.digest AND refs <= 0;
END;

CREATE TRIGGER sessions_unref_blobs AFTER DELETE ON sessions
BEGIN
  DELETE FROM event_blobs WHERE session_id = OLD.id;
END;
`);
  },
};
