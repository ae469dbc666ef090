/**
 * Reference conformance through both front doors (issue #16): the CLI and the gRPC API give the
 * same answers, and the CLI's import options reach the server.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { cliFor, jsonLines, type CliResult } from '../support/cli.js';
import { FIXTURES, api, type Api } from '../support/e2e.js';

let t: TestServer;
let a: Api;
let cli: (...args: string[]) => Promise<CliResult>;

beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
  a = api(t.client);
  cli = cliFor(t.server.address);
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
