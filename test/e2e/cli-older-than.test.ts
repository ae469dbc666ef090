/**
 * `palimpsest sessions --older-than AGE` (issue #17, operations): lists, read-only, the sessions
 * whose last activity (last event time, or creation for an empty session) is older than AGE.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { cliFor, type CliResult } from '../support/cli.js';
import { api, type Api } from '../support/e2e.js';
import { input } from '../support/events.js';

let t: TestServer;
let a: Api;
let cli: (...args: string[]) => Promise<CliResult>;
const DAY = 86_400_000;
const file = (id: string, createdAt: number, times: number[]) =>
  Buffer.from([`{"type":"session","version":0,"id":"${id}","createdAt":${createdAt}}`, ...times.map((time, seq) => `{"type":"x/y","seq":${seq},"time":${time},"data":{}}`)].join('\n') + '\n');

beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
  a = api(t.client);
  cli = cliFor(t.server.address);
  const now = Date.now();
  await a.importSession({}, file('old-events', now - 90 * DAY, [now - 80 * DAY, now - 40 * DAY]));
  await a.importSession({}, file('old-empty', now - 35 * DAY, []));
  await a.importSession({}, file('old-but-touched', now - 90 * DAY, [now - 80 * DAY]));
  await a.appendEvents({ sessionId: 'old-but-touched', events: [input('x/y', 1)] });
  await a.importSession({}, file('recent-events', now - 90 * DAY, [now - 2 * DAY]));
  await a.createSession({ sessionId: 'fresh' });
});
afterAll(async () => { await t?.stop(); });

describe('palimpsest sessions --older-than', () => {
  it('lists the sessions untouched for longer than the age, with their last activity', async () => {
    const r = await cli('sessions', '--older-than', '30d', '--json');
    expect(r.code, r.stderr).toBe(0);
    const listed = JSON.parse(r.stdout) as { id: string; lastActivity: number; createdAt: number }[];
    expect(listed.map((s) => s.id).sort()).toEqual(['old-empty', 'old-events']);
    const byId = new Map(listed.map((s) => [s.id, s]));
    expect(byId.get('old-empty')!.lastActivity).toBe(byId.get('old-empty')!.createdAt);
    expect(Date.now() - byId.get('old-events')!.lastActivity).toBeGreaterThan(39 * DAY);
    // A shorter age takes in the one touched two days ago; --limit bounds the output.
    const r2 = await cli('sessions', '--older-than', '24h', '--json');
    expect((JSON.parse(r2.stdout) as { id: string }[]).map((s) => s.id).sort()).toEqual(['old-empty', 'old-events', 'recent-events']);
    const r3 = await cli('sessions', '--older-than', '24h', '--limit', '1', '--json');
    expect(JSON.parse(r3.stdout)).toHaveLength(1);
    // Human output: the usual table.
    const table = await cli('sessions', '--older-than', '30d');
    expect(table.stdout).toMatch(/old-events/);
    expect(table.stdout).not.toMatch(/fresh|recent-events|old-but-touched/);
    // Read-only: every session is still there.
    expect((await a.listSessions({})).sessions).toHaveLength(5);
  });

  it('refuses an age it cannot read (usage error, exit 2)', async () => {
    const r = await cli('sessions', '--older-than', '30 days');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--older-than takes an age like 30d/);
  });
});
