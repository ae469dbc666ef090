/**
 * `palimpsest verify --db FILE` and the check of every backup copy: everything the SQLite store
 * can check about a database file without trusting it.
 *
 * - the Palimpsest identity and schema version; `PRAGMA integrity_check` and `foreign_key_check`
 *   (SQLite's own b-tree structure);
 * - every event row's two CRC-32C values (integrity.ts) and, per session, the digest chain of its
 *   rows against the session row (rows missing, moved or rewritten consistently);
 * - contiguity: seqs ascend, as many rows as `event_count`, the last one right below `next_seq`
 *   (imported logs may have seq gaps, so min..max is not required);
 * - the surface replays through the domain engine (SessionEngine.loadEvents: every surface op
 *   folds onto the surface it was committed against);
 * - the search index (issue #40, search.ts): an entry per message event, equal to what the event
 *   gives, none of deleted sessions;
 * - the heads recorded outside the database (`<db>-heads`, head-record.ts): a session whose head
 *   is below its recorded head, or that is missing, lost acknowledged commits.
 *
 * Reads one session at a time in seq order (one read transaction for the whole file, so a server
 * writing meanwhile is seen at one snapshot).
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { SessionEngine } from '../../domain/session-engine.js';
import { readHeads, readHeadsFile, writeHeadsFile, type RecordedHead } from './head-record.js';
import { digestStep } from './integrity.js';
import { decodeEvent, EVENT_COLUMNS, rowDamage, type ChecksummedRawEvent } from './row-codec.js';
import { APPLICATION_ID } from './schema.js';
import { versionProblem } from './migrate.js';
import type { SessionEvent } from '../../domain/event.js';
import { inflateForReplay, verifyBlobs } from './verify-blobs.js';
import { attachSearchIndexForVerify, verifySqliteSearch } from './search.js';
import { searchIndexPath } from './search-file.js';
import { sqliteSearchLag } from './search-follow.js';
import type { SearchLag } from '../../app/search-port.js';

/** One problem found. */
export interface VerifyProblem {
  readonly sessionId?: string;
  readonly seq?: number;
  readonly problem: string;
}

/** What a verification found. */
export interface VerifyResult {
  readonly sessions: number;
  readonly events: number;
  readonly pendingSessions: number;
  /** Problems as printable lines (`session "id": ...`). */
  readonly problems: string[];
  /** The same problems, structured. */
  readonly details: VerifyProblem[];
  /** The search index follower's lag at the same snapshot (a file with the index); not a problem. */
  readonly searchIndexLag?: SearchLag;
}

/** At most this many damaged rows are listed per session (the count is always given). */
const MAX_ROWS_LISTED = 20;

function identityProblem(db: Database.Database, what: string): string | undefined {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  const userVersion = db.pragma('user_version', { simple: true }) as number;
  if (applicationId !== APPLICATION_ID) return `${what} is not a Palimpsest database (application_id ${applicationId})`;
  return versionProblem(what, userVersion);
}

/**
 * Checks an open database (see the module comment). `headsPath`: the database's heads file, when
 * it has one (a backup copy does not).
 */
export function verifyDatabase(db: Database.Database, headsPath?: string, what = 'the database'): VerifyResult {
  const details: VerifyProblem[] = [];
  let searchIndexLag: SearchLag | undefined;
  const add = (p: VerifyProblem): void => {
    details.push(p);
  };
  const identity = identityProblem(db, what);
  if (identity) return { sessions: 0, events: 0, pendingSessions: 0, problems: [identity], details: [{ problem: identity }] };
  let sessions = 0;
  let events = 0;
  let pending = 0;
  // The search index's own file (search-file.ts), attached before the snapshot is taken.
  let searchIndex = false;
  try {
    searchIndex = attachSearchIndexForVerify(db);
  } catch (e) {
    add({ problem: `search index: ${(e as Error).message} (the server rebuilds it at start; or run palimpsest reindex)` });
  }
  db.transaction(() => {
    // The database's own check (an unqualified integrity_check checks every attached file), then the index file's apart.
    for (const row of db.pragma('main.integrity_check') as { integrity_check: string }[]) {
      if (row.integrity_check !== 'ok') add({ problem: `integrity_check: ${row.integrity_check}` });
    }
    if (searchIndex) {
      for (const row of db.pragma('search.integrity_check') as { integrity_check: string }[]) {
        if (row.integrity_check !== 'ok') add({ problem: `search index: integrity_check: ${row.integrity_check} (stop the server and delete ${searchIndexPath(db.name)}*: the server builds it again at start)` });
      }
    }
    const fk = db.pragma('foreign_key_check') as { table: string; parent: string }[];
    if (fk.length > 0) add({ problem: `foreign_key_check: ${fk.length} rows of ${fk[0]!.table} without their ${fk[0]!.parent} row` });
    const rowsOf = db.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq`).raw();
    const all = db.prepare('SELECT id, pending, created_at, next_seq, event_count, digest, strict FROM sessions ORDER BY id').raw();
    const live = new Map<string, [number, number]>();
    for (const [id, isPending, createdAt, nextSeq, eventCount, digest, strict] of all.iterate() as Iterable<[string, number, number, number, number, number, number]>) {
      if (isPending === 1) {
        pending++;
        continue;
      }
      sessions++;
      live.set(id, [createdAt, nextSeq]);
      let n = 0;
      let last = -1;
      let chain = 0;
      let bad = 0;
      let ordered = true;
      const decoded: SessionEvent[] = [];
      for (const r of rowsOf.iterate(id) as Iterable<ChecksummedRawEvent>) {
        n++;
        if (r[0] <= last) ordered = false;
        last = r[0];
        chain = digestStep(chain, r[7], r[8]);
        const damage = rowDamage(r);
        if (damage !== undefined) {
          if (bad++ < MAX_ROWS_LISTED) add({ sessionId: id, seq: r[0], problem: `event ${r[0]} fails its ${damage} checksum` });
          continue;
        }
        if (bad === 0) decoded.push(decodeEvent(id, r));
      }
      events += n;
      if (bad > MAX_ROWS_LISTED) add({ sessionId: id, problem: `${bad} events fail their checksums (the first ${MAX_ROWS_LISTED} listed)` });
      if (!ordered) add({ sessionId: id, problem: 'seqs do not ascend' });
      if (n !== eventCount) add({ sessionId: id, problem: `${n} events stored, ${eventCount} recorded` });
      if (n > 0 && nextSeq !== last + 1) add({ sessionId: id, problem: `last seq ${last}, recorded head ${nextSeq - 1}` });
      if (chain !== digest) add({ sessionId: id, problem: 'the stored events do not match the session digest (rows missing, moved or rewritten)' });
      if (bad === 0 && ordered) {
        try {
          SessionEngine.create({ strict: strict === 1 }).loadEvents(inflateForReplay(db, id, decoded));
        } catch (e) {
          add({ sessionId: id, problem: `the surface does not replay: ${(e as Error).message}` });
        }
      }
    }
    verifyBlobs(db, add);
    if (headsPath !== undefined) {
      const file = readHeadsFile(headsPath);
      const reseal = 'check the database, then re-seal with palimpsest verify --db FILE --reseal-heads (server stopped)';
      if (file.unsealed !== undefined) add({ problem: `the heads record is unsealed (${file.unsealed}): lost commits would go unseen; ${reseal}` });
      else if (sessions > 0 && !file.exists) add({ problem: `the heads record ${headsPath} is missing (expected only under --durability normal, which keeps none); ${reseal}` });
      else if (file.badLines > 0) add({ problem: `the heads record ${headsPath} is damaged (${file.badLines} lines fail their checksum); ${reseal}` });
      else if (sessions > 0 && statSync(headsPath).size === 0) add({ problem: `the heads record ${headsPath} is empty; ${reseal}` });
    }
    if (headsPath !== undefined && existsSync(headsPath)) {
      for (const [id, want] of readHeads(headsPath)) {
        const have = live.get(id);
        if (have === undefined || have[0] !== want.createdAt) add({ sessionId: id, problem: `missing, but its recorded head is ${want.nextSeq - 1} (acknowledged commits lost)` });
        else if (have[1] < want.nextSeq) {
          add({ sessionId: id, seq: have[1], problem: `head ${have[1] - 1} is below the recorded head ${want.nextSeq - 1} (acknowledged commits lost; the server refuses the session)` });
        }
      }
    }
    // The search index (issue #40) against the events, at the same snapshot.
    // Sessions already found damaged are not compared again.
    const damaged = new Set(details.flatMap((d) => (d.sessionId === undefined ? [] : [d.sessionId])));
    if (searchIndex) {
      for (const p of verifySqliteSearch(db, damaged).problems) add({ problem: p });
      searchIndexLag = sqliteSearchLag(db);
    }
  })();
  const problems = details.map((d) => (d.sessionId === undefined ? d.problem : `session ${JSON.stringify(d.sessionId)}: ${d.problem}`));
  return { sessions, events, pendingSessions: pending, problems, details, ...(searchIndexLag ? { searchIndexLag } : {}) };
}

/**
 * Re-seals a database's heads record (`palimpsest verify --db F --reseal-heads`, with the server
 * stopped, after checking the database): rewrites `<db>-heads` from the database's heads, keeping a
 * recorded head above the stored one (that session lost commits and stays refused) and dropping
 * the unsealed mark. Returns how many heads it wrote.
 */
export function resealHeads(path: string): number {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  const heads = new Map<string, RecordedHead>();
  const headsPath = `${realpathSync(path)}-heads`;
  try {
    db.pragma('busy_timeout = 5000');
    const recorded = readHeadsFile(headsPath).heads;
    for (const [id, createdAt, nextSeq] of db.prepare('SELECT id, created_at, next_seq FROM sessions WHERE pending = 0').raw().iterate() as Iterable<[string, number, number]>) {
      const want = recorded.get(id);
      heads.set(id, { createdAt, nextSeq: want !== undefined && want.createdAt === createdAt ? Math.max(want.nextSeq, nextSeq) : nextSeq });
    }
    for (const [id, want] of recorded) if (!heads.has(id)) heads.set(id, want);
  } finally {
    db.close();
  }
  writeHeadsFile(headsPath, heads);
  return heads.size;
}

/** Verifies a database file (read-only; safe while a server runs on it). */
export function verifyFile(path: string): VerifyResult {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    return verifyDatabase(db, `${path}-heads`, path);
  } finally {
    db.close();
  }
}
