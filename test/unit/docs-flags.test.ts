/**
 * docs/operations.md's table of `palimpsest serve` flags lists exactly the options of the serve
 * option spec (SERVE_OPTIONS in src/cli/serve.ts): a flag added to the spec without a row, or a
 * row left behind by a removed flag, fails here, so the table cannot drift from the code again.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SERVE_OPTIONS } from '../../src/cli/serve.js';
import { between } from '../support/markdown.js';

const ROOT = join(import.meta.dirname, '..', '..');
const OPERATIONS = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');

/**
 * Flags on their way out of the spec, documented nowhere: `--grpc-transport` goes with the
 * transports it chose between (the gRPC port is grpc-js only). Ignored only while the spec still
 * has them; once the flag is gone from SERVE_OPTIONS this entry has no effect and can be deleted.
 */
const LEAVING: ReadonlySet<string> = new Set(['grpc-transport']);

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
export function flagDrift(spec: readonly string[], documented: readonly string[], leaving: ReadonlySet<string>): { undocumented: string[]; unknown: string[]; duplicated: string[]; leavingDocumented: string[] } {
  const doc = new Set(documented);
  const inSpec = new Set(spec);
  return {
    undocumented: spec.filter((f) => !doc.has(f) && !leaving.has(f)),
    unknown: documented.filter((f) => !inSpec.has(f)),
    duplicated: documented.filter((f, i) => documented.indexOf(f) !== i),
    leavingDocumented: documented.filter((f) => leaving.has(f)),
  };
}

describe('docs/operations.md serve flags', () => {
  it('the table lists every flag of SERVE_OPTIONS exactly once, and nothing else', () => {
    const drift = flagDrift(SERVE_OPTIONS.map((o) => o.flag), documentedFlags(between(OPERATIONS, 'serve-flags')), LEAVING);
    expect(drift.undocumented, 'in SERVE_OPTIONS (src/cli/serve.ts) but not in the flags table of docs/operations.md').toEqual([]);
    expect(drift.unknown, 'in the flags table of docs/operations.md but not in SERVE_OPTIONS (src/cli/serve.ts)').toEqual([]);
    expect(drift.duplicated, 'documented twice').toEqual([]);
    expect(drift.leavingDocumented, 'flags being removed must not be documented').toEqual([]);
  });

  it('the table has rows to compare (the markers enclose the table)', () => {
    expect(documentedFlags(between(OPERATIONS, 'serve-flags')).length).toBeGreaterThanOrEqual(20);
  });

  it('reports a flag added to the spec without a row, and a row without a flag', () => {
    const table = ['| flag | default | |', '|---|---|---|', '| `--listen HOST:PORT` | x | y |', '| `--cache-sessions N`, `--cache-events N` | x | y |', '| `--gone N` | x | y |'];
    expect(documentedFlags(table)).toEqual(['listen', 'cache-sessions', 'cache-events', 'gone']);
    const drift = flagDrift(['listen', 'cache-sessions', 'cache-events', 'new-flag', 'grpc-transport'], documentedFlags(table), LEAVING);
    expect(drift.undocumented).toEqual(['new-flag']);
    expect(drift.unknown).toEqual(['gone']);
    expect(flagDrift(['listen'], ['listen', 'listen'], LEAVING).duplicated).toEqual(['listen']);
    expect(flagDrift(['grpc-transport'], ['grpc-transport'], LEAVING).leavingDocumented).toEqual(['grpc-transport']);
  });
});
