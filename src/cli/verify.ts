/**
 * `palimpsest verify [--db FILE | --addr ADDR]`: checks every session and prints a report.
 *
 * --db FILE works on the file (safe while a server runs on it; src/store/sqlite/verify.ts):
 * `PRAGMA integrity_check`, every event row's checksums, each session's digest, contiguity, the
 * surface replayed through the domain engine, and the heads recorded outside the database.
 * --addr ADDR verifies through a running server's RPCs (any store): ListSessions, then per session
 * every ListEvents page (seqs ascend, as many as the session counts, the last one its head; a
 * session the server refuses with DATA_LOSS is reported) and the surface replayed through the
 * domain engine against GetSurface, and the server's health `palimpsest.heads-record` (NOT_SERVING
 * while its SQLite heads record is unsealed).
 *
 * Exit status: 0 no problem found, 1 a problem found, 2 usage, 3 the server cannot be reached.
 */
import { existsSync } from 'node:fs';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import { HealthClient, HealthCheckResponse_ServingStatus } from '../../gen/grpc/health/v1/health.js';
import { parseArgs } from 'node:util';
import { DataFormat, Direction } from '../../gen/palimpsest/v1/service.js';
import type { SessionEvent as PbSessionEvent } from '../../gen/palimpsest/v1/event.js';
import { decodeError } from '../client/error-details.js';
import { SessionEngine } from '../domain/session-engine.js';
import type { StructuralRow } from '../app/store-port.js';
import { resealHeads, verifyFile } from '../store/sqlite/verify.js';
import { isPostgresUrl, redactUrl } from '../store/postgres/url.js';
import { Args } from './args.js';
import { connectOptions, EXIT, Rpc, UnreachableError, type ConnectOptions } from './client.js';

/** The help text of `palimpsest verify`. */
export const VERIFY_HELP = `Usage: palimpsest verify [--db FILE [--reseal-heads] | --db postgres://… [--search-full] | --addr ADDR | --context NAME] [--json]

Checks every session and prints a report; exit status 1 when anything is wrong.

  --db FILE    check a database file (safe while the server runs): PRAGMA integrity_check, every
               event's checksums, each session's digest, contiguity, the surface replayed through
               the domain engine, and the session heads recorded in FILE-heads
  --db postgres://…  check a PostgreSQL store (schema palimpsest; safe while replicas write): the
               schema version, every blob against its checksum, digest and size (a damaged one
               named by session, seq and digest), every event's blob references, the tenant
               byte counters (docs/blobs.md), and the search index entries of the newest 100
               sessions and 100 others at random, each against its events (docs/search.md)
  --search-full  with --db postgres://…: compare the search index entries of every session (it
               rebuilds the whole index in a rolled-back transaction: slow on a large database)
  --addr ADDR  check through a running server's RPCs (any store): contiguity, and the surface
               replayed from ListEvents against GetSurface (sessions the server refuses with
               DATA_LOSS are reported), and whether its heads record is unsealed (health
               palimpsest.heads-record); without --db and --addr, $PALIMPSEST_ADDR when set
  --context NAME  as --addr, the server (and TLS files, token) of a saved context (palimpsest context)
  --token T, --tls-ca F, --tls-cert F, --tls-key F   as for the other client commands (with --addr)
  --reseal-heads  with --db, the server stopped, after checking the database: rewrite FILE-heads
               from the database (a missing, emptied or damaged heads record leaves the server
               unable to see lost commits and is reported until re-sealed), then verify
  --json       print the report as one JSON object
  -h, --help   show this help

Exit status: 0 no problem found, 1 problems found, 2 usage error, 3 the server cannot be reached.

Example:
  palimpsest verify --db /var/lib/palimpsest.db
`;

interface Io {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
  env: NodeJS.ProcessEnv;
}

interface Report {
  readonly source: string;
  readonly sessions: number;
  readonly events: number;
  readonly problems: readonly { sessionId?: string; seq?: number; problem: string }[];
  /** The search index follower's lag (a SQLite file with the index): events not followed yet are no problem. */
  readonly searchIndexLag?: { readonly events: number; readonly seconds: number };
  /** PostgreSQL: whose search index entries were compared (`sessions` of `of`; all with `full`). */
  readonly searchIndexChecked?: { readonly sessions: number; readonly of: number; readonly full: boolean; readonly newest: number; readonly random: number };
}

/** Runs the verify command; resolves with the exit status. */
export async function verify(argv: string[], io: Io): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        db: { type: 'string' }, addr: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' }, 'reseal-heads': { type: 'boolean' },
        'search-full': { type: 'boolean' }, token: { type: 'string' }, 'tls-ca': { type: 'string' }, 'tls-cert': { type: 'string' }, 'tls-key': { type: 'string' }, 'connect-timeout': { type: 'string' },
        context: { type: 'string' },
      },
      strict: true,
    }));
  } catch (e) {
    io.stderr.write(`error: USAGE: ${(e as Error).message}; see palimpsest verify --help\n`);
    return EXIT.USAGE;
  }
  if (values.help) {
    io.stdout.write(VERIFY_HELP);
    return EXIT.OK;
  }
  // The server is the target (--addr, --context, or $PALIMPSEST_ADDR without --db): the dispatch below.
  const toServer = values.addr !== undefined || values.context !== undefined || (values.db === undefined && Boolean(io.env['PALIMPSEST_ADDR']));
  if (values.db !== undefined && (values.addr !== undefined || values.context !== undefined)) {
    io.stderr.write(`error: USAGE: give --db FILE or ${values.addr !== undefined ? '--addr ADDR' : '--context NAME'}, not both; see palimpsest verify --help\n`);
    return EXIT.USAGE;
  }
  if (values['reseal-heads'] && toServer) {
    io.stderr.write('error: USAGE: --reseal-heads works on a database file: give --db FILE; see palimpsest verify --help\n');
    return EXIT.USAGE;
  }
  if (values['search-full'] && (toServer || !isPostgresUrl((values.db as string | undefined) || io.env['PALIMPSEST_DB'] || ''))) {
    io.stderr.write('error: USAGE: --search-full works with --db postgres://… (a SQLite file\'s search index is always compared whole); see palimpsest verify --help\n');
    return EXIT.USAGE;
  }
  let report: Report;
  // The server named by --addr, or by PALIMPSEST_ADDR when no --db is given; else the file.
  if (toServer) {
    let rpc: Rpc;
    let opts: ConnectOptions;
    try {
      opts = connectOptions(new Args(values, []), io.env);
      rpc = await Rpc.connect(opts);
    } catch (e) {
      io.stderr.write(`error: ${e instanceof UnreachableError ? 'UNAVAILABLE' : 'USAGE'}: ${(e as Error).message}\n`);
      return e instanceof UnreachableError ? EXIT.UNREACHABLE : EXIT.USAGE;
    }
    try {
      report = await verifyServer(rpc, opts.addr);
    } catch (e) {
      const d = decodeError(e as Parameters<typeof decodeError>[0]);
      io.stderr.write(`error: ${d.reason || 'FAILED'}: ${d.message}\n`);
      return EXIT.REJECTED;
    } finally {
      rpc.close();
    }
  } else {
    const db = (values.db as string | undefined) || io.env['PALIMPSEST_DB'] || 'palimpsest.db';
    if (isPostgresUrl(db)) {
      if (values['reseal-heads']) {
        io.stderr.write('error: USAGE: --reseal-heads works on a SQLite database file; see palimpsest verify --help\n');
        return EXIT.USAGE;
      }
      try {
        const { verifyPostgres } = await import('../store/postgres/verify-postgres.js');
        report = await verifyPostgres(db, undefined, { searchFull: values['search-full'] === true });
      } catch (e) {
        io.stderr.write(`error: VERIFY_FAILED: cannot read ${redactUrl(db)}: ${(e as Error).message}\n`);
        return EXIT.REJECTED;
      }
    } else if (!existsSync(db)) {
      io.stderr.write(`error: USAGE: no database at ${db}; see palimpsest verify --help\n`);
      return EXIT.USAGE;
    } else {
      try {
        if (values['reseal-heads']) {
          const n = resealHeads(db);
          if (!values.json) io.stdout.write(`re-sealed the heads record of ${db}: ${n} session heads written\n`);
        }
        const r = verifyFile(db);
        report = { source: db, sessions: r.sessions, events: r.events, problems: r.details, ...(r.searchIndexLag ? { searchIndexLag: r.searchIndexLag } : {}) };
      } catch (e) {
        io.stderr.write(`error: VERIFY_FAILED: cannot read ${db}: ${(e as Error).message}\n`);
        return EXIT.REJECTED;
      }
    }
  }
  const ok = report.problems.length === 0;
  if (values.json) io.stdout.write(JSON.stringify({ ...report, ok }) + '\n');
  else {
    io.stdout.write(`verified ${report.source}: ${report.sessions} sessions, ${report.events} events: ${ok ? 'no problems' : `${report.problems.length} problem(s)`}\n`);
    const lag = report.searchIndexLag;
    if (lag !== undefined && (lag.events > 0 || lag.seconds > 0)) {
      io.stdout.write(`  search index: ${lag.events} events not indexed yet (oldest change ${lag.seconds.toFixed(1)} s old): the follower's lag, checked once followed\n`);
    }
    if (report.searchIndexChecked !== undefined) io.stdout.write(`  ${searchCheckedLine(report.searchIndexChecked)}\n`);
    for (const p of report.problems) {
      io.stdout.write(`  ${p.sessionId === undefined ? '' : `session ${JSON.stringify(p.sessionId)}: `}${p.problem}\n`);
    }
  }
  return ok ? EXIT.OK : EXIT.REJECTED;
}

/** The report's line saying whose search index entries a PostgreSQL verify compared. */
export function searchCheckedLine(checked: NonNullable<Report['searchIndexChecked']>): string {
  if (checked.full || checked.sessions === checked.of) return `search index: compared the entries of all ${checked.of} sessions`;
  const newest = Math.min(checked.newest, checked.of);
  return `search index: compared the entries of ${checked.sessions} of ${checked.of} sessions (the newest ${newest} and ${checked.sessions - newest} others at random); --search-full compares every session`;
}

function structural(e: PbSessionEvent): StructuralRow {
  const row: { seq: number; type: string; surfaceOp?: StructuralRow['surfaceOp']; sourceEventSeqs?: readonly number[]; ignorable?: true } = { seq: e.seq, type: e.type };
  if (e.surfaceOp?.$case === 'append') row.surfaceOp = 'append';
  else if (e.surfaceOp?.$case === 'replace') row.surfaceOp = { op: 'replace', start: e.surfaceOp.value.start, end: e.surfaceOp.value.end };
  if (e.sourceEventSeqs !== undefined) row.sourceEventSeqs = e.sourceEventSeqs.seqs;
  if (e.ignorable) row.ignorable = true;
  return row;
}

/**
 * The server's health `palimpsest.heads-record` (src/server/health.ts): a problem while it is
 * NOT_SERVING (the heads record is unsealed). A server that does not know the name (an older one)
 * is not reported.
 */
async function headsRecordProblem(rpc: Rpc): Promise<string | undefined> {
  const health = new HealthClient('unused', credentials.createInsecure(), { channelOverride: rpc.client.getChannel() });
  const check = (service: string) => new Promise<HealthCheckResponse_ServingStatus | undefined>((resolve, reject) => {
    health.check({ service }, new Metadata(), { deadline: Date.now() + 30_000 }, (err, res) => {
      if (err === null) resolve(res.status);
      else if (err.code === status.NOT_FOUND) resolve(undefined); // SERVICE_UNKNOWN: a server without the name
      else reject(err);
    });
  });
  // NOT_SERVING for the whole server (shutting down, waiting for PostgreSQL) says nothing about the heads record.
  if (await check('palimpsest.heads-record') !== HealthCheckResponse_ServingStatus.NOT_SERVING || await check('') !== HealthCheckResponse_ServingStatus.SERVING) return undefined;
  return 'the server reports its session heads record unsealed (health palimpsest.heads-record NOT_SERVING): lost acknowledged commits would go unseen; ' +
    'see the server log (`the session heads record is UNSEALED`), check the database with palimpsest verify --db FILE, then re-seal with palimpsest verify --db FILE --reseal-heads (server stopped)';
}

/** Verifies every session through the server's RPCs. */
async function verifyServer(rpc: Rpc, addr: string): Promise<Report> {
  const problems: { sessionId?: string; seq?: number; problem: string }[] = [];
  const heads = await headsRecordProblem(rpc);
  if (heads !== undefined) problems.push({ problem: heads });
  let sessions = 0;
  let events = 0;
  let pageToken = '';
  do {
    const page = await rpc.unary(rpc.client.listSessions, { pageSize: 100, pageToken, labelSelector: {} });
    for (const s of page.sessions) {
      sessions++;
      try {
        const rows: StructuralRow[] = [];
        let token = '';
        let last = -1;
        let ordered = true;
        do {
          const p = await rpc.unary(rpc.client.listEvents, {
            sessionId: s.id, fromSeq: undefined, direction: Direction.DIRECTION_FORWARD, pageSize: 1000, pageToken: token, types: [], dataFormat: DataFormat.DATA_FORMAT_UNSPECIFIED, blobRefs: false,
          });
          for (const e of p.events) {
            if (e.seq <= last) ordered = false;
            last = e.seq;
            rows.push(structural(e));
          }
          token = p.nextPageToken;
        } while (token !== '');
        events += rows.length;
        if (!ordered) problems.push({ sessionId: s.id, problem: 'seqs do not ascend' });
        if (rows.length !== s.eventCount) problems.push({ sessionId: s.id, problem: `${rows.length} events served, ${s.eventCount} counted` });
        if ((s.headSeq ?? -1) !== last) problems.push({ sessionId: s.id, problem: `last served seq ${last}, head ${s.headSeq ?? -1}` });
        const surface = await rpc.unary(rpc.client.getSurface, { sessionId: s.id });
        const engine = SessionEngine.create();
        try {
          engine.loadStructural(rows);
          const replayed = engine.surface();
          if (replayed.length !== surface.seqs.length || replayed.some((seq, i) => seq !== surface.seqs[i])) {
            problems.push({ sessionId: s.id, problem: `the surface replayed from the log (${replayed.length} seqs) differs from GetSurface (${surface.seqs.length} seqs)` });
          } else if (engine.replaceGeneration !== surface.replaceGeneration) {
            problems.push({ sessionId: s.id, problem: `replace generation ${engine.replaceGeneration} replayed, ${surface.replaceGeneration} served` });
          }
        } catch (e) {
          problems.push({ sessionId: s.id, problem: `the surface does not replay: ${(e as Error).message}` });
        }
      } catch (e) {
        const d = decodeError(e as Parameters<typeof decodeError>[0]);
        if (d.reason === 'SESSION_NOT_FOUND') {
          sessions--; // deleted meanwhile
          continue;
        }
        const seq = d.metadata.seq;
        problems.push({ sessionId: s.id, ...(seq === undefined ? {} : { seq: Number(seq) }), problem: `${d.reason || d.code}: ${d.message}` });
      }
    }
    pageToken = page.nextPageToken;
  } while (pageToken !== '');
  return { source: addr, sessions, events, problems };
}
