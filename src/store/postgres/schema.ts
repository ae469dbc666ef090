/**
 * The PostgreSQL schema of Palimpsest: every object lives in one PostgreSQL schema (`palimpsest`
 * by default) so the store can share a database with other applications. The version is the one
 * row of `<schema>.schema_version`.
 *
 * Two parts (migrate.ts puts them together, under an advisory lock):
 * - the tables, indexes and data: baseSchemaSql below is version 3 and never changes; later
 *   versions are the migrations of ./migrations/ (its index says how to add one), run on a fresh
 *   schema right after the base and on an older one when a replica opens it;
 * - the functions and the trigger (functionsSql below) are code: `CREATE OR REPLACE`d from this
 *   build after every creation or migration, so they always match the current tables. A change
 *   to a function needs no migration statement, but it must bump the version (a migration whose
 *   `up` does nothing will do) so that existing schemas get the replace.
 * A schema of a newer version, or older than version 2, is refused at open, naming both versions.
 *
 * Layout:
 * - sessions: one row per session, the row every write to the session locks (SELECT ... FOR NO
 *   KEY UPDATE, or FOR UPDATE to delete it), holding the head (`next_seq`), the `writer` token of
 *   the last committed write and the counters. `pending_owner` is non-NULL while a streamed import
 *   is in progress (invisible to readers); `lease_until` (ms) tells when another may drop it.
 *   `data_bytes` is what the session counts toward its tenant's byte quota (header and labels JSON
 *   plus every event's data text, see storedSessionBytes in the port).
 * - events: clustered by the primary key (session_id, seq): the unique key that makes a seq
 *   impossible to store twice, whatever the app does. No foreign key (its per-row trigger would cost
 *   more than the insert on a 100-event batch): every writer locks the session row first, and a
 *   delete removes the row, the events and the keys in one transaction, so no event outlives its
 *   session.
 * - idempotency: one row per key, written in the transaction of the events it acknowledges.
 * - tenants / tenant_bytes: the quota counters, updated in the same transaction as every create,
 *   append, import chunk and delete. Sessions are counted per tenant on one row (creates and deletes
 *   are rare); bytes are split over TENANT_SHARDS rows per tenant by a hash of the session id, so
 *   appends to different sessions of one tenant do not all queue on one hot row lock held until
 *   commit. All TENANT_SHARDS rows are inserted with the tenant's row (its first create), before
 *   any append of the tenant can run. A byte-quota check locks all of the tenant's shard rows (in
 *   shard order, no deadlock) and is exact: under READ COMMITTED a waiting check re-reads the rows
 *   it locks but never sees rows inserted after its snapshot, so the set must not grow. Appends of
 *   tenants without a byte quota touch only their own shard.
 * - feed / feed_heads (version 3, issue #35): the session feed, one row per change of a visible
 *   session (created, deleted, labels_changed, appended), written by the feed_record trigger on
 *   sessions in the transaction of the change, whatever write function made it. Positions are per
 *   tenant and must reach readers in commit order with no gap: a reader at position p must never
 *   see a record below p commit later. A sequence (bigserial) does not give that: nextval is taken
 *   before commit, so a transaction holding position 5 may commit after the one holding 6, and a
 *   reader that already passed 6 would skip 5 forever. The trigger therefore takes the next
 *   position from the tenant's feed_heads row with an UPDATE, whose row lock is held until the
 *   transaction ends: the tenant's next writer waits for it (and, under READ COMMITTED, reads the
 *   committed value after the wait), so positions are consecutive, commit in order, and a rolled
 *   back transaction leaves no hole. The cost is that the feed part of a tenant's writes commits
 *   one at a time (the lock is taken at commit, see the lock order below, and held through the
 *   commit's WAL flush); tenants do not wait for each other. The alternative,
 *   xid8 + pg_snapshot_xmin gating (Marten, emmett), keeps writers independent but orders the
 *   feed by (transaction id, sequence), so positions would not increase in delivery order, and
 *   any long transaction in the database holds every reader back. Readers read by position; the
 *   NOTIFY hints and polling only tell them when to read.
 *
 * Lock order (issue #33: the soak met deadlocks, 40P01, between writes of one tenant). Every write
 * transaction takes its row locks in this order, taking only the ones it needs:
 *   1. the session row(s) (append, append_batch, append_pending, update_labels, publish, delete;
 *      append_many all of its sessions, by id; create_session an existing row of its id, so it
 *      waits for a delete of that id in progress). The writes that change no key (appends, label
 *      updates) take FOR NO KEY UPDATE (schema 9), which the search follower's FOR KEY SHARE
 *      (search-follow.ts) does not block, so indexing never holds an append back; a delete (FOR
 *      UPDATE) waits for the follower's batch;
 *   2. the tenant's row in `tenants` (create, delete);
 *   3. the tenant's byte-counter shards in `tenant_bytes`, in ascending shard order: the quota
 *      check locks all of them (LOCK_TENANT_BYTES), other writes only the session's own shard;
 *      append_batch / append_many take them all first (by tenant, shard) when a call checks it;
 *   4. the tenant's blob rows (`blobs`, migration 8), in digest order: a write storing or
 *      referencing blobs after its shard (pg-blobs.ts), a delete freeing them in its
 *      sessions_unref_blobs trigger after the session's shard;
 *   5. the tenant's feed position (`feed_heads`; several tenants in tenant order), last: a constraint
 *      trigger (feed_record) deferred to the commit runs after every statement of the transaction,
 *      whichever write function (and whatever statement order inside it) made the change.
 * A transaction only waits for locks later in the order than those it holds, so no cycle can
 * form. Feed retention only reads feed_heads (feed-retention.ts); retention deletes one session per
 * transaction. The store still runs a statement again after 40P01 (statements.ts), counted and
 * logged: the order should leave it unused (test/integration/postgres-lock-order.test.ts).
 * Ids are COLLATE "C": they order by bytes, as in the other stores (list order, page tokens).
 * The write paths are SQL functions (one statement, one round trip, one implicit transaction per
 * call): the conditional checks and every write of a call commit together or not at all.
 */

/** The schema version this build reads and writes: the last migration's (migrations/index.ts). */
export const SCHEMA_VERSION = 10;

/** Byte-counter rows per tenant (see the module comment). */
export const TENANT_SHARDS = 16;

/** A PostgreSQL schema name the store accepts (used unquoted in SQL). */
export const SCHEMA_NAME_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;

/** NOTIFY channel of a schema's head changes. */
export const channelOf = (schema: string): string => `${schema}_heads`;

/** Event columns as the write functions take them: one array per column (unnest). */
const EVENT_ARGS = `p_seqs bigint[], p_types text[], p_times bigint[], p_data text[], p_sources text[], p_ops text[], p_ign boolean[]`;

/** Inserts the events of the EVENT_ARGS arrays for session `p_id` (sources come as array literals). */
const INSERT_EVENTS = (s: string): string => `
    INSERT INTO ${s}.events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable)
    SELECT p_id, u.seq, u.type, u.time, u.data, u.src::bigint[], u.op, u.ign
      FROM unnest(p_seqs, p_types, p_times, p_data, p_sources, p_ops, p_ign) AS u (seq, type, time, data, src, op, ign);`;

/** Sets v_used to the tenant's stored bytes with every shard row locked (exact quota check). */
const LOCK_TENANT_BYTES = (s: string): string => `
      SELECT coalesce(sum(b.data_bytes), 0) INTO v_used
        FROM (SELECT tb.data_bytes FROM ${s}.tenant_bytes tb WHERE tb.tenant = v_tenant ORDER BY tb.shard FOR UPDATE) AS b;`;

/**
 * The part append and import chunks share, under the session row's lock: seqs start at the head,
 * the tenant's byte quota holds (an outcome, nothing written), then the events go in and v_next
 * moves past them.
 */
const CHECKED_INSERT = (s: string): string => `
  IF v_n > 0 AND p_seqs[1] < v_next THEN
    RAISE EXCEPTION 'session %: first seq % is below the head %', p_id, p_seqs[1], v_next USING ERRCODE = 'P0001';
  END IF;
  IF p_max_bytes > 0 THEN
    ${LOCK_TENANT_BYTES(s)}
    IF v_used + p_bytes > p_max_bytes THEN
      outcome := 'quota-exceeded'; q_limit := p_max_bytes; q_actual := v_used + p_bytes; RETURN NEXT; RETURN;
    END IF;
  END IF;
  ${INSERT_EVENTS(s)}
  IF v_n > 0 THEN v_next := p_seqs[v_n] + 1; END IF;`;

/** Adds p_bytes to the session's shard of its tenant's byte counter. */
const ADD_TENANT_BYTES = (s: string): string => `
    IF p_bytes <> 0 THEN
      INSERT INTO ${s}.tenant_bytes AS tb (tenant, shard, data_bytes) VALUES (v_tenant, (hashtext(p_id) & ${TENANT_SHARDS - 1}), p_bytes)
        ON CONFLICT (tenant, shard) DO UPDATE SET data_bytes = tb.data_bytes + EXCLUDED.data_bytes;
    END IF;`;

/**
 * The base tables of a fresh schema `s` (created before, unless the operator did): version 3,
 * frozen (see the module comment). Run in the creation transaction, then the migrations.
 */
export function baseSchemaSql(s: string): string {
  return `
CREATE TABLE ${s}.schema_version (version integer NOT NULL);
INSERT INTO ${s}.schema_version (version) VALUES (3);

CREATE TABLE ${s}.sessions (
  id               text    COLLATE "C" NOT NULL PRIMARY KEY,
  version          integer NOT NULL,
  created_at       bigint  NOT NULL,
  cwd              text,
  parent_session   text,
  seed_length      bigint,
  origin           text,
  delegation_depth bigint,
  agent_preset     text,
  labels           jsonb   NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
  tenant           text    NOT NULL DEFAULT '',
  strict           boolean NOT NULL DEFAULT false,
  pairing_guard    boolean NOT NULL DEFAULT false,
  pending_owner    text,
  lease_until      bigint,
  next_seq         bigint  NOT NULL DEFAULT 0,
  event_count      bigint  NOT NULL DEFAULT 0,
  data_bytes       bigint  NOT NULL DEFAULT 0,
  writer           text    NOT NULL,
  surface_length   bigint  NOT NULL DEFAULT 0,
  metadata_version bigint  NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_age ON ${s}.sessions (created_at DESC, id DESC) WHERE pending_owner IS NULL;
CREATE INDEX sessions_by_tenant_age ON ${s}.sessions (tenant, created_at DESC, id DESC) WHERE pending_owner IS NULL;
CREATE INDEX sessions_pending ON ${s}.sessions (lease_until) WHERE pending_owner IS NOT NULL;

CREATE TABLE ${s}.events (
  session_id        text    COLLATE "C" NOT NULL,
  seq               bigint  NOT NULL,
  type              text    NOT NULL,
  time              bigint  NOT NULL,
  data              text    NOT NULL,
  source_event_seqs bigint[],
  surface_op        text,
  ignorable         boolean CHECK (ignorable IS NULL OR ignorable),
  PRIMARY KEY (session_id, seq)
);

CREATE TABLE ${s}.idempotency (
  session_id     text   COLLATE "C" NOT NULL,
  key            text   NOT NULL,
  request_hash   text   NOT NULL,
  seqs           bigint[] NOT NULL,
  surface_length bigint NOT NULL,
  created_at     bigint NOT NULL,
  PRIMARY KEY (session_id, key)
);

CREATE TABLE ${s}.tenants (
  tenant        text   NOT NULL PRIMARY KEY,
  session_count bigint NOT NULL DEFAULT 0
);

CREATE TABLE ${s}.tenant_bytes (
  tenant     text     NOT NULL,
  shard      smallint NOT NULL,
  data_bytes bigint   NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, shard)
);

CREATE TABLE ${s}.feed (
  tenant          text    NOT NULL,
  position        bigint  NOT NULL,
  session_id      text    COLLATE "C" NOT NULL,
  kind            text    NOT NULL,
  created_at      bigint  NOT NULL,
  next_seq        bigint  NOT NULL,
  event_count     bigint  NOT NULL,
  surface_length  bigint  NOT NULL,
  event_types     text[]  NOT NULL,
  labels          jsonb   NOT NULL,
  previous_labels jsonb,
  time            bigint  NOT NULL,
  PRIMARY KEY (tenant, position)
);

CREATE TABLE ${s}.feed_heads (
  tenant   text   NOT NULL PRIMARY KEY,
  position bigint NOT NULL
);

`;
}

/**
 * The functions and the trigger of schema `s`, replaced from this build's text after every
 * creation or migration (see the module comment).
 */
export function functionsSql(s: string): string {
  return `
-- The feed record of a change of a visible session (see the module comment for the position).
CREATE OR REPLACE FUNCTION ${s}.feed_record() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
  r record; v_kind text; v_types text[] := '{}'; v_prev jsonb; v_pos bigint;
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF OLD.pending_owner IS NOT NULL THEN RETURN NULL; END IF;
    r := OLD; v_kind := 'deleted';
  ELSIF TG_OP = 'INSERT' THEN
    IF NEW.pending_owner IS NOT NULL THEN RETURN NULL; END IF;
    r := NEW; v_kind := 'created';
  ELSE
    IF NEW.pending_owner IS NOT NULL THEN RETURN NULL; END IF;
    r := NEW;
    IF OLD.pending_owner IS NOT NULL THEN
      v_kind := 'created';
    ELSIF NEW.next_seq > OLD.next_seq THEN
      v_kind := 'appended';
      SELECT coalesce(array_agg(t.type ORDER BY t.first), '{}') INTO v_types
        FROM (SELECT e.type, min(e.seq) AS first FROM ${s}.events e WHERE e.session_id = NEW.id AND e.seq >= OLD.next_seq AND e.seq < NEW.next_seq GROUP BY e.type) t;
    ELSIF NEW.labels IS DISTINCT FROM OLD.labels THEN
      v_kind := 'labels_changed'; v_prev := OLD.labels;
    ELSE
      RETURN NULL;
    END IF;
  END IF;
  INSERT INTO ${s}.feed_heads AS h (tenant, position) VALUES (r.tenant, 1)
    ON CONFLICT (tenant) DO UPDATE SET position = h.position + 1 RETURNING h.position INTO v_pos;
  INSERT INTO ${s}.feed (tenant, position, session_id, kind, created_at, next_seq, event_count, surface_length, event_types, labels,
      previous_labels, time)
    VALUES (r.tenant, v_pos, r.id, v_kind, r.created_at, r.next_seq, r.event_count, r.surface_length, v_types, r.labels, v_prev,
      (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
  RETURN NULL;
END
$fn$;
-- Deferred to the commit (see "Lock order" in schema.ts): the tenant's feed position is the last
-- lock of every write transaction.
DROP TRIGGER IF EXISTS feed_record ON ${s}.sessions;
CREATE CONSTRAINT TRIGGER feed_record AFTER INSERT OR UPDATE OR DELETE ON ${s}.sessions DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION ${s}.feed_record();

-- The conditional append. Order of checks: unknown session, used idempotency key (the stored
-- result), moved head or writer token (conflict), byte quota; then every write. The session row
-- lock serialises writers of one session across every replica, and the check happens under it.
CREATE OR REPLACE FUNCTION ${s}.append(
  p_id text, p_expected_next bigint, p_expected_writer text, p_writer text, ${EVENT_ARGS},
  p_bytes bigint, p_key text, p_hash text, p_surface_length bigint,
  p_max_bytes bigint, p_now bigint
) RETURNS TABLE (outcome text, head bigint, r_hash text, r_seqs bigint[], r_surface bigint, q_limit bigint, q_actual bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_next bigint; v_writer text; v_tenant text; v_used bigint;
  v_n integer := coalesce(cardinality(p_seqs), 0);
BEGIN
  SELECT s.next_seq, s.writer, s.tenant INTO v_next, v_writer, v_tenant
    FROM ${s}.sessions s WHERE s.id = p_id AND s.pending_owner IS NULL FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    outcome := 'not-found'; RETURN NEXT; RETURN;
  END IF;
  IF p_key IS NOT NULL THEN
    SELECT i.request_hash, i.seqs, i.surface_length INTO r_hash, r_seqs, r_surface
      FROM ${s}.idempotency i WHERE i.session_id = p_id AND i.key = p_key;
    IF FOUND THEN
      outcome := 'duplicate'; RETURN NEXT; RETURN;
    END IF;
  END IF;
  IF v_next <> p_expected_next OR v_writer <> p_expected_writer THEN
    outcome := 'conflict'; head := v_next; RETURN NEXT; RETURN;
  END IF;
  ${CHECKED_INSERT(s)}
  ${ADD_TENANT_BYTES(s)}
  IF p_key IS NOT NULL THEN
    INSERT INTO ${s}.idempotency (session_id, key, request_hash, seqs, surface_length, created_at)
      VALUES (p_id, p_key, p_hash, coalesce(p_seqs, '{}'), p_surface_length, p_now);
  END IF;
  -- Its feed record (trigger) is written at commit, taking the tenant's feed lock last.
  UPDATE ${s}.sessions SET next_seq = v_next, event_count = event_count + v_n, data_bytes = data_bytes + p_bytes, writer = p_writer,
      surface_length = CASE WHEN v_n > 0 THEN p_surface_length ELSE surface_length END
    WHERE id = p_id;
  outcome := 'appended'; head := v_next; RETURN NEXT;
END
$fn$;

-- Several appends of one session in one transaction (the calls a replica had queued for the
-- session while its previous transaction ran), in order, each with exactly the checks of append:
-- call i has p_counts[i] events, taken in order from the flattened event arrays. One row per call.
CREATE OR REPLACE FUNCTION ${s}.append_batch(
  p_id text, p_counts integer[], p_expected_next bigint[], p_expected_writer text[], p_writer text[], ${EVENT_ARGS},
  p_bytes bigint[], p_key text[], p_hash text[], p_surface_length bigint[], p_max_bytes bigint[], p_now bigint
) RETURNS TABLE (outcome text, head bigint, r_hash text, r_seqs bigint[], r_surface bigint, q_limit bigint, q_actual bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_from integer := 1; v_to integer; v_tenant text; v_used bigint;
BEGIN
  -- Lock order: a call that checks the byte quota locks every shard of the tenant in shard order;
  -- after an earlier call of the group took its own shard that would be out of order, so they are
  -- all taken first (the session row before them, as in append).
  IF EXISTS (SELECT 1 FROM unnest(p_max_bytes) AS m WHERE m > 0) THEN
    SELECT s.tenant INTO v_tenant FROM ${s}.sessions s WHERE s.id = p_id AND s.pending_owner IS NULL FOR NO KEY UPDATE;
    IF FOUND THEN
      ${LOCK_TENANT_BYTES(s)}
    END IF;
  END IF;
  FOR i IN 1 .. cardinality(p_counts) LOOP
    v_to := v_from + p_counts[i] - 1;
    RETURN QUERY SELECT * FROM ${s}.append(p_id, p_expected_next[i], p_expected_writer[i], p_writer[i],
      p_seqs[v_from:v_to], p_types[v_from:v_to], p_times[v_from:v_to], p_data[v_from:v_to], p_sources[v_from:v_to],
      p_ops[v_from:v_to], p_ign[v_from:v_to], p_bytes[i], p_key[i], p_hash[i], p_surface_length[i], p_max_bytes[i], p_now);
    v_from := v_to + 1;
  END LOOP;
END
$fn$;

-- Appends of several sessions in one transaction (group commit across sessions: the calls a
-- replica had queued while its previous transactions ran), each with exactly the checks of
-- append: call i is for session p_ids[i] and has p_counts[i] events, taken in order from the
-- flattened event arrays; one row per call, with its index in the call column. Lock order (see the module
-- comment): every session row first, by id; then the byte-counter shards, by tenant and shard
-- (every shard of a tenant one of whose calls checks the quota, else the sessions' own); then
-- the calls, by tenant, so the deferred feed records take the tenants' feed positions in tenant
-- order at commit; a session's calls keep their order.
CREATE OR REPLACE FUNCTION ${s}.append_many(
  p_ids text[], p_counts integer[], p_expected_next bigint[], p_expected_writer text[], p_writer text[], ${EVENT_ARGS},
  p_bytes bigint[], p_key text[], p_hash text[], p_surface_length bigint[], p_max_bytes bigint[], p_now bigint
) RETURNS TABLE (call integer, outcome text, head bigint, r_hash text, r_seqs bigint[], r_surface bigint, q_limit bigint, q_actual bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_from integer[] := '{}'; v_at integer := 1; c record;
BEGIN
  FOR i IN 1 .. cardinality(p_counts) LOOP
    v_from := v_from || v_at; v_at := v_at + p_counts[i];
  END LOOP;
  PERFORM 1 FROM ${s}.sessions ss WHERE ss.id = ANY(p_ids) ORDER BY ss.id FOR NO KEY UPDATE;
  PERFORM 1 FROM ${s}.tenant_bytes tb
    WHERE (tb.tenant, tb.shard) IN (SELECT ss.tenant, (hashtext(ss.id) & ${TENANT_SHARDS - 1})::smallint FROM ${s}.sessions ss WHERE ss.id = ANY(p_ids))
       OR tb.tenant IN (SELECT ss.tenant FROM unnest(p_ids, p_max_bytes) AS u (id, mb) JOIN ${s}.sessions ss ON ss.id = u.id WHERE u.mb > 0)
    ORDER BY tb.tenant, tb.shard FOR UPDATE;
  FOR c IN SELECT u.i::integer AS i FROM unnest(p_ids) WITH ORDINALITY AS u (id, i) LEFT JOIN ${s}.sessions ss ON ss.id = u.id
             ORDER BY ss.tenant, u.id, u.i LOOP
    RETURN QUERY SELECT c.i, a.* FROM ${s}.append(p_ids[c.i], p_expected_next[c.i], p_expected_writer[c.i], p_writer[c.i],
      p_seqs[v_from[c.i]:v_from[c.i] + p_counts[c.i] - 1], p_types[v_from[c.i]:v_from[c.i] + p_counts[c.i] - 1],
      p_times[v_from[c.i]:v_from[c.i] + p_counts[c.i] - 1], p_data[v_from[c.i]:v_from[c.i] + p_counts[c.i] - 1],
      p_sources[v_from[c.i]:v_from[c.i] + p_counts[c.i] - 1], p_ops[v_from[c.i]:v_from[c.i] + p_counts[c.i] - 1],
      p_ign[v_from[c.i]:v_from[c.i] + p_counts[c.i] - 1], p_bytes[c.i], p_key[c.i], p_hash[c.i], p_surface_length[c.i], p_max_bytes[c.i], p_now) AS a;
  END LOOP;
END
$fn$;

-- Creates a session with its initial log. The tenant row lock serialises the tenant's creates
-- (exact session quota across replicas); pending (importing) sessions count too.
CREATE OR REPLACE FUNCTION ${s}.create_session(
  p_id text, p_version integer, p_created_at bigint, p_cwd text, p_parent text, p_seed_length bigint, p_origin text,
  p_depth bigint, p_preset text, p_labels jsonb, p_tenant text, p_strict boolean, p_pairing boolean,
  p_owner text, p_lease bigint, p_writer text, ${EVENT_ARGS}, p_bytes bigint,
  p_max_sessions bigint, p_max_bytes bigint
) RETURNS TABLE (outcome text, q_name text, q_limit bigint, q_actual bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_tenant text := p_tenant; v_count bigint; v_used bigint;
  v_n integer := coalesce(cardinality(p_seqs), 0);
BEGIN
  -- Locked (lock order: the session row first): a delete of the id in progress is waited for.
  PERFORM 1 FROM ${s}.sessions WHERE id = p_id FOR UPDATE;
  IF FOUND THEN
    outcome := 'exists'; RETURN NEXT; RETURN;
  END IF;
  INSERT INTO ${s}.tenants (tenant) VALUES (v_tenant) ON CONFLICT (tenant) DO NOTHING;
  IF FOUND THEN
    -- A new tenant: all of its byte-counter rows exist from now on, so the set that
    -- LOCK_TENANT_BYTES locks is complete (a row inserted later would be invisible to a
    -- concurrent check that already took its snapshot, and the quota could be exceeded).
    INSERT INTO ${s}.tenant_bytes (tenant, shard, data_bytes)
      SELECT v_tenant, g, 0 FROM generate_series(0, ${TENANT_SHARDS - 1}) AS g ON CONFLICT DO NOTHING;
  END IF;
  SELECT t.session_count INTO v_count FROM ${s}.tenants t WHERE t.tenant = v_tenant FOR UPDATE;
  IF p_max_sessions > 0 AND v_count >= p_max_sessions THEN
    outcome := 'quota-exceeded'; q_name := 'tenant_max_sessions'; q_limit := p_max_sessions; q_actual := v_count; RETURN NEXT; RETURN;
  END IF;
  IF p_max_bytes > 0 THEN
    ${LOCK_TENANT_BYTES(s)}
    IF v_used + p_bytes > p_max_bytes THEN
      outcome := 'quota-exceeded'; q_name := 'tenant_max_bytes'; q_limit := p_max_bytes; q_actual := v_used + p_bytes; RETURN NEXT; RETURN;
    END IF;
  END IF;
  INSERT INTO ${s}.sessions (id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset,
      labels, tenant, strict, pairing_guard, pending_owner, lease_until, next_seq, event_count, data_bytes, writer)
    VALUES (p_id, p_version, p_created_at, p_cwd, p_parent, p_seed_length, p_origin, p_depth, p_preset,
      p_labels, v_tenant, p_strict, p_pairing, p_owner, p_lease, CASE WHEN v_n > 0 THEN p_seqs[v_n] + 1 ELSE 0 END, v_n,
      p_bytes, p_writer)
    ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    -- Created meanwhile by a session of another tenant (ours holds the tenant lock).
    outcome := 'exists'; RETURN NEXT; RETURN;
  END IF;
  ${INSERT_EVENTS(s)}
  UPDATE ${s}.tenants SET session_count = session_count + 1 WHERE tenant = v_tenant;
  ${ADD_TENANT_BYTES(s)}
  outcome := 'created'; RETURN NEXT;
END
$fn$;

-- Appends an import chunk to a pending session owned by p_owner and renews its lease.
CREATE OR REPLACE FUNCTION ${s}.append_pending(
  p_id text, p_owner text, p_lease bigint, ${EVENT_ARGS}, p_bytes bigint, p_max_bytes bigint
) RETURNS TABLE (outcome text, owner text, q_limit bigint, q_actual bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_next bigint; v_tenant text; v_used bigint;
  v_n integer := coalesce(cardinality(p_seqs), 0);
BEGIN
  SELECT s.next_seq, s.tenant INTO v_next, v_tenant
    FROM ${s}.sessions s WHERE s.id = p_id AND s.pending_owner = p_owner FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    -- Gone, or owned by another importer (named for the error).
    SELECT s.pending_owner INTO owner FROM ${s}.sessions s WHERE s.id = p_id;
    outcome := 'not-found'; RETURN NEXT; RETURN;
  END IF;
  ${CHECKED_INSERT(s)}
  UPDATE ${s}.sessions SET next_seq = v_next, event_count = event_count + v_n, data_bytes = data_bytes + p_bytes, lease_until = p_lease
    WHERE id = p_id;
  ${ADD_TENANT_BYTES(s)}
  outcome := 'appended'; RETURN NEXT;
END
$fn$;

-- UpdateSession (issue #35): replaces the labels while the metadata version is p_expected, and
-- moves the byte counters by p_delta (the labels' size change, computed by the caller from the
-- labels at that version).
CREATE OR REPLACE FUNCTION ${s}.update_labels(p_id text, p_labels jsonb, p_expected bigint, p_delta bigint)
RETURNS TABLE (outcome text, actual bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_version bigint; v_tenant text;
BEGIN
  SELECT s.metadata_version, s.tenant INTO v_version, v_tenant
    FROM ${s}.sessions s WHERE s.id = p_id AND s.pending_owner IS NULL FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    outcome := 'not-found'; RETURN NEXT; RETURN;
  END IF;
  IF v_version <> p_expected THEN
    outcome := 'version-mismatch'; actual := v_version; RETURN NEXT; RETURN;
  END IF;
  UPDATE ${s}.tenant_bytes SET data_bytes = data_bytes + p_delta WHERE tenant = v_tenant AND shard = (hashtext(p_id) & ${TENANT_SHARDS - 1});
  UPDATE ${s}.sessions SET labels = p_labels, metadata_version = metadata_version + 1, data_bytes = data_bytes + p_delta WHERE id = p_id;
  outcome := 'updated'; RETURN NEXT;
END
$fn$;

-- Deletes a session (visible or pending) with its events, keys and counter shares.
CREATE OR REPLACE FUNCTION ${s}.delete_session(p_id text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
  v_tenant text; v_bytes bigint;
BEGIN
  DELETE FROM ${s}.sessions WHERE id = p_id RETURNING tenant, data_bytes INTO v_tenant, v_bytes;
  IF NOT FOUND THEN RETURN false; END IF;
  DELETE FROM ${s}.events WHERE session_id = p_id;
  DELETE FROM ${s}.idempotency WHERE session_id = p_id;
  UPDATE ${s}.tenants SET session_count = session_count - 1 WHERE tenant = v_tenant;
  UPDATE ${s}.tenant_bytes SET data_bytes = data_bytes - v_bytes WHERE tenant = v_tenant AND shard = (hashtext(p_id) & ${TENANT_SHARDS - 1});
  RETURN true;
END
$fn$;
`;
}
