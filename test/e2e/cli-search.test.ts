/**
 * `palimpsest search` and `palimpsest reindex` (issue #40) against a real server and its file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userMessage } from '../support/events.js';
import { cliFor, runCli } from '../support/cli.js';
import { ensureBuilt } from '../support/server-process.js';
import { call, startTestServer, type TestServer } from '../support/test-server.js';

describe('palimpsest search / reindex', () => {
  let t: TestServer;
  beforeAll(async () => {
    ensureBuilt();
    t = await startTestServer();
    const c = t.client;
    await call(c.createSession.bind(c), { sessionId: 'demo', labels: {}, strict: false });
    await call(c.appendEvents.bind(c), { sessionId: 'demo', idempotencyKey: '', events: [userMessage('u1', 'Which session ran rm -rf /tmp?'), userMessage('u2', 'invoice 4711')] });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('prints hits with the match between « », as JSON with --json, at most --limit', async () => {
    const cli = cliFor(t.server.address);
    const table = await cli('search', '"rm -rf"');
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/demo\s+0\s+user\/message\s+\S+\s+Which session ran «rm -rf» \/tmp\?/);
    const json = await cli('search', 'session:demo', '--json', '--limit', '1');
    expect(JSON.parse(json.stdout)).toMatchObject([{ sessionId: 'demo', seq: 1, type: 'user/message', snippet: 'invoice 4711', matches: [] }]);
    const bad = await cli('search', 'rm "rf');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('SEARCH_QUERY_INVALID');
    expect(bad.stderr).toContain('position 3');
  });

  it('reindex rebuilds the index of the file while the server runs, then verifies it', async () => {
    const r = await runCli(['reindex', '--db', t.dbPath, '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ sessions: 1, events: 2, problems: [] });
    expect((await cliFor(t.server.address)('search', 'invoice', '--json')).stdout).toContain('"seq":1');
  });
});
