/**
 * docs/operations.md's table of `palimpsest serve` flags lists exactly the options of the serve
 * option spec (SERVE_OPTIONS in src/cli/serve.ts): a flag added to the spec without a row, or a
 * row left behind by a removed flag, fails here, so the table cannot drift from the code again.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseServeArgs, SERVE_OPTIONS } from '../../src/cli/serve.js';
import { between } from '../support/markdown.js';

const ROOT = join(import.meta.dirname, '..', '..');
const OPERATIONS = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');

/** The flags a table documents: every `--name` in the first cell of each row, in order. */
export function documentedFlags(tableLines: readonly string[]): string[] {
  const flags: string[] = [];
  for (const line of tableLines) {
    if (!line.startsWith('|')) continue;
    const first = line.split(/(?<!\\)\|/)[1] ?? '';
    if (/^\s*-+\s*$/.test(first) || first.trim() === 'flag') continue;
    for (const m of first.matchAll(/--([a-z0-9][a-z0-9-]*)/g)) flags.push(m[1]!);
  }
  return flags;
}

/** What differs between the spec's flags and the table's. */
export function flagDrift(spec: readonly string[], documented: readonly string[]): { undocumented: string[]; unknown: string[]; duplicated: string[] } {
  const doc = new Set(documented);
  const inSpec = new Set(spec);
  return {
    undocumented: spec.filter((f) => !doc.has(f)),
    unknown: documented.filter((f) => !inSpec.has(f)),
    duplicated: documented.filter((f, i) => documented.indexOf(f) !== i),
  };
}

/** A documented default as a flag value: `16 MiB` -> 16777216, `10,000` -> 10000, `` `full` `` -> full; undefined for words (off, none, unlimited). */
export function defaultValue(cell: string): string | undefined {
  const c = cell.trim().replace(/\s*\(.*\)$/, '').trim(); // a note in parentheses is not the value
  if (/^`[^`]+`$/.test(c)) return c.slice(1, -1);
  const unit = /^([\d,]+)\s*(KiB|MiB|GiB)$/.exec(c);
  if (unit) return String(Number(unit[1]!.replace(/,/g, '')) * { KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }[unit[2] as 'KiB' | 'MiB' | 'GiB']);
  if (/^[\d,]+$/.test(c)) return c.replace(/,/g, '');
  return undefined;
}

/** Each documented default that names a value: [flag, value], the row's values split on ` / ` or `, ` when it documents several flags. */
export function documentedDefaults(tableLines: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (const line of tableLines) {
    const cells = line.split(/(?<!\\)\|/).slice(1, -1);
    if (cells.length < 2) continue;
    const flags = [...(cells[0] ?? '').matchAll(/--([a-z0-9][a-z0-9-]*)/g)].map((m) => m[1]!);
    if (flags.length === 0) continue;
    const parts = flags.length === 1 ? [cells[1]!] : cells[1]!.split(/ \/ |, (?=\S)/);
    if (parts.length !== flags.length) continue;
    flags.forEach((f, i) => {
      const v = defaultValue(parts[i]!);
      if (v !== undefined) out.push([f, v]);
    });
  }
  return out;
}

describe('docs/operations.md serve flags', () => {
  it('every default the table names is the default the server applies', () => {
    const defaults = documentedDefaults(between(OPERATIONS, 'serve-flags'));
    expect(defaults.length).toBeGreaterThanOrEqual(12);
    const actual = parseServeArgs([], {});
    for (const [flag, value] of defaults) {
      expect(parseServeArgs([`--${flag}`, value], {}), `--${flag}: the table says the default is ${value}`).toEqual(actual);
    }
  });

  it('reads defaults with units, thousands separators and several flags per row', () => {
    expect(documentedDefaults(['| `--max-message-bytes N` | 16 MiB | x |', '| `--cache-sessions N`, `--cache-events N` | 10,000 / 20,000,000 | x |', '| `--retention-interval-ms N`, `--retention-batch N` | 3600000, 100 | x |', '| `--listen HOST:PORT` | `127.0.0.1:50051` | x |', '| `--metrics-listen HOST:PORT` | off | x |', '| `--retention-days N` | 0 (keep) | x |']))
      .toEqual([['max-message-bytes', '16777216'], ['cache-sessions', '10000'], ['cache-events', '20000000'], ['retention-interval-ms', '3600000'], ['retention-batch', '100'], ['listen', '127.0.0.1:50051'], ['retention-days', '0']]);
    // A wrong default is caught: the server's limit differs from what the table would say.
    expect(parseServeArgs(['--max-batch-events', '999'], {})).not.toEqual(parseServeArgs([], {}));
  });

  it('the table lists every flag of SERVE_OPTIONS exactly once, and nothing else', () => {
    const drift = flagDrift(SERVE_OPTIONS.map((o) => o.flag), documentedFlags(between(OPERATIONS, 'serve-flags')));
    expect(drift.undocumented, 'in SERVE_OPTIONS (src/cli/serve.ts) but not in the flags table of docs/operations.md').toEqual([]);
    expect(drift.unknown, 'in the flags table of docs/operations.md but not in SERVE_OPTIONS (src/cli/serve.ts)').toEqual([]);
    expect(drift.duplicated, 'documented twice').toEqual([]);
  });

  it('the table has rows to compare (the markers enclose the table)', () => {
    expect(documentedFlags(between(OPERATIONS, 'serve-flags')).length).toBeGreaterThanOrEqual(20);
  });

  it('reports a flag added to the spec without a row, and a row without a flag', () => {
    const table = ['| flag | default | |', '|---|---|---|', '| `--listen HOST:PORT` | x | y |', '| `--cache-sessions N`, `--cache-events N` | x | y |', '| `--gone N` | x | y |'];
    expect(documentedFlags(table)).toEqual(['listen', 'cache-sessions', 'cache-events', 'gone']);
    const drift = flagDrift(['listen', 'cache-sessions', 'cache-events', 'new-flag'], documentedFlags(table));
    expect(drift.undocumented).toEqual(['new-flag']);
    expect(drift.unknown).toEqual(['gone']);
    expect(flagDrift(['listen'], ['listen', 'listen']).duplicated).toEqual(['listen']);
  });
});
