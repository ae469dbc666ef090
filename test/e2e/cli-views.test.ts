/**
 * CLI output people read (issue #18): watch resumes by itself after a dropped connection and a
 * server restart (--no-reconnect exits 3 instead), watch --messages, messages marks compaction
 * summaries / pruned results / compacted messages and folds long tool output (--full), sessions
 * --sort, export -o says what it wrote, and import/export progress ends with a summary on a
 * terminal (a pseudo-terminal from script(1)).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { closedPort, RunningCli, runCli, spawnCli } from '../support/cli.js';
import { api, fixture, type Api } from '../support/e2e.js';
import { input, replaceOp, toolResult, userMessage } from '../support/events.js';
import { ensureBuilt, ROOT, spawnServer } from '../support/server-process.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { run } from '../support/toolchains.js';

let ts: TestServer;
let a: Api;
let dir: string;
beforeAll(async () => {
  ensureBuilt();
  ts = await startTestServer();
  a = api(ts.client);
  dir = mkdtempSync(join(tmpdir(), 'palimpsest-views-'));
});
afterAll(async () => {
  await ts?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const objects = (w: RunningCli): Record<string, unknown>[] => w.lines.filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
const seqsOf = (w: RunningCli): unknown[] => objects(w).filter((o) => o.op === 'append').map((o) => o.seq);

describe('watch', () => {
  it('resumes after dropped connections with every delta exactly once', async () => {
    await a.createSession({ sessionId: 'wr1' });
    await a.appendEvents({ sessionId: 'wr1', events: [userMessage('u0', 'zero')] });
    const proxy = await TcpProxy.start(ts.server.address);
    const w = new RunningCli(spawnCli(['watch', 'wr1', '--json', '--addr', proxy.address]));
    try {
      await w.until(() => seqsOf(w).length === 1);
      for (let round = 1; round <= 3; round++) {
        await a.appendEvents({ sessionId: 'wr1', events: [userMessage(`u${round}`, `r${round}`)] });
        await w.until(() => seqsOf(w).length === round + 1);
        expect(proxy.drop()).toBeGreaterThan(0);
      }
      await a.appendEvents({ sessionId: 'wr1', events: [userMessage('u4', 'four')] });
      await w.until(() => seqsOf(w).length === 5);
      expect(seqsOf(w)).toEqual([0, 1, 2, 3, 4]);
      expect(w.stderr).toMatch(/connection lost .*; resuming after cursor 1 in \d+ ms/);
      expect(w.stderr).toMatch(/resuming after cursor 3/);
    } finally {
      w.proc.kill('SIGINT');
      expect(await w.exited).toBe(0);
      await proxy.close();
    }
  });

  it('resumes after a server restart', async () => {
    const port = await closedPort();
    const db = join(dir, 'restart.db');
    const args = ['--db', db, '--listen', `127.0.0.1:${port}`];
    let srv = await spawnServer(args);
    const client = (): SessionServiceClient => new SessionServiceClient(srv.address, credentials.createInsecure());
    let c = client();
    await api(c).createSession({ sessionId: 'wr2' });
    await api(c).appendEvents({ sessionId: 'wr2', events: [userMessage('u0', 'zero')] });
    const w = new RunningCli(spawnCli(['watch', 'wr2', '--json', '--addr', srv.address]));
    try {
      await w.until(() => seqsOf(w).length === 1);
      c.close();
      srv.proc.kill('SIGTERM');
      await srv.exited;
      srv = await spawnServer(args);
      c = client();
      await api(c).appendEvents({ sessionId: 'wr2', events: [userMessage('u1', 'one')] });
      await w.until(() => seqsOf(w).length === 2, 20_000);
      expect(seqsOf(w)).toEqual([0, 1]);
      expect(w.stderr).toMatch(/resuming after cursor 0/);
    } finally {
      w.proc.kill('SIGINT');
      await w.exited;
      c.close();
      srv.proc.kill('SIGTERM');
      await srv.exited;
    }
  });

  it('--no-reconnect exits 3 when the connection drops', async () => {
    await a.createSession({ sessionId: 'wr3' });
    const proxy = await TcpProxy.start(ts.server.address);
    const w = new RunningCli(spawnCli(['watch', 'wr3', '--json', '--no-reconnect', '--addr', proxy.address]));
    try {
      await w.until(() => objects(w).some((o) => o.signal === 'caught-up'));
      proxy.drop();
      expect(await w.exited).toBe(3);
      expect(JSON.parse(w.stderr)).toMatchObject({ code: 'UNAVAILABLE' });
    } finally {
      await proxy.close();
    }
  });

  it('--messages shows what joins the surface', async () => {
    await a.createSession({ sessionId: 'wm' });
    await a.appendEvents({ sessionId: 'wm', events: [userMessage('u0', 'hello there')] });
    const json = new RunningCli(spawnCli(['watch', 'wm', '--json', '--messages', '--addr', ts.server.address]));
    const text = new RunningCli(spawnCli(['watch', 'wm', '--messages', '--addr', ts.server.address], { NO_COLOR: '1' }));
    try {
      await json.until(() => objects(json).some((o) => o.signal === 'caught-up'));
      expect(objects(json)[0]).toEqual({ cursor: 0, op: 'append', seq: 0, message: { id: 'u0', role: 'user', content: [{ type: 'text', text: 'hello there' }], source: { kind: 'user' } } });
      await text.until((l) => l.some((x) => x.includes('caught-up')));
      expect(text.lines[0]).toBe('append   0  user: hello there');
    } finally {
      for (const w of [json, text]) { w.proc.kill('SIGINT'); await w.exited; }
    }
  });
});

describe('messages', () => {
  it('marks compaction summaries, pruned results and compacted messages; folds long tool output unless --full', async () => {
    const id = 'views';
    // Tool results without an assistant message holding their call (a view test, not a pairing
    // one): the tool-pairing guard (on by default, issue #14) would refuse the compaction below.
    await a.createSession({ sessionId: id, pairingGuard: false });
    const long = Array.from({ length: 40 }, (_, i) => `line ${i + 1}`).join('\n');
    await a.appendEvents({ sessionId: id, events: [
      userMessage('u1', 'first question'), // 0
      input('tool/call', { turn: 1, step: 1, callId: 'c1', name: 'cat', arguments: '{}' }), // 1
      toolResult('r1', 'c1', long, 1), // 2
      userMessage('u2', 'second question'), // 3
      input('compaction/summary', { compactionId: 'k', summary: [], shadowedRange: { start: 0, end: 0 }, shadowedSeqs: [0], shadowedTokenCount: 1, provider: 'p', model: 'm' }), // 4
      input('user/message', { id: 'k', role: 'user', content: [{ type: 'text', text: 'summary of the first question' }], source: { kind: 'plugin', plugin: 'compact' } },
        { surfaceOp: replaceOp(0, 0), sourceEventSeqs: { seqs: [4, 0] } }), // 5
      toolResult('r3', 'c1', long.replace('line 1\n', 'line one\n'), 1), // 6
      input('compaction/prune', { shadowedRange: { start: 6, end: 6 }, shadowedSeqs: [6], shadowedTokenCount: 1 }), // 7
      { ...toolResult('r3', 'c1', '[pruned]', 1), surfaceOp: replaceOp(6, 6), sourceEventSeqs: { seqs: [6] } }, // 8
    ] });
    const env = { NO_COLOR: '1' };
    const history = await runCli(['messages', id, '--addr', ts.server.address], { env });
    expect(history.code, history.stderr).toBe(0);
    expect(history.stdout).toContain('#5 user k [compaction summary]');
    expect(history.stdout).toContain('#8 user r3 [pruned tool result]');
    expect(history.stdout).toContain('#3 user u2\n');
    expect(history.stdout).toContain('… 31 more lines (--full to show them)');
    expect(history.stdout).not.toContain('line 20\n');
    const full = await runCli(['messages', id, '--full', '--addr', ts.server.address], { env });
    expect(full.stdout).toContain('line 20\n');
    expect(full.stdout).not.toContain('more lines');
    const transcript = await runCli(['messages', id, '--transcript', '--addr', ts.server.address], { env });
    expect(transcript.stdout).toContain('#0 user u1 [compacted: no longer on the surface]');
    expect(transcript.stdout).toContain('#6 user r3 [compacted: no longer on the surface]');
    expect(transcript.stdout).not.toContain('[compaction summary]');
    // --json is unchanged: the stored message objects.
    const json = JSON.parse((await runCli(['messages', id, '--json', '--addr', ts.server.address])).stdout) as { id: string }[];
    expect(json.map((m) => m.id)).toEqual(['k', 'r1', 'u2', 'r3']);
  });
});

describe('events', () => {
  it('chunk rows show the streamed text; --full prints the whole data, wrapped', async () => {
    await a.createSession({ sessionId: 'ev' });
    const longText = 'word '.repeat(80).trim();
    await a.appendEvents({ sessionId: 'ev', events: [
      input('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'Let me look' } }),
      input('session/title', { title: longText }),
    ] });
    const env = { NO_COLOR: '1' }; // not a terminal: 120 columns
    const rows = await runCli(['events', 'ev', '--addr', ts.server.address], { env });
    expect(rows.code, rows.stderr).toBe(0);
    const lines = rows.stdout.split('\n');
    expect(lines[1]).toMatch(/assistant\/chunk\s+text-delta\[0\] "Let me look"$/);
    expect(lines[2]).toContain('{"title":"word word');
    expect(rows.stdout).not.toContain('"title": "');
    const full = await runCli(['events', 'ev', '--full', '--addr', ts.server.address], { env });
    expect(full.stdout).toContain('    {\n      "title": "word word');
    const body = full.stdout.split('\n').filter((l) => l.startsWith('      '));
    expect(body.length).toBeGreaterThan(2); // the long title wrapped
    expect(body.every((l) => l.length <= 120)).toBe(true);
    expect((await runCli(['events', 'ev', '--full', '--json', '--addr', ts.server.address])).stdout).toBe(
      (await runCli(['events', 'ev', '--json', '--addr', ts.server.address])).stdout);
  });

  it('--full on a terminal goes through $PAGER (not when piped)', async () => {
    const cli = `${process.execPath} ${join(ROOT, 'bin/palimpsest.mjs')}`;
    const env = { ...process.env, NO_COLOR: '1', PAGER: 'sed s/^/PAGED:/' };
    const tty = await run('script', ['-qec', `${cli} events ev --full --addr ${ts.server.address}`, '/dev/null'], { env, timeoutMs: 30_000 });
    expect(tty.code, tty.stdout).toBe(0);
    const lines = tty.stdout.split(/\r?\n/).filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(3);
    expect(lines.every((l) => l.startsWith('PAGED:'))).toBe(true);
    const piped = await runCli(['events', 'ev', '--full', '--addr', ts.server.address], { env: { PAGER: 'sed s/^/PAGED:/' } });
    expect(piped.stdout).not.toContain('PAGED:');
  });
});

describe('sessions --sort', () => {
  it('created (default, newest first) or activity (most recent event first)', async () => {
    const srv = await startTestServer();
    const b = api(srv.client);
    try {
      for (const id of ['s-old', 's-mid', 's-new']) await b.createSession({ sessionId: id, labels: { sort: 't' } });
      await b.appendEvents({ sessionId: 's-old', events: [input('x/y', {}, { time: Date.now() + 60_000 })] });
      await b.appendEvents({ sessionId: 's-mid', events: [input('x/y', {}, { time: Date.now() + 30_000 })] });
      const list = async (...extra: string[]): Promise<string[]> => {
        const r = await runCli(['sessions', '--json', '--label', 'sort=t', '--addr', srv.server.address, ...extra]);
        expect(r.code, r.stderr).toBe(0);
        return (JSON.parse(r.stdout) as { id: string }[]).map((s) => s.id);
      };
      expect(await list()).toEqual(['s-new', 's-mid', 's-old']);
      expect(await list('--sort', 'created')).toEqual(['s-new', 's-mid', 's-old']);
      expect(await list('--sort', 'activity')).toEqual(['s-old', 's-mid', 's-new']);
      expect(await list('--sort', 'activity', '--limit', '1')).toEqual(['s-old']);
      const bad = await runCli(['sessions', '--sort', 'size', '--addr', srv.server.address]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--sort must be created or activity, got "size"');
    } finally {
      await srv.stop();
    }
  });
});

describe('export and import', () => {
  it('export -o prints what it wrote', async () => {
    await a.importSession({ sessionId: 'exp' }, fixture('agent-instructions.jsonl'));
    const file = join(dir, 'exp.jsonl');
    const r = await runCli(['export', 'exp', '-o', file, '--addr', ts.server.address]);
    expect(r.code, r.stderr).toBe(0);
    const text = readFileSync(file, 'utf8');
    const lines = text.split('\n').length - 2;
    expect(r.stdout).toMatch(new RegExp(`^wrote ${file}: exp, ${lines} event lines, [\\d.]+ (B|KiB|MiB)\\n$`));
  });

  it('on a terminal, progress ends with a one-line summary (events, size, time, events/s)', async () => {
    const file = join(ROOT, 'test/fixtures/reference-sessions/agent-instructions.jsonl');
    const events = readFileSync(file, 'utf8').trim().split('\n').length - 1;
    // script(1) gives the CLI a pseudo-terminal; its output is what the terminal shows.
    const cli = `${process.execPath} ${join(ROOT, 'bin/palimpsest.mjs')}`;
    const tty = (cmd: string) => run('script', ['-qec', cmd, '/dev/null'], { env: { ...process.env, NO_COLOR: '1' }, timeoutMs: 30_000 });
    const imp = await tty(`${cli} import ${file} --id tty-import --addr ${ts.server.address}`);
    expect(imp.code, imp.stdout).toBe(0);
    expect(imp.stdout).toMatch(new RegExp(`imported ${events} events \\([\\d.]+ KiB\\) in [\\d.]+ s \\([\\d,]+ events/s\\)`));
    expect(imp.stdout).toContain('tty-import');
    const exp = await tty(`${cli} export tty-import --addr ${ts.server.address} > ${join(dir, 'tty.jsonl')}`);
    expect(exp.code, exp.stdout).toBe(0);
    expect(exp.stdout).toMatch(/exported \d+ events \([\d.]+ KiB\) in [\d.]+ s/);
  });
});
