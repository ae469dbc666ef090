/**
 * Version 8: content-addressed blobs (issue #39, docs/blobs.md "PostgreSQL", ../pg-blobs.ts).
 *
 * - blobs: one row per tenant and digest; `crc` is the CRC-32 (zlib) of `bytes`, checked on
 *   every read. No reference count column: a blob is kept while an event_blobs row references it
 *   (the foreign key below), and freed by the transaction that removes its last reference.
 * - event_blobs: which blobs each stored event references (`n` references to the digest in its
 *   data), inserted in the transaction that inserts the event (pg-blobs.ts). Its foreign key to
 *   blobs makes "an event without its blob" impossible: inserting a reference takes a KEY SHARE
 *   lock on the blob row, so a concurrent transaction freeing that blob waits for it (and then
 *   sees the reference) or frees it first (and the writer, finding the row gone, inserts it again).
 * - sessions_unref_blobs (AFTER DELETE ON sessions: delete, retention, a failed or expired import):
 *   removes the session's event_blobs rows, then, per digest in digest order, locks the blob row
 *   (FOR UPDATE), deletes it if no other event references it (a new statement, so a new snapshot
 *   that sees every reference committed before the lock was granted) and gives its size back to
 *   the tenant's byte counter (a blob counts once per tenant). Lock order, as a writer's
 *   (pg-blobs.ts: its write function locked the session row and the session's byte-counter shard,
 *   or every shard for a quota check, before it touches a blob): the session row, then the
 *   session's shard, then blob rows in digest order; the tenant's feed position stays last (the
 *   feed_record trigger of migration 6 is deferred to the commit), the order in ../schema.ts.
 * - is_blob_ref(jsonb) mirrors src/domain/blobs.ts parseBlobRef; search_text (migration 5) is
 *   replaced so that a reference object, digest included, is not searchable (docs/search.md), as
 *   src/domain/search-text.ts does.
 */
import type { PostgresMigration } from './migration.js';

function ddl(s: string): string {
  return `
CREATE TABLE ${s}.blobs (
  tenant     text    COLLATE "C" NOT NULL,
  digest     text    COLLATE "C" NOT NULL,
  size       bigint  NOT NULL,
  media_type text    NOT NULL,
  crc        integer NOT NULL,
  bytes      bytea   NOT NULL,
  PRIMARY KEY (tenant, digest)
);
ALTER TABLE ${s}.blobs ALTER COLUMN bytes SET STORAGE EXTERNAL;

CREATE TABLE ${s}.event_blobs (
  session_id text    COLLATE "C" NOT NULL,
  seq        bigint  NOT NULL,
  digest     text    COLLATE "C" NOT NULL,
  tenant     text    COLLATE "C" NOT NULL,
  n          integer NOT NULL,
  PRIMARY KEY (session_id, seq, digest),
  FOREIGN KEY (tenant, digest) REFERENCES ${s}.blobs (tenant, digest)
);
CREATE INDEX event_blobs_blob ON ${s}.event_blobs (tenant, digest);

CREATE FUNCTION ${s}.sessions_unref_blobs() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_digests text[]; v_digest text; v_size bigint; v_freed bigint := 0;
BEGIN
  WITH gone AS (DELETE FROM ${s}.event_blobs WHERE session_id = OLD.id RETURNING digest)
    SELECT array_agg(DISTINCT digest ORDER BY digest) INTO v_digests FROM gone;
  IF v_digests IS NULL THEN RETURN NULL; END IF;
  -- The session's byte-counter shard before any blob row, as a writer holds it (its write
  -- function added the events' bytes) before it locks blobs.
  PERFORM 1 FROM ${s}.tenant_bytes WHERE tenant = OLD.tenant AND shard = (hashtext(OLD.id) & 15) FOR UPDATE;
  FOREACH v_digest IN ARRAY v_digests LOOP
    PERFORM 1 FROM ${s}.blobs WHERE tenant = OLD.tenant AND digest = v_digest FOR UPDATE;
    DELETE FROM ${s}.blobs b WHERE b.tenant = OLD.tenant AND b.digest = v_digest
      AND NOT EXISTS (SELECT 1 FROM ${s}.event_blobs e WHERE e.tenant = OLD.tenant AND e.digest = v_digest)
      RETURNING b.size INTO v_size;
    IF FOUND THEN v_freed := v_freed + v_size; END IF;
  END LOOP;
  IF v_freed <> 0 THEN
    UPDATE ${s}.tenant_bytes SET data_bytes = data_bytes - v_freed WHERE tenant = OLD.tenant AND shard = (hashtext(OLD.id) & 15);
  END IF;
  RETURN NULL;
END
$fn$;
CREATE TRIGGER sessions_unref_blobs AFTER DELETE ON ${s}.sessions FOR EACH ROW EXECUTE FUNCTION ${s}.sessions_unref_blobs();

CREATE FUNCTION ${s}.is_blob_ref(v jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT jsonb_typeof(v) = 'object' AND jsonb_typeof(v -> '$blob') = 'string' AND (v ->> '$blob') ~ '^sha256:[0-9a-f]{64}$'
     AND NOT EXISTS (SELECT 1 FROM jsonb_object_keys(v) k WHERE k NOT IN ('$blob', 'bytes', 'mediaType', 'encoding'))
     AND (NOT v ? 'bytes' OR (jsonb_typeof(v -> 'bytes') = 'number' AND (v -> 'bytes')::numeric >= 0
          AND (v -> 'bytes')::numeric = trunc((v -> 'bytes')::numeric) AND (v -> 'bytes')::numeric <= 9007199254740991))
     AND (NOT v ? 'mediaType' OR jsonb_typeof(v -> 'mediaType') = 'string')
     AND (NOT v ? 'encoding' OR (v -> 'encoding') IN ('"utf8"'::jsonb, '"base64"'::jsonb))
$fn$;

CREATE OR REPLACE FUNCTION ${s}.search_text(p_data jsonb) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  WITH RECURSIVE w(path, val) AS (
    SELECT ARRAY[]::int[], p_data
    UNION ALL
    SELECT w.path || c.ord::int, c.value
      FROM w, LATERAL (
        SELECT e.key, e.value, e.ord FROM jsonb_each(CASE WHEN jsonb_typeof(w.val) = 'object' AND NOT ${s}.is_blob_ref(w.val) THEN w.val END) WITH ORDINALITY AS e(key, value, ord)
        UNION ALL
        SELECT NULL, a.value, a.ord FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.val) = 'array' THEN w.val END) WITH ORDINALITY AS a(value, ord)
      ) AS c
     WHERE c.key IS NULL
        OR c.key <> ALL (ARRAY['id', 'type', 'role', 'toolCallId', 'callId', 'source', 'provenance', 'replayState', 'meta', 'attachment', 'usage'])
  )
  SELECT left(coalesce(string_agg(val #>> '{}', E'\\n' ORDER BY path), ''), 65536) FROM w WHERE jsonb_typeof(val) = 'string'
$fn$;
`;
}

export const migration: PostgresMigration = {
  version: 8,
  description: 'content-addressed blobs (issue #39): blobs and event_blobs tables, freed with their last reference; references not searchable',
  async up(client, s) {
    await client.query(ddl(s));
  },
};
