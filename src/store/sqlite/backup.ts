/**
 * Online backup of a Palimpsest SQLite database, then verification of the copy.
 *
 * The copy is made with SQLite's online backup API (better-sqlite3's `db.backup()`) from a
 * separate connection, so it works while a server runs on the file: the source is read under
 * one read transaction per step, and the steps are made as large as the whole database, so a
 * copy is one consistent snapshot (WAL readers never block the server's writers, and a write
 * between steps restarts the copy once rather than interleaving states). Everything the server
 * acknowledged before the backup started is in it.
 *
 * The copy is written to `<to>.partial`, switched to a self-contained rollback journal, checked
 * (`PRAGMA integrity_check`, `foreign_key_check`, the Palimpsest identity and schema version,
 * and every session's events against its recorded count and head), fsynced, and only then
 * renamed to `<to>`. A copy that fails a check is deleted and the problems are reported.
 *
 * Restore: stop the server, move the database file and its `-wal` / `-shm` / `-heads` files away, copy the
 * backup in place of the database file, start the server.
 */
import { existsSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { APPLICATION_ID } from './schema.js';
import { fsyncPath } from './fsync-path.js';
import { versionProblem } from './migrate.js';
import { verifyDatabase, type VerifyResult } from './verify.js';

/** What a backup produced. */
export interface BackupReport {
  readonly source: string;
  readonly path: string;
  readonly bytes: number;
  readonly sessions: number;
  readonly events: number;
  /** Sessions of an import that was still streaming (the server drops them when it opens the copy). */
  readonly pendingSessions: number;
  readonly ms: number;
}

/** A backup that could not be made or did not verify; `problems` lists what a check found. */
export class BackupError extends Error {
  constructor(message: string, readonly usage: boolean, readonly problems: readonly string[] = []) {
    super(message);
    this.name = 'BackupError';
  }
}

function checkIdentity(db: Database.Database, what: string): string | undefined {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  const userVersion = db.pragma('user_version', { simple: true }) as number;
  if (applicationId !== APPLICATION_ID) return `${what} is not a Palimpsest database (application_id ${applicationId})`;
  return versionProblem(what, userVersion);
}

/** Copies `source` (a live Palimpsest database) to `to`, verified; see the module comment. */
export async function backupDatabase(source: string, to: string): Promise<BackupReport> {
  const started = Date.now();
  if (!existsSync(source)) throw new BackupError(`no database at ${source}`, true);
  if (existsSync(to)) throw new BackupError(`${to} already exists; choose a new backup file (a backup never overwrites one)`, true);
  const partial = `${to}.partial`;
  rmSync(partial, { force: true });
  let src: Database.Database;
  try {
    src = new Database(source, { fileMustExist: true });
  } catch (e) {
    throw new BackupError(`cannot open ${source}: ${(e as Error).message}`, true);
  }
  try {
    src.pragma('busy_timeout = 5000');
    const identity = checkIdentity(src, source);
    if (identity) throw new BackupError(identity, true);
    // One step as large as the database: a consistent snapshot (see the module comment).
    await src.backup(partial, { progress: () => 1 << 30 });
  } catch (e) {
    rmSync(partial, { force: true });
    if (e instanceof BackupError) throw e;
    throw new BackupError(`backup of ${source} failed: ${(e as Error).message}`, false);
  } finally {
    src.close();
  }
  let result: VerifyResult;
  try {
    const copy = new Database(partial, { fileMustExist: true });
    try {
      // A backup is one self-contained file (the server switches it back to WAL when it opens it).
      copy.pragma('journal_mode = DELETE');
      result = verifyDatabase(copy, undefined, 'the copy');
    } finally {
      copy.close();
    }
  } catch (e) {
    rmSync(partial, { force: true });
    throw new BackupError(`cannot verify the copy: ${(e as Error).message}`, false);
  }
  if (result.problems.length > 0) {
    rmSync(partial, { force: true });
    throw new BackupError(`the copy of ${source} did not verify; nothing was written to ${to}`, false, result.problems);
  }
  fsyncPath(partial);
  renameSync(partial, to);
  fsyncPath(dirname(to));
  return {
    source, path: to, bytes: statSync(to).size, sessions: result.sessions, events: result.events, pendingSessions: result.pendingSessions, ms: Date.now() - started,
  };
}
