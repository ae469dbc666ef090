/**
 * bench/RESULTS.md: one table of today's figures, rewritten by `npm run bench` (bench/run.mjs)
 * from the benches' HEADLINE lines.
 *
 * A bench prints `HEADLINE {"id","label","value","target","met",["detail"],["measured"],["ceiling"],["ratio"]}`.
 * `value` is usually `RATIO (MEASURED vs CEILING UNIT)` (`1.15x (139.3k vs 120.9k rows/s)`,
 * `87% (21.7k vs 25.1k calls/s)`); the table splits it into its columns, and a bench may give
 * `measured`, `ceiling` and `ratio` itself instead. Each figure is one row keyed by its id: a run
 * replaces the rows of the figures it measured (with the run's date and commit) and keeps the
 * others as they were, so `--only server` refreshes the server's rows alone. A row whose figure
 * is not measured on the code as it stands says so in its status and quotes no number.
 */
import { readFileSync, writeFileSync } from 'node:fs';

export const BEGIN = '<!-- results:begin -->';
export const END = '<!-- results:end -->';
export const COLUMNS = ['id', 'figure', 'target', 'measured', 'ratio', 'ceiling', 'status', 'date', 'commit'];

const INTRO = `# Benchmark results

Today's figures, one row per headline figure of the benches. \`npm run bench\` (\`bench/run.mjs\`)
rewrites the rows of the figures it measured, from the benches' \`HEADLINE\` lines
(\`bench/results.mjs\`); a quick run (\`npm run bench:quick\`) writes nothing here. Each ratio is
against a ceiling measured in the same run (a bare grpc-js server, raw better-sqlite3 or
node-postgres doing the same work, the Durable Streams server), as a median of the bench's runs.
How to run the benches: [README.md](README.md). The earlier rounds, with their profiles and
what was tried: [history/](history/).

A row marked *not yet re-measured on grpc-js* was last measured before the gRPC port moved to
grpc-js (most on the HTTP/2 transport the port no longer has): its old figures are in the history
its status names, and none of them is quoted here as today's.
\`status\` is *met* or **missed** against the target, *recorded* for a figure kept next to a
target that applies to another row (no target of its own).
`;

/** A HEADLINE line's object, or undefined for any other line. */
export function parseHeadline(line) {
  if (!line.startsWith('HEADLINE ')) return undefined;
  try {
    const h = JSON.parse(line.slice('HEADLINE '.length));
    return h !== null && typeof h === 'object' && typeof h.id === 'string' ? h : undefined;
  } catch {
    return undefined;
  }
}

const RATIO = /^(\d+(?:\.\d+)?x|\d+(?:\.\d+)?%)(?:\s|$)/;

/** `RATIO (A vs B UNIT)` split into ratio, measured and ceiling; the unit of B goes with A when A has none. */
export function splitValue(value) {
  const text = String(value ?? '').trim();
  const m = /^(\d+(?:\.\d+)?x|\d+(?:\.\d+)?%)\s*\((.+?)\s+vs\s+(.+?)\)$/.exec(text);
  if (m) {
    const [, ratio, a, b] = m;
    const unit = /^[\d.,]+[kKM]?\s+(.+)$/.exec(b)?.[1];
    const measured = unit !== undefined && /^[\d.,]+[kKM]?$/.test(a) ? `${a} ${unit}` : a;
    return { measured, ratio, ceiling: b };
  }
  // One ratio, or several (`50% / 51%`): all of it is the ratio.
  if (text !== '' && text.split(' / ').every((part) => RATIO.test(part) && RATIO.exec(part)[1] === part)) return { measured: '', ratio: text, ceiling: '' };
  return { measured: text, ratio: '', ceiling: '' };
}

/** One table row of a HEADLINE object, measured at `date` on `commit`. */
export function rowOf(h, { date, commit }) {
  const split = splitValue(h.value);
  const measured = [h.measured ?? split.measured, h.detail].filter((s) => s !== undefined && s !== '').join('; ');
  return {
    id: h.id,
    figure: h.label ?? h.id,
    target: h.target ?? '',
    measured,
    ratio: h.ratio ?? split.ratio,
    ceiling: h.ceiling ?? split.ceiling,
    status: h.met === true ? 'met' : h.met === false ? '**missed**' : h.target ? '?' : 'recorded',
    date,
    commit,
  };
}

const escapeCell = (s) => String(s ?? '').replace(/\r?\n/g, ' ').replace(/\|/g, '\\|').trim() || '—';
const unescapeCell = (s) => {
  const t = s.trim().replace(/\\\|/g, '|');
  return t === '—' ? '' : t;
};

/** The whole RESULTS.md for these rows. */
export function renderResults(rows) {
  const lines = [INTRO, BEGIN, `| ${COLUMNS.join(' | ')} |`, `|${COLUMNS.map(() => '---').join('|')}|`];
  for (const r of rows) lines.push(`| ${COLUMNS.map((c) => escapeCell(r[c])).join(' | ')} |`);
  lines.push(END, '');
  return lines.join('\n');
}

/** The rows of a RESULTS.md (between the markers); [] when there are none. */
export function parseResults(md) {
  const begin = md.indexOf(BEGIN);
  const end = md.indexOf(END);
  if (begin < 0 || end < begin) return [];
  const rows = [];
  for (const line of md.slice(begin + BEGIN.length, end).split('\n')) {
    if (!line.startsWith('|')) continue;
    const cells = line.slice(1, line.trimEnd().endsWith('|') ? line.trimEnd().length - 1 : undefined).split(/(?<!\\)\|/).map(unescapeCell);
    if (cells[0] === 'id' || /^-+$/.test(cells[0] ?? '')) continue;
    rows.push(Object.fromEntries(COLUMNS.map((c, i) => [c, cells[i] ?? ''])));
  }
  return rows;
}

/** The previous rows with the fresh ones in place of the same ids; new ids at the end. */
export function mergeResults(previous, fresh) {
  const byId = new Map(fresh.map((r) => [r.id, r]));
  const out = previous.map((r) => byId.get(r.id) ?? r);
  const seen = new Set(previous.map((r) => r.id));
  for (const r of fresh) if (!seen.has(r.id)) out.push(r);
  return out;
}

/** Rewrites the file at `path` with these HEADLINE objects measured at `date` on `commit`; returns the number of rows written. */
export function updateResults(path, headlines, meta) {
  let previous = [];
  try {
    previous = parseResults(readFileSync(path, 'utf8'));
  } catch {
    // no file yet
  }
  const fresh = headlines.map((h) => rowOf(h, meta));
  writeFileSync(path, renderResults(mergeResults(previous, fresh)));
  return fresh.length;
}
