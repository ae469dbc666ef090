/**
 * The SQLite store's use of its heads record (head-record.ts): at open, the sessions whose stored
 * head is below their recorded one are refused (DATA_LOSS) until deleted; after a commit, a
 * created or published session's head is recorded; a deleted incarnation's late head lines are
 * not. Undefined record (`:memory:`, durability 'normal'): nothing is recorded or refused.
 */
import fs from 'node:fs';
import type Database from 'better-sqlite3';
import type { SessionRecord } from '../../app/store-port.js';
import { DataCorruptedError } from '../../app/storage-error.js';
import { HeadRecord, readHeads, readHeadsFile, type RecordedHead } from './head-record.js';
import type { Statements } from './statements.js';

/** Deleted incarnations remembered against late head lines (see #deletedHere). */
const DELETED_KEPT = 10_000;

/** The heads record of a store and the sessions it refused at open. */
export class HeadGuard {
  /** The second record of session heads; undefined for `:memory:` and durability 'normal'. */
  record: HeadRecord | undefined;
  /**
   * Why the heads record cannot be trusted (missing, emptied or damaged while the database held
   * sessions; head-record.ts), until `palimpsest verify --db F --reseal-heads`; undefined when sealed.
   */
  unsealed: string | undefined;
  /** Sessions that lost acknowledged commits (found at open), refused until deleted. */
  readonly damaged = new Map<string, DataCorruptedError>();
  /**
   * The damaged sessions missing from the database altogether: their recorded head. getSession
   * answers them with their damage and listSessions lists them (issue #33 item 4), so every RPC
   * says DATA_LOSS and both verifies find them, until they are deleted.
   */
  readonly missing = new Map<string, RecordedHead>();
  /**
   * Incarnations (`<created_at> <id>`) this store deleted: a head line of theirs that arrives after
   * the delete is not recorded. Cleared when the id is created or published again (a re-import
   * keeps its created_at).
   */
  readonly #deletedHere = new Set<string>();
  readonly #st: Statements;

  constructor(st: Statements) {
    this.#st = st;
  }

  /** Opens the heads file and refuses the sessions whose stored head is below the recorded one. */
  static open(db: Database.Database, path: string, st: Statements): HeadGuard {
    const guard = new HeadGuard(st);
    // The file is read before the database: every line in it is of a commit the database has.
    const file = readHeadsFile(path);
    let recorded = file.heads;
    // A file missing, empty or damaged while the database holds sessions protects nothing (issue
    // #33 item 5): marked unsealed, reported at every open until an operator re-seals it.
    let unsealed = file.unsealed;
    if (unsealed === undefined && db.prepare('SELECT 1 FROM sessions WHERE pending = 0 LIMIT 1').get() !== undefined) {
      if (!file.exists) unsealed = `${path} is missing`;
      else if (file.badLines > 0) unsealed = `${path} is damaged (${file.badLines} lines fail their checksum)`;
      else if (recorded.size === 0 && fs.statSync(path).size === 0) unsealed = `${path} is empty`;
    }
    const current = db.prepare('SELECT created_at, next_seq FROM sessions WHERE id = ? AND pending = 0').raw();
    const behind = (id: string, want: RecordedHead): boolean => {
      const row = current.get(id) as [number, number] | undefined;
      return row === undefined || row[0] !== want.createdAt || row[1] < want.nextSeq;
    };
    if ([...recorded].some(([id, want]) => behind(id, want))) {
      // Another process may have deleted a session between the two reads and not yet recorded
      // the delete: read the file again (its delete lines come after its commits) before judging.
      recorded = readHeads(path);
    }
    for (const [id, want] of recorded) {
      const row = current.get(id) as [number, number] | undefined;
      let problem: string | undefined;
      if (row === undefined || row[0] !== want.createdAt) problem = 'is missing from the database';
      if (row === undefined) guard.missing.set(id, want);
      else if (row[1] < want.nextSeq) problem = `has head ${row[1] - 1} in the database`;
      if (problem !== undefined) {
        guard.damaged.set(id, new DataCorruptedError(id, row !== undefined && row[0] === want.createdAt ? row[1] : undefined,
          `session ${id} ${problem} but its recorded head is ${want.nextSeq - 1}: acknowledged commits were lost ` +
          '(a damaged WAL or database file); the session is refused so its seqs are never reused; restore it from a backup or delete it'));
      }
    }
    const record = new HeadRecord(path, file.unsealed);
    if (unsealed !== undefined && file.unsealed === undefined) record.unseal(unsealed);
    guard.unsealed = unsealed;
    record.compact(() => {
      const all = new Map<string, RecordedHead>();
      for (const [id, created, next] of db.prepare('SELECT id, created_at, next_seq FROM sessions WHERE pending = 0').raw().iterate() as Iterable<[string, number, number]>) {
        if (!guard.damaged.has(id)) all.set(id, { createdAt: created, nextSeq: next });
      }
      for (const id of guard.damaged.keys()) all.set(id, recorded.get(id)!);
      return all;
    });
    guard.record = record;
    return guard;
  }

  /** Records the heads that commits moved (a deleted incarnation's are dropped). */
  heads(moved: readonly (readonly [string, number, number])[]): void {
    this.record?.heads(this.#deletedHere.size === 0 ? moved : moved.filter(([id, createdAt]) => !this.#deletedHere.has(`${createdAt} ${id}`)));
  }

  /** Throws for a session refused at open. */
  checkIntact(sessionId: string): void {
    const damage = this.damaged.get(sessionId);
    if (damage !== undefined) throw damage;
  }

  /** Records a created or published session's head. */
  recordHead(id: string): void {
    if (this.record === undefined) return;
    const row = this.#st.selectDigest.get(id) as [number, number, number] | undefined;
    if (row === undefined) return;
    this.#deletedHere.delete(`${row[2]} ${id}`);
    this.record.heads([[id, row[2], row[1]]]);
  }

  /**
   * After a delete (`before`: the session's digest row read before it): a refused session is
   * cleared (deleting it is how an operator clears it), a deleted one recorded. Returns whether a
   * refused session was cleared.
   */
  deleted(id: string, before: [number, number, number] | undefined, deleted: boolean, conditional: boolean): boolean {
    // A conditional delete (retention) that was refused leaves a damaged session as it is.
    const damage = deleted || !conditional ? this.damaged.get(id) : undefined;
    if (damage !== undefined) {
      // A refused session that is gone from the database: deleting it is how an operator clears it.
      this.damaged.delete(id);
      this.missing.delete(id);
      const recorded = readHeads(this.record!.path).get(id);
      if (recorded !== undefined) this.record!.deleted(id, recorded.createdAt);
    }
    if (deleted && before !== undefined) {
      this.record?.deleted(id, before[2]);
      // A group of it that committed just before the delete records its head once its sync
      // ended: that line must not bring the deleted incarnation back (see heads).
      if (this.record !== undefined) {
        this.#deletedHere.add(`${before[2]} ${id}`);
        // Such a line comes within a sync of the delete: the latest deletes are enough.
        if (this.#deletedHere.size > DELETED_KEPT) this.#deletedHere.delete(this.#deletedHere.values().next().value!);
      }
    }
    return damage !== undefined;
  }

  /**
   * A page of listSessions with the damaged sessions missing from the database listed in their
   * place (newest first); `records` holds up to `limit` rows after the cursor `after`.
   */
  withMissing(records: SessionRecord[], after: { createdAt: number; id: string }, tenant: string | undefined, limit: number): SessionRecord[] {
    if (this.missing.size === 0) return records;
    const before = (r: { header: { createdAt: number; id: string } }): boolean =>
      r.header.createdAt < after.createdAt || (r.header.createdAt === after.createdAt && r.header.id < after.id);
    const extra = [...this.missing].map(([id, head]) => this.#missingRecord(id, head))
      .filter((r) => before(r) && (tenant === undefined || r.tenant === tenant) && this.#st.selectSession.get(r.header.id) === undefined);
    if (extra.length === 0) return records;
    const all = [...records, ...extra].sort((x, y) => y.header.createdAt - x.header.createdAt || (x.header.id < y.header.id ? 1 : x.header.id > y.header.id ? -1 : 0));
    return all.slice(0, limit);
  }

  /** The record listSessions shows for a damaged session missing from the database. */
  #missingRecord(id: string, head: RecordedHead): SessionRecord {
    const slash = id.indexOf('/');
    return {
      header: { version: 0, id, createdAt: head.createdAt }, labels: {}, tenant: slash < 0 ? '' : id.slice(0, slash), nextSeq: head.nextSeq,
      eventCount: head.nextSeq, dataBytes: 0, strict: false, pairingGuard: false, writer: '', metadataVersion: 0,
    };
  }
}
