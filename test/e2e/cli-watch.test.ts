/**
 * `palimpsest watch` against a live server: catch-up, live surface deltas (append, replace),
 * signals, --events, resume with --after, and Ctrl-C (SIGINT cancels the stream, exit 0).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { RunningCli, runCli, spawnCli } from '../support/cli.js';
import { input, replaceOp, userMessage } from '../support/events.js';

let t: TestServer;
beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
});
afterAll(async () => { await t.stop(); });

const parsedLines = (w: RunningCli) => w.lines.filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
const has = (pred: (o: Record<string, unknown>) => boolean) => (lines: string[]) => lines.filter((l) => l !== '').some((l) => pred(JSON.parse(l) as Record<string, unknown>));

async function append(sessionId: string, ...events: ReturnType<typeof input>[]): Promise<number[]> {
  return (await call(t.client.appendEvents.bind(t.client), { sessionId, events, idempotencyKey: '' })).seqs;
}

describe('watch', () => {
  it('prints surface deltas as JSON lines until SIGINT, then exits 0', async () => {
    const c = t.client;
    await call(c.createSession.bind(c), { sessionId: 'w1', labels: {}, strict: false });
    await append('w1', userMessage('u1', 'one'), input('session/title', { title: 't' }));
    const w = new RunningCli(spawnCli(['watch', 'w1', '--json', '--addr', t.server.address]));
    await w.until(has((o) => o.signal === 'caught-up'));
    expect(parsedLines(w)).toEqual([
      { cursor: 0, op: 'append', seq: 0 },
      { cursor: 1, signal: 'checkpoint' },
      { cursor: 1, signal: 'caught-up' },
    ]);
    await append('w1', userMessage('u2', 'two'));
    await w.until(has((o) => o.seq === 2));
    await append('w1', input('user/message', { id: 's', role: 'user', content: [{ type: 'text', text: 'summary' }], source: { kind: 'plugin', plugin: 'compact' } },
      { surfaceOp: replaceOp(0, 2), sourceEventSeqs: { seqs: [0, 2] } }));
    await w.until(has((o) => o.op === 'replace'));
    expect(parsedLines(w).slice(3)).toEqual([
      { cursor: 2, op: 'append', seq: 2 },
      { cursor: 3, op: 'replace', start: 0, end: 2, seq: 3, shadowed: [0, 2] },
    ]);
    w.proc.kill('SIGINT');
    expect(await w.exited).toBe(0);
    expect(w.stderr).toBe('');
  });

  it('--events prints the events in the reference envelope; --after resumes', async () => {
    const c = t.client;
    await call(c.createSession.bind(c), { sessionId: 'w2', labels: {}, strict: false });
    await append('w2', userMessage('u1', 'one'), input('session/title', { title: 't' }));
    const w = new RunningCli(spawnCli(['watch', 'w2', '--events', '--after', '0', '--json', '--addr', t.server.address]));
    await w.until(has((o) => o.signal === 'caught-up'));
    await append('w2', input('turn/start', { turn: 1 }));
    await w.until(has((o) => o.type === 'turn/start'));
    const lines = parsedLines(w);
    expect(lines[0]).toEqual({ type: 'session/title', seq: 1, time: expect.any(Number), data: { title: 't' } });
    expect(lines[1]).toEqual({ cursor: 1, signal: 'caught-up' });
    expect(lines[2]).toMatchObject({ type: 'turn/start', seq: 2, data: { turn: 1 } });
    w.proc.kill('SIGINT');
    expect(await w.exited).toBe(0);
  });

  it('human output on a non-terminal has no colour; a missing session exits 1', async () => {
    const c = t.client;
    await call(c.createSession.bind(c), { sessionId: 'w3', labels: {}, strict: false });
    await append('w3', userMessage('u1', 'one'));
    const w = new RunningCli(spawnCli(['watch', 'w3', '--addr', t.server.address]));
    await w.until((lines) => lines.some((l) => l.startsWith('caught-up')));
    expect(w.lines.slice(0, 2)).toEqual(['append   0', 'caught-up (cursor 0)']);
    w.proc.kill('SIGINT');
    expect(await w.exited).toBe(0);

    const missing = await runCli(['watch', 'nope', '--json', '--addr', t.server.address]);
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stderr)).toMatchObject({ code: 'NOT_FOUND', reason: 'SESSION_NOT_FOUND' });
  });
});
