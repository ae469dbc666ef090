/**
 * `palimpsest backup --db FILE --to BACKUP`: a consistent, verified copy of a database, made
 * while the server runs (src/store/sqlite/backup.ts). Like `serve`, it works on the file itself,
 * not through the server. Exit status: 0 verified, 1 the copy failed or did not verify, 2 usage.
 */
import { parseArgs } from 'node:util';
import { BackupError, backupDatabase } from '../store/sqlite/backup.js';
import { EXIT } from './client.js';

/** The help text of `palimpsest backup`. */
export const BACKUP_HELP = `Usage: palimpsest backup --db FILE --to BACKUP [--json]

Copies a Palimpsest SQLite database with SQLite's online backup API (safe while the server runs:
one consistent snapshot holding everything acknowledged before the backup started), then verifies
the copy (integrity_check, foreign keys, schema version, every session's events against its
recorded count and head) before it appears under BACKUP. Never overwrites an existing file.

Restore: stop the server, move FILE and its -wal/-shm/-heads files away, copy BACKUP to FILE, start the
server. For PostgreSQL use pg_dump / pg_restore (see docs/operations.md, Backup and restore).

Options:
  --db FILE      the database to back up (default $PALIMPSEST_DB or ./palimpsest.db)
  --to BACKUP    the backup file to create
  --json         print the report as JSON
  -h, --help     show this help

Example:
  palimpsest backup --db /var/lib/palimpsest.db --to /backups/palimpsest-$(date +%F).db
`;

/** Runs the backup command; resolves with the exit status. */
export async function backup(argv: string[], io: { stdout: { write(s: string): unknown }; stderr: { write(s: string): unknown }; env: NodeJS.ProcessEnv }): Promise<number> {
  let values: { db?: string; to?: string; json?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({ args: argv, options: { db: { type: 'string' }, to: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (e) {
    io.stderr.write(`error: USAGE: ${(e as Error).message}; see palimpsest backup --help\n`);
    return EXIT.USAGE;
  }
  if (values.help) {
    io.stdout.write(BACKUP_HELP);
    return EXIT.OK;
  }
  const db = values.db || io.env['PALIMPSEST_DB'] || 'palimpsest.db';
  if (!values.to) {
    io.stderr.write('error: USAGE: --to BACKUP is required; see palimpsest backup --help\n');
    return EXIT.USAGE;
  }
  try {
    const r = await backupDatabase(db, values.to);
    if (values.json) io.stdout.write(JSON.stringify({ ...r, verified: true }) + '\n');
    else {
      io.stdout.write(`backed up ${r.source} to ${r.path}: ${r.sessions} sessions, ${r.events} events, ${r.bytes} bytes in ${r.ms} ms; verified\n`);
      if (r.pendingSessions > 0) io.stdout.write(`(${r.pendingSessions} import(s) still streaming at backup time are in the copy as pending; the server drops them when it opens it)\n`);
    }
    return EXIT.OK;
  } catch (e) {
    if (!(e instanceof BackupError)) throw e;
    if (values.json) io.stderr.write(JSON.stringify({ code: e.usage ? 'INVALID_ARGUMENT' : 'DATA_LOSS', reason: e.usage ? 'USAGE' : 'BACKUP_FAILED', message: e.message, problems: e.problems }) + '\n');
    else {
      io.stderr.write(`error: ${e.usage ? 'USAGE' : 'BACKUP_FAILED'}: ${e.message}\n`);
      for (const p of e.problems) io.stderr.write(`  ${p}\n`);
    }
    return e.usage ? EXIT.USAGE : EXIT.REJECTED;
  }
}
