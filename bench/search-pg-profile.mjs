/**
 * Where the PostgreSQL search index's time goes (issue #40): per event, the appends alone against
 * the follower's indexing of the same events, on a throwaway cluster with pg_stat_statements.
 *
 *   node --import tsx bench/search-pg-profile.mjs [--sessions 100] [--events 20000]
 *
 * 1. Appends (50 events per call, 20 calls at a time, no follower): wall time, CPU of the
 *    cluster's processes (/proc) and of node, statements.
 * 2. The follower's catch-up over the same events (SearchFollower.catchUp): the same figures,
 *    the statements ranked by time, round trips (statements) per indexed event.
 * 3. The parts of indexing, each over every indexed event in one statement, wall and cluster CPU:
 *    JSON parse, text extraction in SQL, normalisation, tsvector, and the insert of the rows
 *    (tsvector given) into a copy of search_docs without indexes, with its GIN index only, with
 *    all of them.
 * The figures are per event, so a busy machine shifts both sides alike.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { SearchFollower } from '../src/app/search-follower.ts';
import { PostgresSessionStore } from '../src/store/postgres/postgres-store.ts';
import { PostgresSearchIndex } from '../src/store/postgres/search.ts';
import { findPgBin, startCluster } from '../test/support/pg-cluster.ts';
import { searchEvents } from './search-data.mjs';

const { values } = parseArgs({ options: { sessions: { type: 'string' }, events: { type: 'string' } } });
const SESSIONS = Number(values.sessions ?? 100);
const EVENTS = Number(values.events ?? 20_000);
const BATCH = 50;

const eventAt = searchEvents();

/** CPU seconds (user + system) of the cluster's processes: the postmaster and its children. */
function clusterCpu(dataDir) {
  const tick = 100;
  const master = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  let t = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pid) === master || Number(f[1]) === master) t += (Number(f[11]) + Number(f[12])) / tick;
  }
  return t;
}

async function measure(label, dataDir, events, fn) {
  const c0 = clusterCpu(dataDir);
  const n0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const wall = performance.now() - t0;
  const n = process.cpuUsage(n0);
  const pgCpu = clusterCpu(dataDir) - c0;
  const us = (x) => `${((x * 1e6) / events).toFixed(0)} µs`;
  console.log(`${label}: ${events} events, wall ${us(wall / 1000)}/event, postgres CPU ${us(pgCpu)}/event, node CPU ${us((n.user + n.system) / 1e6)}/event`);
  return { wall, pgCpu };
}

async function topStatements(c, events, label) {
  const r = await c.query(`SELECT calls, total_exec_time, rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS q
    FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 8`);
  const top = await c.query(`SELECT sum(calls)::int AS calls FROM pg_stat_statements WHERE toplevel AND query NOT LIKE '%pg_stat_statements%'`);
  console.log(`${label}: ${(top.rows[0].calls / events).toFixed(3)} top-level statements per event; by time (µs/event, calls):`);
  for (const x of r.rows) console.log(`  ${((x.total_exec_time * 1000) / events).toFixed(1).padStart(8)}  ${String(x.calls).padStart(6)}  ${x.q}`);
  await c.query('SELECT pg_stat_statements_reset()');
}

/** [wall, cluster CPU] of `sql`, µs per event. */
async function timed(c, dataDir, sql, n) {
  const c0 = clusterCpu(dataDir);
  const t0 = performance.now();
  await c.query(sql);
  return [((performance.now() - t0) * 1000) / n, ((clusterCpu(dataDir) - c0) * 1e6) / n];
}

const cluster = await startCluster(findPgBin(), ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all']);
try {
  const admin = new pg.Client({ connectionString: cluster.adminUrl });
  await admin.connect();
  await admin.query('CREATE EXTENSION pg_stat_statements');
  const store = await PostgresSessionStore.open({ url: cluster.adminUrl, schema: 'prof', poolSize: 4 });
  const index = new PostgresSearchIndex({ url: cluster.adminUrl, schema: 'prof' });
  const writers = new Map();
  for (let s = 0; s < SESSIONS; s++) {
    await store.createSession({ header: { version: 0, id: `s${s}`, createdAt: 1_700_000_000_000 + s }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, []);
    writers.set(`s${s}`, 'w0');
  }
  const calls = [];
  const perSession = Math.ceil(EVENTS / SESSIONS);
  let time = 1_700_000_000_000;
  for (let from = 0; from < perSession; from += BATCH) {
    for (let s = 0; s < SESSIONS; s++) {
      const events = [];
      for (let i = 0; i < Math.min(BATCH, perSession - from); i++) events.push(eventAt(from + i, time++));
      calls.push({ session: `s${s}`, from, events });
    }
  }
  const total = calls.reduce((n, b) => n + b.events.length, 0);
  await admin.query('SELECT pg_stat_statements_reset()');
  await measure('appends', cluster.dataDir, total, async () => {
    for (let i = 0; i < calls.length; i += 20) {
      await Promise.all(calls.slice(i, i + 20).map(async (b) => {
        const writer = `w${b.from + b.events.length}`;
        const r = await store.append(b.session, { expectedNextSeq: b.from, expectedWriter: writers.get(b.session), writer, events: b.events, surfaceLength: b.from + b.events.length });
        if (r.kind !== 'appended') throw new Error(r.kind);
        writers.set(b.session, writer);
      }));
    }
  });
  await topStatements(admin, total, 'appends');
  await measure('indexing (follower catch-up)', cluster.dataDir, total, async () => {
    if (!(await new SearchFollower(index).catchUp(3_600_000))) throw new Error('no catch-up');
  });
  await topStatements(admin, total, 'indexing');

  const n = (await admin.query('SELECT count(*)::int AS n FROM prof.search_docs')).rows[0].n;
  const parts = [
    ['events scan', 'SELECT count(length(data)) FROM prof.events'],
    ['search_data (regex + jsonb parse)', 'SELECT count(prof.search_data(data)) FROM prof.events'],
    ['search_text (from jsonb; the follower before schema 10 ran this)', 'SELECT count(prof.search_text(prof.search_data(data))) FROM prof.events'],
    ['search_normalize (SQL regexp)', 'SELECT count(prof.search_normalize(text)) FROM prof.search_docs'],
    ["to_tsvector('simple', search_normalize(text)) (the generated column up to schema 9)", "SELECT count(to_tsvector('simple', prof.search_normalize(text))) FROM prof.search_docs"],
    ["to_tsvector('simple', text) (text normalised in node, schema 10)", "SELECT count(to_tsvector('simple', text)) FROM prof.search_docs"],
    ['tsvector input of its literal', "CREATE TEMP TABLE lit AS SELECT tsv::text AS t FROM prof.search_docs; SELECT count(t::tsvector) FROM lit"],
    ['row insert (tsv given), no index', 'CREATE TEMP TABLE c1 AS SELECT * FROM prof.search_docs WITH NO DATA; INSERT INTO c1 (session_id, seq, type, time, entered, replace, tools, text, tsv) SELECT session_id, seq, type, time, entered, replace, tools, text, tsv FROM prof.search_docs'],
    ['row insert (tsv given), GIN only (fastupdate on, the default)', 'CREATE TEMP TABLE c4 AS SELECT * FROM prof.search_docs WITH NO DATA; CREATE INDEX ON c4 USING gin (tsv); INSERT INTO c4 (session_id, seq, type, time, entered, replace, tools, text, tsv) SELECT session_id, seq, type, time, entered, replace, tools, text, tsv FROM prof.search_docs'],
    ['row insert (tsv given), GIN only (fastupdate off)', 'CREATE TEMP TABLE c5 AS SELECT * FROM prof.search_docs WITH NO DATA; CREATE INDEX ON c5 USING gin (tsv) WITH (fastupdate = off); INSERT INTO c5 (session_id, seq, type, time, entered, replace, tools, text, tsv) SELECT session_id, seq, type, time, entered, replace, tools, text, tsv FROM prof.search_docs'],
    ['row insert (tsv given), every index of search_docs', 'CREATE TEMP TABLE c2 (LIKE prof.search_docs INCLUDING ALL); INSERT INTO c2 (session_id, seq, type, time, entered, replace, tools, text, tsv) SELECT session_id, seq, type, time, entered, replace, tools, text, tsv FROM prof.search_docs'],
  ];
  console.log(`parts over ${n} indexed events (µs/event: wall, postgres CPU):`);
  for (const [name, sql] of parts) {
    const [wall, cpu] = await timed(admin, cluster.dataDir, sql, n);
    console.log(`  ${wall.toFixed(1).padStart(8)} ${cpu.toFixed(1).padStart(8)}  ${name}`);
  }
  await admin.end();
  await index.close();
  await store.close();
} finally {
  cluster.stop();
}
