/**
 * `palimpsest verify`'s target is one of --db, --addr or --context: a combination that would
 * silently drop one of them (or a flag that only applies to another target) is a usage error
 * before anything is opened or dialled.
 */
import { describe, expect, it } from 'vitest';
import { verify } from '../../src/cli/verify.js';

const runIn = async (env: Record<string, string>, ...args: string[]): Promise<[number, string, string]> => {
  let out = '';
  let err = '';
  const code = await verify(args, { stdout: { write: (t: string) => (out += t) }, stderr: { write: (t: string) => (err += t) }, env });
  return [code, out, err];
};
const run = (...args: string[]): Promise<[number, string, string]> => runIn({}, ...args);

describe('verify: conflicting targets are usage errors', () => {
  it('--db with --addr or --context', async () => {
    expect(await run('--db', 'x.db', '--addr', '127.0.0.1:1')).toEqual([2, '', 'error: USAGE: give --db FILE or --addr ADDR, not both; see palimpsest verify --help\n']);
    expect(await run('--db', 'postgres://u@h/d', '--context', 'prod')).toEqual([2, '', 'error: USAGE: give --db FILE or --context NAME, not both; see palimpsest verify --help\n']);
  });

  it('--search-full and --reseal-heads with --context (a server, not a database)', async () => {
    expect(await run('--context', 'prod', '--search-full')).toEqual([2, '', "error: USAGE: --search-full works with --db postgres://… (a SQLite file's search index is always compared whole); see palimpsest verify --help\n"]);
    expect(await run('--context', 'prod', '--reseal-heads')).toEqual([2, '', 'error: USAGE: --reseal-heads works on a database file: give --db FILE; see palimpsest verify --help\n']);
  });

  it('--reseal-heads and --search-full when $PALIMPSEST_ADDR (no --db) makes the server the target', async () => {
    const env = { PALIMPSEST_ADDR: '127.0.0.1:1', PALIMPSEST_DB: 'postgres://u@h/d' };
    expect(await runIn(env, '--reseal-heads')).toEqual([2, '', 'error: USAGE: --reseal-heads works on a database file: give --db FILE; see palimpsest verify --help\n']);
    expect((await runIn(env, '--search-full'))[0]).toBe(2);
  });
});
