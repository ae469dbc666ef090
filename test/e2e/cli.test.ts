/**
 * The `palimpsest` client commands against a real server: each command's output (human and
 * --json), exit statuses 1 (rejected) / 2 (usage) / 3 (unreachable) and the JSON error shape.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { cliFor, cliWithInput, closedPort, jsonLines, runCli, type CliResult } from '../support/cli.js';
import { COMMANDS } from '../../src/cli/commands/index.js';

let t: TestServer;
let cli: (...args: string[]) => Promise<CliResult>;
let cliIn: (input: string, ...args: string[]) => Promise<CliResult>;

beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
  cli = cliFor(t.server.address);
  cliIn = cliWithInput(t.server.address);
});
afterAll(async () => { await t.stop(); });

const user = (id: string, text = 'hi') => ({ type: 'user/message', data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } }, surfaceOp: 'append' });
const assistant = (id: string, callIds: string[] = []) => ({
  type: 'assistant/message',
  data: {
    turn: 1, step: 1,
    message: { id, role: 'assistant', content: [{ type: 'text', text: 'ok' }, ...callIds.map((c) => ({ type: 'tool-call', id: c, name: 'read', arguments: '{}' }))], source: { kind: 'model', provider: 'p', model: 'm' } },
  },
  surfaceOp: 'append', sourceEventSeqs: [],
});
const lines = (...events: unknown[]) => events.map((e) => JSON.stringify(e)).join('\n') + '\n';

/** The JSON error a failed --json run printed on stderr. */
function jsonError(r: CliResult): { code: string; reason: string; message: string; metadata: Record<string, string> } {
  const [err, ...rest] = jsonLines(r.stderr);
  expect(rest).toEqual([]);
  return err as { code: string; reason: string; message: string; metadata: Record<string, string> };
}

describe('help', () => {
  it('palimpsest --help lists every command; each command has --help with an example', async () => {
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    for (const c of ['serve', ...COMMANDS.map((x) => x.name)]) expect(top.stdout).toContain(`  ${c} `);
    for (const c of ['serve', ...COMMANDS.map((x) => x.name)]) {
      const r = await runCli([c, '--help']);
      expect(r.code, c).toBe(0);
      expect(r.stdout, c).toMatch(new RegExp(`Usage: palimpsest ${c}`));
      expect(r.stdout, c).toMatch(/Examples?:\n {2}.*palimpsest /);
    }
  });

  it('no command is a usage error', async () => {
    const r = await runCli([]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Usage: palimpsest COMMAND');
  });
});

describe('sessions', () => {
  it('create prints the id; --json prints {"id"}; a generated id is a UUID', async () => {
    expect(await cli('create', '--id', 'c1', '--label', 'team=a', '--label', 'env=test')).toMatchObject({ code: 0, stdout: 'c1\n', stderr: '' });
    const r = await cli('create', '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const { session } = await call(t.client.getSession.bind(t.client), { sessionId: 'c1' });
    expect(session?.labels).toEqual({ team: 'a', env: 'test' });
  });

  it('sessions lists (table and JSON), filters by label and honours --limit', async () => {
    await cli('create', '--id', 'l1', '--label', 'grp=x');
    await cli('create', '--id', 'l2', '--label', 'grp=x');
    await cli('create', '--id', 'l3', '--label', 'grp=y');
    const json = await cli('sessions', '--label', 'grp=x', '--json');
    expect(json.code).toBe(0);
    const listed = JSON.parse(json.stdout) as { id: string; labels: Record<string, string>; eventCount: number }[];
    expect(listed.map((s) => s.id).sort()).toEqual(['l1', 'l2']);
    expect(listed[0]).toMatchObject({ version: 0, labels: { grp: 'x' }, eventCount: 0, surfaceLength: 0, strict: false });
    expect(JSON.parse((await cli('sessions', '--label', 'grp=x', '--limit', '1', '--json')).stdout)).toHaveLength(1);
    const table = await cli('sessions', '--label', 'grp=y');
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+CREATED\s+EVENTS\s+SURFACE\s+HEAD\s+LABELS$/);
    expect(table.stdout).toContain('l3');
    expect(table.stdout).not.toContain('\x1b[');
  });

  it('get shows one session; delete removes it', async () => {
    await cli('create', '--id', 'g1');
    expect(JSON.parse((await cli('get', 'g1', '--json')).stdout)).toMatchObject({ id: 'g1', eventCount: 0 });
    expect((await cli('get', 'g1')).stdout).toMatch(/^id\s+g1$/m);
    expect(await cli('delete', 'g1')).toMatchObject({ code: 0, stdout: 'deleted g1\n' });
    const gone = await cli('get', 'g1', '--json');
    expect(gone.code).toBe(1);
    expect(jsonError(gone)).toMatchObject({ code: 'NOT_FOUND', reason: 'SESSION_NOT_FOUND' });
  });
});

describe('token counts and the reference compaction (issues #32, #34)', () => {
  it('get shows surfaceTokens (the estimator over the surface) and usage (summed from assistant messages)', async () => {
    await cli('create', '--id', 'tok1');
    const withUsage = { ...assistant('a1'), data: { ...assistant('a1').data, usage: { inputTokens: 120, outputTokens: 8, cacheReadTokens: 30, cacheWriteTokens: 2 } } };
    expect((await cliIn(lines(user('u1', 'abcd'), withUsage), 'append', 'tok1', '-')).code).toBe(0);
    const got = JSON.parse((await cli('get', 'tok1', '--json')).stdout) as Record<string, unknown>;
    // user: ceil(4/4)+4 + 4 = 9; assistant: text 'ok' ceil(2/4)+4 + 4 = 9.
    expect(got).toMatchObject({ surfaceTokens: 18, usage: { inputTokens: 120, outputTokens: 8, cacheReadTokens: 30, cacheWriteTokens: 2 } });
    const text = (await cli('get', 'tok1')).stdout;
    expect(text).toMatch(/^surfaceTokens\s+18$/m);
    expect(text).toMatch(/^usage\s+input 120, output 8, cache read 30, cache write 2$/m);
  });

  it('plan-compaction --retain-tokens keeps at least N; one budget only; compact reports a refused summary (exit 1)', async () => {
    await cli('create', '--id', 'tok2');
    expect((await cliIn(lines(user('u1', 'a'.repeat(40)), user('u2', 'b'.repeat(40)), user('u3', 'c'.repeat(40))), 'append', 'tok2', '-')).code).toBe(0);
    // Each message is 18 tokens: at least 19 keeps two, at most 19 keeps one.
    expect(JSON.parse((await cli('plan-compaction', 'tok2', '--retain-tokens', '19', '--json')).stdout)).toMatchObject({ shadowedSeqs: [0] });
    expect(JSON.parse((await cli('plan-compaction', 'tok2', '--keep-tokens', '19', '--json')).stdout)).toMatchObject({ shadowedSeqs: [0, 1] });
    expect((await cli('plan-compaction', 'tok2', '--keep-tokens', '1', '--retain-tokens', '1')).code).toBe(2);
    const r = await cli('compact', 'tok2', '--summary', 'short', '--retain-tokens', '19', '--source-command-id', 'cmd-9', '--json');
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout) as { seqs: number[]; error: string };
    expect(out.seqs).toEqual([3, 4]);
    expect(out.error).toMatch(/^summary is not smaller than the shadowed content/);
    expect(JSON.parse((await cli('surface', 'tok2')).stdout)).toEqual([0, 1, 2]);
  });
});

describe('append, events, surface, messages', () => {
  it('appends a batch, prints seqs; events/surface/messages read it back', async () => {
    await cli('create', '--id', 'a1');
    const r = await cliIn(lines({ type: 'turn/start', data: { turn: 1 } }, user('u1'), { type: 'step/start', data: { turn: 1, step: 1 } }, assistant('m1')), 'append', 'a1', '-', '--json');
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(r.stdout)).toEqual({ seqs: [0, 1, 2, 3] });
    const human = await cliIn(lines({ type: 'step/end', data: { turn: 1, step: 1 } }), 'append', 'a1', '-');
    expect(human.stdout).toBe('appended seq 4; surface length 2\n');

    expect((await cli('surface', 'a1')).stdout).toBe('[1,3]\n');
    expect((await cli('surface', 'a1', '--json')).stdout).toBe('[1,3]\n');

    const evs = jsonLines((await cli('events', 'a1', '--json')).stdout) as { seq: number; type: string }[];
    expect(evs.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4]);
    expect(evs[1]).toEqual({ type: 'user/message', seq: 1, time: expect.any(Number), data: user('u1').data, surfaceOp: 'append' });
    expect(Object.keys(evs[3]!)).toEqual(['type', 'seq', 'time', 'data', 'sourceEventSeqs', 'surfaceOp']);
    const after = jsonLines((await cli('events', 'a1', '--after', '1', '--limit', '2', '--json')).stdout) as { seq: number }[];
    expect(after.map((e) => e.seq)).toEqual([2, 3]);
    const typed = jsonLines((await cli('events', 'a1', '--type', 'step/start', '--type', 'step/end', '--json')).stdout) as { seq: number }[];
    expect(typed.map((e) => e.seq)).toEqual([2, 4]);
    const table = await cli('events', 'a1');
    expect(table.stdout.split('\n')[0]).toMatch(/SEQ\s+TIME\s+TYPE\s+SURFACE\s+DATA/);
    expect(table.stdout).toMatch(/\n\s+1 {2}\S+ {2}user\/message\s+append\s+\{"id":"u1"/);

    const msgs = await cli('messages', 'a1', '--json');
    expect(JSON.parse(msgs.stdout)).toEqual([user('u1').data, assistant('m1').data.message]);
    const text = (await cli('messages', 'a1')).stdout;
    expect(text).toContain('#1 user u1\n  hi\n');
    expect(JSON.parse((await cli('messages', 'a1', '--transcript', '--json')).stdout)).toHaveLength(2);
  });

  it('appends from a file, with a given contiguous seq, --expect-last-seq and --idempotency-key', async () => {
    await cli('create', '--id', 'a2');
    const { writeFileSync } = await import('node:fs');
    const file = `${t.dir}/batch.jsonl`;
    writeFileSync(file, lines({ ...user('u1'), seq: 0, time: 1234 }) + '\n\n');
    expect(JSON.parse((await cli('append', 'a2', file, '--expect-last-seq', '-1', '--idempotency-key', 'k1', '--json')).stdout)).toEqual({ seqs: [0] });
    // A retry with the same key is replayed, not appended again.
    const again = await cli('append', 'a2', file, '--idempotency-key', 'k1');
    expect(again.stdout).toContain('replayed');
    expect((jsonLines((await cli('events', 'a2', '--json')).stdout)[0] as { time: number }).time).toBe(1234);
    const mismatch = await cliIn(lines(user('u2')), 'append', 'a2', '-', '--expect-last-seq', '5', '--json');
    expect(mismatch.code).toBe(1);
    expect(jsonError(mismatch)).toMatchObject({ code: 'FAILED_PRECONDITION', reason: 'HEAD_MISMATCH' });
  });

  it('a bad batch is rejected whole: exit 1, reason and metadata.index', async () => {
    await cli('create', '--id', 'bad');
    const r = await cliIn(lines(user('u1'), { type: 'turn/start', data: { turn: 1 }, surfaceOp: 'append' }), 'append', 'bad', '-', '--json');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const err = jsonError(r);
    expect(err).toEqual({ code: 'INVALID_ARGUMENT', reason: 'SURFACE_OP_FORBIDDEN', message: expect.any(String), metadata: expect.objectContaining({ index: '1' }) });
    expect((await cli('surface', 'bad')).stdout).toBe('[]\n');

    const human = await cliIn(lines(user('u1'), { ...user('u2'), seq: 7 }), 'append', 'bad', '-');
    expect(human.code).toBe(1);
    expect(human.stderr).toMatch(/^error: SEQ_NOT_CONTIGUOUS: .*seq 7/);

    // Shapes the proto cannot carry are refused client-side with the same rule ID, plus the line.
    const local = await cliIn(`${JSON.stringify(user('u1'))}\n\n${JSON.stringify({ ...user('u2'), surfaceOp: 'bogus' })}\n`, 'append', 'bad', '-', '--json');
    expect(local.code).toBe(1);
    expect(jsonError(local)).toMatchObject({ code: 'INVALID_ARGUMENT', reason: 'SURFACE_OP_INVALID', metadata: { index: '1', line: '3' } });
    const notJson = await cliIn('{"type":\n', 'append', 'bad', '-', '--json');
    expect(jsonError(notJson)).toMatchObject({ reason: 'JSONL_INVALID', metadata: { index: '0', line: '1' } });
    expect((await cli('get', 'bad', '--json')).stdout).toContain('"eventCount":0');
  });
});

describe('repair and fork', () => {
  it('repair prints the closers (reference envelope with --json); fork prints the child id', async () => {
    await cli('create', '--id', 'r1');
    await cliIn(lines(
      { type: 'turn/start', data: { turn: 1 } }, user('u'), { type: 'step/start', data: { turn: 1, step: 1 } }, assistant('a', ['c1']),
      { type: 'tool/call', data: { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' } },
    ), 'append', 'r1', '-');
    const fork1 = await cli('fork', 'r1', '--at', '2');
    expect(fork1.code).toBe(1);
    expect(fork1.stderr).toMatch(/^error: OPEN_TURN: /);

    const r = await cli('repair', 'r1', '--json');
    expect(r.code).toBe(0);
    const closers = JSON.parse(r.stdout) as { type: string; seq: number; sourceEventSeqs?: number[]; data: unknown }[];
    expect(closers.map((e) => [e.seq, e.type])).toEqual([[5, 'tool/result'], [6, 'step/end'], [7, 'turn/end']]);
    expect(closers[0]?.sourceEventSeqs).toEqual([4]);
    expect(closers[2]?.data).toEqual({ turn: 1, reason: { kind: 'interrupted' } });
    expect((await cli('repair', 'r1')).stdout).toMatch(/^nothing to repair/);

    expect(JSON.parse((await cli('fork', 'r1', '--id', 'r1-child', '--json')).stdout)).toEqual({ id: 'r1-child' });
    expect((await cli('fork', 'r1')).stdout).toMatch(/^[0-9a-f-]{36}\n$/);
    const child = JSON.parse((await cli('get', 'r1-child', '--json')).stdout) as { parentSession: string; eventCount: number };
    expect(child).toMatchObject({ parentSession: 'r1', eventCount: 9 });
  });
});

describe('exit statuses', () => {
  it('2 for usage errors (unknown command/option, missing argument, bad number, missing file)', async () => {
    const cases: [string[], RegExp][] = [
      [['frobnicate'], /unknown command "frobnicate"/],
      [['surface'], /missing SESSION/],
      [['surface', 's', '--bogus'], /unknown option --bogus for palimpsest surface\nusage: palimpsest surface SESSION/],
      [['events', 's', '--limit', 'ten'], /--limit must be an integer/],
      [['create', '--label', 'novalue'], /--label must be KEY=VALUE/],
      [['surface', 'a', 'b'], /unexpected argument "b"/],
      [['import', '/nonexistent/file.jsonl'], /^error: ENOENT: /],
    ];
    for (const [args, msg] of cases) {
      const r = await cli(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(msg);
      expect(r.stdout, args.join(' ')).toBe('');
    }
    // A bearer token never goes to a non-loopback address in plaintext.
    const plain = await runCli(['surface', 's', '--addr', '10.1.2.3:50051', '--token', 'secret']);
    expect(plain.code).toBe(2);
    expect(plain.stderr).toMatch(/refusing to send a bearer token to 10\.1\.2\.3:50051 without TLS/);
    const json = await cli('surface', '--json');
    expect(json.code).toBe(2);
    expect(jsonError(json)).toEqual({ code: 'INVALID_ARGUMENT', reason: 'USAGE', message: expect.stringContaining('missing SESSION'), metadata: {} });
  });

  it('1 when the server rejects the request', async () => {
    const r = await cli('surface', 'no-such-session');
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('error: SESSION_NOT_FOUND: session "no-such-session" does not exist\n');
    const dup = await cli('create', '--id', 'dup');
    expect(dup.code).toBe(0);
    const again = await cli('create', '--id', 'dup', '--json');
    expect(again.code).toBe(1);
    expect(jsonError(again)).toMatchObject({ code: 'ALREADY_EXISTS', reason: 'SESSION_ALREADY_EXISTS' });
  });

  it('3 when the server cannot be reached', async () => {
    const addr = `127.0.0.1:${await closedPort()}`;
    const r = await runCli(['surface', 's', '--addr', addr, '--connect-timeout', '300']);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(new RegExp(`^error: UNAVAILABLE: cannot reach the server at ${addr}`));
    const viaEnv = await runCli(['sessions', '--json'], { env: { PALIMPSEST_ADDR: addr, PALIMPSEST_CONNECT_TIMEOUT: '300' } });
    expect(viaEnv.code).toBe(3);
    expect(jsonError(viaEnv)).toMatchObject({ code: 'UNAVAILABLE', reason: 'UNAVAILABLE', metadata: {} });
  });

  it('PALIMPSEST_ADDR selects the server', async () => {
    const r = await runCli(['create', '--id', 'via-env'], { env: { PALIMPSEST_ADDR: t.server.address } });
    expect(r).toMatchObject({ code: 0, stdout: 'via-env\n' });
  });
});

describe('TLS and bearer tokens', () => {
  it('--tls-ca and --token (or PALIMPSEST_TOKEN) reach a TLS server with auth; a missing token is UNAUTHENTICATED', async () => {
    const { generatePki } = await import('../support/certs.js');
    const { hashToken } = await import('../../src/server/auth.js');
    const { rmSync, writeFileSync } = await import('node:fs');
    const pki = generatePki();
    const tokens = `${pki.dir}/tokens.json`;
    writeFileSync(tokens, JSON.stringify({ tokens: [{ name: 'ops', sha256: hashToken('tok-cli-0123456789'), tenant: 'ops', permissions: ['read', 'append', 'admin'] }] }));
    const s = await startTestServer({ tlsCert: pki.serverCert, tlsKey: pki.serverKey, authTokens: tokens });
    try {
      const addr = `localhost:${s.server.port}`;
      const created = await runCli(['create', '--id', 'tls1', '--addr', addr, '--tls-ca', pki.caCert, '--token', 'tok-cli-0123456789']);
      expect(created).toMatchObject({ code: 0, stdout: 'tls1\n' });
      const viaEnv = await runCli(['sessions', '--json'], { env: { PALIMPSEST_ADDR: addr, PALIMPSEST_TLS_CA: pki.caCert, PALIMPSEST_TOKEN: 'tok-cli-0123456789' } });
      expect(JSON.parse(viaEnv.stdout)).toMatchObject([{ id: 'tls1' }]);
      const anonymous = await runCli(['sessions', '--json', '--addr', addr, '--tls-ca', pki.caCert]);
      expect(anonymous.code).toBe(1);
      expect(jsonError(anonymous)).toMatchObject({ code: 'UNAUTHENTICATED' });
    } finally {
      await s.stop();
      rmSync(pki.dir, { recursive: true, force: true });
    }
  });
});
