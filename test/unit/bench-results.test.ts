/**
 * bench/results.mjs, the generator of bench/RESULTS.md: HEADLINE lines as the benches print them
 * become rows (ratio, measured and ceiling split out of `value`), a run replaces only the rows it
 * measured, the table survives its own round trip, and the committed RESULTS.md is in the
 * generator's format and quotes no figure it did not measure.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mergeResults, parseHeadline, parseResults, renderResults, rowOf, splitValue, updateResults } from '../../bench/results.mjs';

const ROOT = join(import.meta.dirname, '..', '..');
const META = { date: '2026-12-04', commit: 'abc1234' };

/** HEADLINE lines exactly as bench/server.bench.ts, peer.bench.ts, subscribers.bench.ts and provider.bench.ts print them. */
const SAMPLE = [
  'HEADLINE {"section":"Server (gRPC)","id":"batch100","label":"Batches of 100 events, 16 in flight, durability full, vs raw better-sqlite3 100 rows/txn (same run)","value":"1.15x (139.3k vs 120.9k rows/s)","target":">= 0.85x","met":true}',
  'HEADLINE {"section":"Server (gRPC)","id":"append","label":"Appends, 1 session, 64 in flight, durability full, vs bare gRPC echo (grpc-js transport)","value":"50% (12.6k vs 25.1k calls/s)","target":">= 60%","met":false,"detail":"bound: 7.7 appends per fsync x 1.6k commits/s"}',
  'HEADLINE {"section":"Server (gRPC)","id":"reads","label":"Reads of a 10,000-event session vs raw SQLite","value":"50% / 51%","target":">= 50%","met":true}',
  'HEADLINE {"section":"Peer (Durable Streams)","id":"peer-1 event/request, 16 in flight, in memory","label":"vs Durable Streams 0.3.7: 1 event/request, 16 in flight, in memory (grpc-js transport)","value":"1.56x","target":">= 1x","met":true}',
  'HEADLINE {"section":"Subscribers","id":"sub-mem","label":"Server memory per idle SubscribeSurface stream","value":"8.4 KiB (heap 2.6 KiB)","target":"<= 10 KB","met":true}',
  'HEADLINE {"id":"plan-compaction","label":"PlanCompaction | warm","value":"9.6 ms (CPU 9.1 ms)","target":"< 20 ms"}',
  '| a table row, not a headline |',
  'HEADLINE not json',
];

describe('bench/results.mjs', () => {
  it('reads HEADLINE lines and nothing else', () => {
    const hs = SAMPLE.map(parseHeadline);
    expect(hs.filter((h) => h !== undefined).map((h) => h!.id)).toEqual(['batch100', 'append', 'reads', 'peer-1 event/request, 16 in flight, in memory', 'sub-mem', 'plan-compaction']);
    expect(parseHeadline('HEADLINE {"label":"no id"}')).toBeUndefined();
  });

  it('splits RATIO (MEASURED vs CEILING UNIT) into its columns', () => {
    expect(splitValue('1.15x (139.3k vs 120.9k rows/s)')).toEqual({ ratio: '1.15x', measured: '139.3k rows/s', ceiling: '120.9k rows/s' });
    expect(splitValue('87% (21.7k vs 25.1k calls/s)')).toEqual({ ratio: '87%', measured: '21.7k calls/s', ceiling: '25.1k calls/s' });
    expect(splitValue('0.61x (1.63 vs 2.66 ms)')).toEqual({ ratio: '0.61x', measured: '1.63 ms', ceiling: '2.66 ms' });
    expect(splitValue('50% / 51%')).toEqual({ ratio: '50% / 51%', measured: '', ceiling: '' });
    expect(splitValue('705 ms (open 539 ms), 185 MiB')).toEqual({ ratio: '', measured: '705 ms (open 539 ms), 185 MiB', ceiling: '' });
  });

  it('turns headlines into rows with the run\'s date and commit and their status', () => {
    const rows = SAMPLE.map(parseHeadline).filter((h) => h !== undefined).map((h) => rowOf(h!, META));
    expect(rows[0]).toEqual({ id: 'batch100', figure: 'Batches of 100 events, 16 in flight, durability full, vs raw better-sqlite3 100 rows/txn (same run)', target: '>= 0.85x', measured: '139.3k rows/s', ratio: '1.15x', ceiling: '120.9k rows/s', status: 'met', date: '2026-12-04', commit: 'abc1234' });
    expect(rows[1]!.status).toBe('**missed**');
    expect(rows[1]!.measured).toBe('12.6k calls/s; bound: 7.7 appends per fsync x 1.6k commits/s');
    expect(rows[5]!.status).toBe('?');
    // No target of its own (the default-window reads, next to the bulk window's target): recorded.
    expect(rowOf({ id: 'reads', label: 'x', value: '34% / 37%' }, META).status).toBe('recorded');
  });

  it('renders a table that parses back to the same rows (pipes in cells escaped)', () => {
    const rows = SAMPLE.map(parseHeadline).filter((h) => h !== undefined).map((h) => rowOf(h!, META));
    const md = renderResults(rows);
    expect(md).toContain('PlanCompaction \\| warm');
    expect(parseResults(md)).toEqual(rows);
    expect(renderResults(parseResults(md))).toBe(md);
  });

  it('a run replaces the rows it measured and keeps the others', () => {
    const old = [rowOf({ id: 'a', value: '1.0x', target: '>= 1x', met: true }, { date: '2026-12-01', commit: 'old' }), rowOf({ id: 'b', value: '2.0x', target: '>= 1x', met: true }, { date: '2026-12-01', commit: 'old' })];
    const fresh = [rowOf({ id: 'b', value: '0.5x', target: '>= 1x', met: false }, META), rowOf({ id: 'c', value: '3x', target: '', met: true }, META)];
    const merged = mergeResults(old, fresh);
    expect(merged.map((r) => [r.id, r.ratio, r.commit])).toEqual([['a', '1.0x', 'old'], ['b', '0.5x', 'abc1234'], ['c', '3x', 'abc1234']]);
  });

  it('updateResults rewrites a file in place, creating it when missing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'palimpsest-results-'));
    try {
      const file = join(dir, 'RESULTS.md');
      const hs = SAMPLE.map(parseHeadline).filter((h) => h !== undefined).map((h) => h!);
      expect(updateResults(file, hs.slice(0, 2), META)).toBe(2);
      expect(updateResults(file, [{ ...hs[0]!, value: '0.70x (84.6k vs 120.9k rows/s)', met: false }], { date: '2026-12-05', commit: 'def5678' })).toBe(1);
      const rows = parseResults(readFileSync(file, 'utf8'));
      expect(rows.map((r) => [r.id, r.ratio, r.status, r.date, r.commit])).toEqual([['batch100', '0.70x', '**missed**', '2026-12-05', 'def5678'], ['append', '50%', '**missed**', '2026-12-04', 'abc1234']]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('bench/RESULTS.md', () => {
  const md = readFileSync(join(ROOT, 'bench', 'RESULTS.md'), 'utf8');
  const rows = parseResults(md);

  it('is exactly what the generator writes for its rows', () => {
    expect(rows.length).toBeGreaterThan(0);
    expect(renderResults(rows)).toBe(md);
  });

  it('every row is measured (with a date and a commit) or says plainly that it is not, quoting no figure', () => {
    for (const r of rows) {
      if (r.status.startsWith('not yet re-measured on grpc-js')) {
        expect([r.measured, r.ratio, r.ceiling, r.date, r.commit], `${r.id} quotes a figure it did not measure`).toEqual(['', '', '', '', '']);
      } else {
        expect(['met', '**missed**', '?', 'recorded'], r.id).toContain(r.status);
        expect(r.date, r.id).toMatch(/^\d{4}-\d{2}-\d{2}$/);
        expect(r.commit, r.id).not.toBe('');
      }
    }
  });
});
