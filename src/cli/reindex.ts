/**
 * `palimpsest reindex --db FILE|URL`: rebuilds the search index (issue #40) from the events,
 * online: one session per transaction, while the server runs (SQLite: its own connection to the
 * file; PostgreSQL: a small pool of its own). Reports the sessions and events indexed, then
 * checks the index against the events. Exit status: 0 rebuilt and verified, 1 a problem, 2 usage.
 */
import { parseArgs } from 'node:util';
import type { SearchIndex } from '../app/search-port.js';
import { isPostgresUrl } from '../store/postgres/url.js';
import { EXIT } from './client.js';

/** The help text of `palimpsest reindex`. */
export const REINDEX_HELP = `Usage: palimpsest reindex [--db FILE|URL] [--schema NAME] [--json]

Rebuilds the search index of SearchEvents from the stored events, online (one session per
transaction; appends and searches go on meanwhile), then checks it against the events. The
server's follower keeps the index up to date by itself: run this after restoring an index-less copy, after
\`palimpsest verify\` reports search index problems, or to apply a changed searchable-text rule.

Options:
  --db FILE|URL  the SQLite database file or PostgreSQL URL (default $PALIMPSEST_DB or ./palimpsest.db)
  --schema NAME  with a PostgreSQL URL: the schema (default palimpsest)
  --json         print the report as JSON
  -h, --help     show this help

Example:
  palimpsest reindex --db /var/lib/palimpsest.db
`;

/** Runs the reindex command; resolves with the exit status. */
export async function reindex(argv: string[], io: { stdout: { write(s: string): unknown }; stderr: { write(s: string): unknown }; env: NodeJS.ProcessEnv }): Promise<number> {
  let values: { db?: string; schema?: string; json?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({ args: argv, options: { db: { type: 'string' }, schema: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (e) {
    io.stderr.write(`error: USAGE: ${(e as Error).message}; see palimpsest reindex --help\n`);
    return EXIT.USAGE;
  }
  if (values.help) {
    io.stdout.write(REINDEX_HELP);
    return EXIT.OK;
  }
  const db = values.db || io.env['PALIMPSEST_DB'] || 'palimpsest.db';
  let index: SearchIndex;
  try {
    if (isPostgresUrl(db)) {
      const { PostgresSearchIndex } = await import('../store/postgres/search.js');
      index = new PostgresSearchIndex({ url: db, schema: values.schema });
    } else {
      const { SqliteSearchIndex } = await import('../store/sqlite/search.js');
      index = new SqliteSearchIndex(db);
    }
  } catch (e) {
    io.stderr.write(`error: cannot open ${db}: ${(e as Error).message}\n`);
    return EXIT.REJECTED;
  }
  try {
    const started = Date.now();
    const done = await index.reindex();
    const check = await index.verifyIndex();
    const ms = Date.now() - started;
    if (values.json) io.stdout.write(JSON.stringify({ ...done, ms, problems: check.problems }) + '\n');
    else {
      io.stdout.write(`reindexed ${done.sessions} sessions, ${done.events} message events in ${ms} ms\n`);
      for (const p of check.problems) io.stdout.write(`${p}\n`);
    }
    return check.problems.length === 0 ? EXIT.OK : EXIT.REJECTED;
  } catch (e) {
    io.stderr.write(`error: reindex failed: ${(e as Error).message}\n`);
    return EXIT.REJECTED;
  } finally {
    await index.close();
  }
}
