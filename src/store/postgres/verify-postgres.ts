/**
 * `palimpsest verify --db postgres://…` (issue #39): what can be checked of a PostgreSQL store's
 * schema from outside the server, in one REPEATABLE READ READ ONLY transaction (safe while
 * replicas write): the schema version, and the blobs (migrations/0008-blobs.ts):
 *
 *  - every blob's bytes against its CRC-32, its SHA-256 digest and its recorded size; a damaged
 *    blob is reported once per event referencing it, naming the session, the seq and the digest
 *    (what a read of that event answers: DATA_CORRUPTED, DATA_LOSS);
 *  - every event's references (the reference objects in its data, src/domain/blobs.ts) against
 *    its event_blobs rows, both ways, and every event_blobs row against its event;
 *  - no blob without a reference;
 *  - each tenant's byte counter against its sessions' bytes plus its blobs' sizes (once each);
 *  - the search index (issue #40) against the events, in a transaction of its own
 *    (PostgresSearchIndex.verifyEntries: the entries the follower has reached, `tsv` included) of
 *    the newest SEARCH_VERIFY_NEWEST sessions and SEARCH_VERIFY_RANDOM others at random, or of
 *    every session with `searchFull` (it rebuilds their index: slow on a large database), and the
 *    follower's lag, which is no problem.
 *
 * PostgreSQL keeps no per-row checksums of its own (its page checksums, `initdb -k`, cover the
 * pages); the event log itself is checked through a server (`verify --addr`).
 */
import pg from 'pg';
import { createHash } from 'node:crypto';
import { findBlobRefs } from '../../domain/blobs.js';
import type { Json } from '../../domain/event.js';
import { pgBlobCrc } from './pg-blobs.js';
import { SCHEMA_NAME_PATTERN, SCHEMA_VERSION } from './schema.js';
import { redactUrl } from './url.js';
import { PostgresSearchIndex } from './search.js';

/** One finding. */
export interface PgVerifyProblem {
  readonly sessionId?: string;
  readonly seq?: number;
  readonly problem: string;
}

export interface PgVerifyReport {
  readonly source: string;
  readonly sessions: number;
  readonly events: number;
  readonly blobs: number;
  readonly problems: PgVerifyProblem[];
  /** The search index follower's lag: events not followed yet are no problem. */
  readonly searchIndexLag?: { readonly events: number; readonly seconds: number };
  /** Whose search index entries were compared: `sessions` of `of`, all of them with `full`, else the `newest` and `random` others. */
  readonly searchIndexChecked?: { readonly sessions: number; readonly of: number; readonly full: boolean; readonly newest: number; readonly random: number };
}

/** Options of {@link verifyPostgres}. */
export interface PgVerifyOptions {
  /** Compare every session's search index entries (`--search-full`); else {@link SEARCH_VERIFY_NEWEST} + {@link SEARCH_VERIFY_RANDOM} sessions. */
  readonly searchFull?: boolean;
  /** The sample's newest sessions (tests). */
  readonly searchNewest?: number;
  /** The sample's sessions chosen at random among the others (tests). */
  readonly searchRandom?: number;
}

/** The search index check compares the entries of the newest this many sessions (by creation)... */
export const SEARCH_VERIFY_NEWEST = 100;
/** ...and of this many others chosen at random, unless `--search-full`. */
export const SEARCH_VERIFY_RANDOM = 100;

/** At most this many findings of one kind are listed. */
const LIMIT = 100;
/** Blobs read per query. */
const BLOB_PAGE = 16;

/** Checks schema `schema` of the database at `url` (see the module comment). Throws when it cannot be read. */
export async function verifyPostgres(url: string, schema = 'palimpsest', options: PgVerifyOptions = {}): Promise<PgVerifyReport> {
  if (!SCHEMA_NAME_PATTERN.test(schema)) throw new Error(`schema name ${JSON.stringify(schema)} must match ${SCHEMA_NAME_PATTERN}`);
  const s = schema;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const problems: PgVerifyProblem[] = [];
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const v = await client.query<{ version: number }>(`SELECT version FROM ${s}.schema_version`);
    const version = v.rows[0]?.version;
    if (version !== SCHEMA_VERSION) {
      throw new Error(`schema ${s} is at version ${String(version)}, this build checks version ${SCHEMA_VERSION} (open it with a server of this build first, which migrates it)`);
    }
    const counts = (await client.query<{ sessions: string; events: string; blobs: string }>(
      `SELECT (SELECT count(*) FROM ${s}.sessions) AS sessions, (SELECT count(*) FROM ${s}.events) AS events, (SELECT count(*) FROM ${s}.blobs) AS blobs`)).rows[0]!;

    // Blobs: bytes against checksum, digest and size.
    const damaged = new Map<string, string>();
    // In pages by key (a store holds gigabytes of blobs: only a page's bytes are in memory at once).
    let after: [string, string] = ['', ''];
    for (;;) {
      const page = await client.query<{ tenant: string; digest: string; size: string; crc: number; bytes: Buffer }>(
        `SELECT tenant, digest, size, crc, bytes FROM ${s}.blobs WHERE (tenant, digest) > ($1, $2) ORDER BY tenant, digest LIMIT ${BLOB_PAGE}`, after);
      for (const b of page.rows) {
        let why: string | undefined;
        if (pgBlobCrc(b.bytes) !== b.crc) why = 'fails its checksum';
        else if (`sha256:${createHash('sha256').update(b.bytes).digest('hex')}` !== b.digest) why = 'does not match its digest';
        else if (b.bytes.byteLength !== Number(b.size)) why = `has ${b.bytes.byteLength} bytes, ${b.size} recorded`;
        if (why !== undefined) damaged.set(`${b.tenant}\n${b.digest}`, why);
      }
      if (page.rows.length < BLOB_PAGE) break;
      const last = page.rows[page.rows.length - 1]!;
      after = [last.tenant, last.digest];
    }
    for (const [key, why] of damaged) {
      const [tenant, digest] = key.split('\n') as [string, string];
      const refs = await client.query<{ session_id: string; seq: string }>(
        `SELECT session_id, seq FROM ${s}.event_blobs WHERE tenant = $1 AND digest = $2 ORDER BY session_id, seq LIMIT ${LIMIT}`, [tenant, digest]);
      if (refs.rows.length === 0) problems.push({ problem: `blob ${digest} of tenant ${JSON.stringify(tenant)} ${why}` });
      for (const r of refs.rows) problems.push({ sessionId: r.session_id, seq: Number(r.seq), problem: `event ${r.seq} references blob ${digest}, which ${why} (DATA_CORRUPTED)` });
    }

    // Every event's references against its event_blobs rows, both ways.
    const held = await client.query<{ session_id: string; seq: string; data: string | null; refs: { digest: string; n: number }[] | null }>(
      `SELECT coalesce(e.session_id, r.session_id) AS session_id, coalesce(e.seq, r.seq) AS seq, e.data, r.refs
         FROM (SELECT session_id, seq, data FROM ${s}.events WHERE strpos(data, '"$blob"') > 0) e
         FULL JOIN (SELECT session_id, seq, json_agg(json_build_object('digest', digest, 'n', n)) AS refs FROM ${s}.event_blobs GROUP BY session_id, seq) r
           ON r.session_id = e.session_id AND r.seq = e.seq`);
    let mismatches = 0;
    for (const row of held.rows) {
      if (mismatches >= LIMIT) break;
      const seq = Number(row.seq);
      if (row.data === null) {
        const exists = await client.query(`SELECT 1 FROM ${s}.events WHERE session_id = $1 AND seq = $2`, [row.session_id, seq]);
        if (exists.rowCount === 0) {
          problems.push({ sessionId: row.session_id, seq, problem: `blob references of event ${seq} outlived the event` });
          mismatches++;
          continue;
        }
      }
      const want = new Map<string, number>();
      if (row.data !== null) for (const r of findBlobRefs(JSON.parse(row.data) as Json)) want.set(r.digest, (want.get(r.digest) ?? 0) + 1);
      const got = new Map<string, number>((row.refs ?? []).map((r) => [r.digest, r.n]));
      for (const d of new Set([...want.keys(), ...got.keys()])) {
        if ((want.get(d) ?? 0) === (got.get(d) ?? 0)) continue;
        mismatches++;
        problems.push({
          sessionId: row.session_id, seq,
          problem: (got.get(d) ?? 0) === 0
            ? `event ${seq} references blob ${d}, which it holds no reference to (the blob may be freed under it)`
            : `event ${seq} records ${got.get(d) ?? 0} reference(s) to blob ${d}, its data holds ${want.get(d) ?? 0}`,
        });
      }
    }

    // No blob without a reference.
    const orphans = await client.query<{ tenant: string; digest: string }>(
      `SELECT b.tenant, b.digest FROM ${s}.blobs b WHERE NOT EXISTS (SELECT 1 FROM ${s}.event_blobs r WHERE r.tenant = b.tenant AND r.digest = b.digest) LIMIT ${LIMIT}`);
    for (const o of orphans.rows) problems.push({ problem: `blob ${o.digest} of tenant ${JSON.stringify(o.tenant)} is referenced by no event` });

    // Tenant byte counters: sessions' bytes plus each blob once.
    const tenants = await client.query<{ tenant: string; counted: string; sessions: string; blobs: string }>(
      `SELECT t.tenant, t.counted, coalesce(x.bytes, 0) AS sessions, coalesce(b.bytes, 0) AS blobs
         FROM (SELECT tenant, sum(data_bytes) AS counted FROM ${s}.tenant_bytes GROUP BY tenant) t
         LEFT JOIN (SELECT tenant, sum(data_bytes) AS bytes FROM ${s}.sessions GROUP BY tenant) x ON x.tenant = t.tenant
         LEFT JOIN (SELECT tenant, sum(size) AS bytes FROM ${s}.blobs GROUP BY tenant) b ON b.tenant = t.tenant`);
    for (const t of tenants.rows) {
      const want = Number(t.sessions) + Number(t.blobs);
      if (Number(t.counted) !== want) {
        problems.push({ problem: `tenant ${JSON.stringify(t.tenant)} counts ${t.counted} bytes; its sessions hold ${t.sessions} and its blobs ${t.blobs} (${want})` });
      }
    }
    await client.query('COMMIT');
    const index = new PostgresSearchIndex({ url, schema: s, poolSize: 1 });
    let searchIndexLag: { events: number; seconds: number };
    let searchIndexChecked: PgVerifyReport['searchIndexChecked'];
    try {
      const full = options.searchFull === true;
      const sample = { newest: options.searchNewest ?? SEARCH_VERIFY_NEWEST, random: options.searchRandom ?? SEARCH_VERIFY_RANDOM };
      const checked = await index.verifyEntries(full ? undefined : sample);
      for (const problem of checked.problems) problems.push({ problem });
      searchIndexChecked = { sessions: checked.sessions, of: checked.of, full, ...sample };
      searchIndexLag = await index.lag();
    } finally {
      await index.close();
    }
    return { source: `${redactUrl(url)} schema ${s}`, sessions: Number(counts.sessions), events: Number(counts.events), blobs: Number(counts.blobs), problems, searchIndexLag, searchIndexChecked };
  } finally {
    await client.end().catch(() => undefined);
  }
}
