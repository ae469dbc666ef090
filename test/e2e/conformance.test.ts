/**
 * Reference conformance through both front doors (issue #16): the CLI and the gRPC API give the
 * same answers, and the CLI's import options reach the server.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { cliFor, cliWithInput, jsonLines, type CliResult } from '../support/cli.js';
import { FIXTURES, api, fixture, type Api } from '../support/e2e.js';

let t: TestServer;
let a: Api;
let cli: (...args: string[]) => Promise<CliResult>;
let cliIn: (input: string, ...args: string[]) => Promise<CliResult>;

beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
  a = api(t.client);
  cli = cliFor(t.server.address);
  cliIn = cliWithInput(t.server.address);
});
afterAll(async () => { await t.stop(); });

/** The JSON error a failed --json run printed on stderr. */
function jsonError(r: CliResult): { code: string; reason: string; message: string; metadata: Record<string, string> } {
  const [err, ...rest] = jsonLines(r.stderr);
  expect(rest).toEqual([]);
  return err as { code: string; reason: string; message: string; metadata: Record<string, string> };
}

describe('palimpsest import --allow-seq-gaps (item 10)', () => {
  it('refuses cordis-tool-round without the flag (SEQ_NOT_CONTIGUOUS with line and missing seq, nothing stored) and imports it with the flag', async () => {
    const file = join(FIXTURES, 'cordis-tool-round.jsonl');
    const refused = await cli('import', file, '--id', 'gaps', '--json');
    expect(refused.code).toBe(1);
    expect(jsonError(refused)).toMatchObject({ code: 'FAILED_PRECONDITION', reason: 'SEQ_NOT_CONTIGUOUS', metadata: { line: expect.any(String), missingSeq: expect.any(String) } });
    expect(jsonError(await cli('get', 'gaps', '--json'))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
    const ok = await cli('import', file, '--id', 'gaps', '--allow-seq-gaps', '--json');
    expect(ok.stderr).toBe('');
    expect(JSON.parse(ok.stdout)).toEqual({ id: 'gaps' });
    expect((await a.getSession({ sessionId: 'gaps' })).session?.eventCount).toBe(60);
  });
});

describe('torn tails (item 12)', () => {
  // A crashed reference writer: the file stops inside its last record.
  const text = fixture('minimal-preset.jsonl').toString('utf8');
  const lastStart = text.lastIndexOf('\n', text.length - 2) + 1;
  const committedLines = text.slice(0, lastStart).split('\n').length - 2; // event lines before the torn one
  const torn = text.slice(0, lastStart + 25);

  it('ImportSession leaves the uncommitted tail out and reports its size; the export is the committed prefix', async () => {
    const res = await a.importSession({ sessionId: 'torn-rpc' }, Buffer.from(torn));
    expect(res.uncommittedTailBytes).toBe(25);
    expect(res.session?.eventCount).toBe(committedLines);
    const exported = await a.exportSession('torn-rpc');
    expect(exported.split('\n').slice(1)).toEqual(text.slice(0, lastStart).split('\n').slice(1));
  });

  it('palimpsest import says so (stderr note; uncommittedTailBytes with --json); a clean file says nothing', async () => {
    const human = await cliIn(torn, 'import', '-', '--id', 'torn-cli');
    expect(human.code).toBe(0);
    expect(human.stdout).toBe('torn-cli\n');
    expect(human.stderr).toContain('uncommitted tail of 25 bytes');
    const json = await cliIn(torn, 'import', '-', '--id', 'torn-cli-2', '--json');
    expect(JSON.parse(json.stdout)).toEqual({ id: 'torn-cli-2', uncommittedTailBytes: 25 });
    const clean = await cliIn(readFileSync(join(FIXTURES, 'minimal-preset.jsonl'), 'utf8'), 'import', '-', '--id', 'clean', '--json');
    expect([clean.stderr, JSON.parse(clean.stdout)]).toEqual(['', { id: 'clean' }]);
  });
});
