/**
 * Issue #17, integrity, end to end on a real server process and its file:
 * - bytes flipped in stored event rows (data, type) of a stopped server's file: after a restart
 *   the server answers DATA_LOSS / DATA_CORRUPTED (session and seq in the details) on reads and on
 *   the cold open, logs it, keeps serving the untouched sessions, and `palimpsest verify` (--db and
 *   --addr) finds it (exit 1); on the untouched file verify exits 0;
 * - a byte flipped in a WAL frame in the middle of a killed server's WAL (SQLite then drops that
 *   commit and every later one): on restart nothing wrong is served, the session is refused rather
 *   than reusing the seqs of acknowledged events, and verify reports it.
 */
import { closeSync, copyFileSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, status } from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';
import { runCli } from '../support/cli.js';
import { allEvents, api, failure, until, type Api } from '../support/e2e.js';
import { input, userMessage } from '../support/events.js';

const dir = mkdtempSync(join(tmpdir(), 'palimpsest-integrity-e2e-'));
const running: ServerProcess[] = [];

beforeAll(() => ensureBuilt(), 120_000);
afterAll(async () => {
  for (const s of running) {
    if (s.proc.exitCode === null && s.proc.signalCode === null) {
      s.proc.kill('SIGKILL');
      await s.exited;
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

async function start(db: string): Promise<{ server: ServerProcess; a: Api; client: SessionServiceClient }> {
  const server = await spawnServer(['--db', db, '--log-level', 'error']);
  running.push(server);
  const client = new SessionServiceClient(server.address, credentials.createInsecure());
  return { server, a: api(client), client };
}

async function stop(s: { server: ServerProcess; client: SessionServiceClient }, signal: NodeJS.Signals): Promise<void> {
  s.client.close();
  s.server.proc.kill(signal);
  await s.server.exited;
}

/** Flips one bit of the byte at every offset where `marker` occurs in `file` (or only the first); returns how many. */
function flipMarker(file: string, marker: string, all: boolean): number {
  const bytes = readFileSync(file);
  const needle = Buffer.from(marker);
  let count = 0;
  const fd = openSync(file, 'r+');
  try {
    for (let at = bytes.indexOf(needle); at >= 0; at = all ? bytes.indexOf(needle, at + 1) : -1) {
      // The last letter, 'q' -> 'p': still ASCII, so SQLite returns a (wrong) string, not an error.
      const pos = at + needle.length - 1;
      writeSync(fd, Buffer.from([bytes[pos]! ^ 0x01]), 0, 1, pos);
      count++;
    }
  } finally {
    closeSync(fd);
  }
  return count;
}

describe('flipped bytes in event rows of a stopped server', () => {
  it('reads and cold opens answer DATA_LOSS with the session and seq; other sessions are served; verify finds it', async () => {
    const db = join(dir, 'rows.db');
    let s = await start(db);
    for (const id of ['data', 'type', 'clean']) await s.a.createSession({ sessionId: id });
    await s.a.appendEvents({ sessionId: 'data', events: [userMessage('u0', 'hi'), input('x/note', { note: 'MARKERDATAq' }), input('x/note', 2)] });
    await s.a.appendEvents({ sessionId: 'type', events: [userMessage('u0', 'hi'), input('x/typemarkerq', 1)] });
    await s.a.appendEvents({ sessionId: 'clean', events: [userMessage('u0', 'hi'), input('x/note', 3)] });
    const cleanEvents = await allEvents(s.a, 'clean');
    await stop(s, 'SIGTERM');
    expect(existsSync(`${db}-wal`)).toBe(false);
    // The untouched file verifies clean.
    const ok = await runCli(['verify', '--db', db, '--json']);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ sessions: 3, events: 7, ok: true, problems: [] });

    expect(flipMarker(db, 'MARKERDATAq', false)).toBe(1);
    // The type is in the table and in the structural index: both copies changed.
    expect(flipMarker(db, 'x/typemarkerq', true)).toBeGreaterThanOrEqual(2);

    s = await start(db);
    const data = await failure(s.a.listEvents({ sessionId: 'data', pageSize: 100 }));
    expect(data.code).toBe(status.DATA_LOSS);
    expect(data.reason).toBe('DATA_CORRUPTED');
    expect(data.metadata).toMatchObject({ sessionId: 'data', seq: '1' });
    expect(data.message).toMatch(/seq 1 failed its data checksum/);
    // The cold open (structural load) of the session with the changed type refuses it, for reads and appends.
    const surface = await failure(s.a.getSurface({ sessionId: 'type' }));
    expect(surface).toMatchObject({ code: status.DATA_LOSS, reason: 'DATA_CORRUPTED', metadata: { sessionId: 'type', seq: '1' } });
    expect((await failure(s.a.appendEvents({ sessionId: 'type', events: [input('x/note', 4)] }))).code).toBe(status.DATA_LOSS);
    // The untouched session is served as before.
    expect(await allEvents(s.a, 'clean')).toEqual(cleanEvents);
    await until(() => /DATA LOSS/.test(s.server.stderr()), 'the server logs the data loss');

    const byFile = await runCli(['verify', '--db', db]);
    expect(byFile.code).toBe(1);
    expect(byFile.stdout).toMatch(/session "data": event 1 fails its data checksum/);
    expect(byFile.stdout).toMatch(/session "type": event 1 fails its structural checksum/);
    const byServer = await runCli(['verify', '--addr', s.server.address, '--json']);
    expect(byServer.stdout, byServer.stderr).not.toBe("");
    expect(byServer.code, byServer.stderr).toBe(1);
    const report = JSON.parse(byServer.stdout) as { sessions: number; problems: { sessionId: string; seq?: number; problem: string }[] };
    expect(report.sessions).toBe(3);
    expect(report.problems.map((p) => [p.sessionId, p.seq]).sort()).toEqual([['data', 1], ['type', 1]]);
    expect(report.problems.every((p) => /^DATA_CORRUPTED: /.test(p.problem))).toBe(true);
    await stop(s, 'SIGTERM');
  }, 120_000);
});

/** WAL layout (sqlite.org/fileformat.html): a 32-byte header, then frames of a 24-byte header and one page. */
function walFrames(wal: string): { count: number; frameBytes: number } {
  const header = Buffer.alloc(32);
  const fd = openSync(wal, 'r');
  try {
    readSync(fd, header, 0, 32, 0);
  } finally {
    closeSync(fd);
  }
  const pageSize = header.readUInt32BE(8);
  const frameBytes = 24 + pageSize;
  return { count: Math.floor((statSync(wal).size - 32) / frameBytes), frameBytes };
}

describe('a damaged WAL frame of a killed server', () => {
  it('drops the commits after it; the server serves nothing wrong and refuses to reuse acknowledged seqs; verify reports it', async () => {
    const db = join(dir, 'wal.db');
    let s = await start(db);
    await s.a.createSession({ sessionId: 'w' });
    await s.a.createSession({ sessionId: 'quiet' });
    await s.a.appendEvents({ sessionId: 'quiet', events: [input('x/note', 0)] });
    // One commit per append (each awaited): well under the 1000-page autocheckpoint.
    let head = -1;
    for (let i = 0; i < 60; i++) head = (await s.a.appendEvents({ sessionId: 'w', events: [input('x/note', { i, pad: 'p'.repeat(200) })] })).seqs[0]!;
    expect(head).toBe(59);
    await stop(s, 'SIGKILL');
    const wal = `${db}-wal`;
    const { count, frameBytes } = walFrames(wal);
    expect(count).toBeGreaterThan(60);
    copyFileSync(wal, `${wal}.orig`);
    const middle = Math.floor(count / 2);
    const fd = openSync(wal, 'r+');
    try {
      const at = 32 + middle * frameBytes + 24 + 100;
      const b = Buffer.alloc(1);
      readSync(fd, b, 0, 1, at);
      writeSync(fd, Buffer.from([b[0]! ^ 0xff]), 0, 1, at);
    } finally {
      closeSync(fd);
    }

    s = await start(db);
    // Nothing wrong is served: the session is refused, and no append can take seq <= 59 again.
    const read = await failure(s.a.listEvents({ sessionId: 'w', pageSize: 100 }));
    expect(read.code).toBe(status.DATA_LOSS);
    expect(read.reason).toBe('DATA_CORRUPTED');
    expect(read.message).toMatch(/its recorded head is 59: acknowledged commits were lost/);
    expect((await failure(s.a.appendEvents({ sessionId: 'w', events: [input('x/note', 'again')] }))).code).toBe(status.DATA_LOSS);
    expect((await failure(s.a.getSurface({ sessionId: 'w' }))).code).toBe(status.DATA_LOSS);
    // The session committed before the damage is intact.
    expect((await allEvents(s.a, 'quiet')).map((e) => e.seq)).toEqual([0]);
    await until(() => /DATA LOSS found at open/.test(s.server.stderr()), 'the server logs the lost commits at open');
    const v = await runCli(['verify', '--db', db]);
    expect(v.code).toBe(1);
    expect(v.stdout).toMatch(/session "w": head \d+ is below the recorded head 59 \(acknowledged commits lost/);
    await stop(s, 'SIGTERM');
  }, 120_000);
});

describe('a row missing from the middle of a stopped server\'s session (issue #33 item 1)', () => {
  it('ListEvents and ExportSession answer DATA_LOSS instead of a log with a gap; then every RPC refuses it; verify finds it; delete clears it', async () => {
    const db = join(dir, 'gap.db');
    let s = await start(db);
    for (const id of ['gap', 'clean']) {
      await s.a.createSession({ sessionId: id });
      await s.a.appendEvents({ sessionId: id, events: Array.from({ length: 10 }, (_, i) => input('x/note', { id, i })) });
    }
    const cleanEvents = await allEvents(s.a, 'clean');
    await stop(s, 'SIGTERM');
    const raw = new Database(db);
    expect(raw.prepare('DELETE FROM events WHERE session_id = ? AND seq = 5').run('gap').changes).toBe(1);
    raw.close();

    s = await start(db);
    // The json data form (pages encoded in SQLite) and the typed form (pages from rows): both refused.
    const page = await failure(s.a.listEvents({ sessionId: 'gap', pageSize: 100 }));
    expect(page).toMatchObject({ code: status.DATA_LOSS, reason: 'DATA_CORRUPTED', metadata: { sessionId: 'gap', seq: '5' } });
    expect((await failure(s.a.exportSession('gap'))).code).toBe(status.DATA_LOSS);
    // Refused by every RPC now, also a page that does not cross the gap.
    expect((await failure(s.a.listEvents({ sessionId: 'gap', fromSeq: 7, pageSize: 2 }))).code).toBe(status.DATA_LOSS);
    expect((await failure(s.a.getSession({ sessionId: 'gap' }))).code).toBe(status.DATA_LOSS);
    expect((await failure(s.a.appendEvents({ sessionId: 'gap', events: [input('x/note', 'more')] }))).code).toBe(status.DATA_LOSS);
    const listed = await s.a.listSessions({ pageSize: 10 });
    expect(listed.sessions.map((x) => [x.id, x.damaged]).sort()).toEqual([['clean', false], ['gap', true]]);
    expect(await allEvents(s.a, 'clean')).toEqual(cleanEvents);

    const byServer = await runCli(['verify', '--addr', s.server.address, '--json']);
    expect(byServer.code, byServer.stderr).toBe(1);
    expect((JSON.parse(byServer.stdout) as { problems: { sessionId: string; seq?: number }[] }).problems).toMatchObject([{ sessionId: 'gap', seq: 5 }]);
    const byFile = await runCli(['verify', '--db', db]);
    expect(byFile.code).toBe(1);

    await s.a.deleteSession({ sessionId: 'gap' });
    await s.a.createSession({ sessionId: 'gap' });
    expect((await s.a.appendEvents({ sessionId: 'gap', events: [input('x/note', 'again')] })).seqs).toEqual([0]);
    await stop(s, 'SIGTERM');
  }, 120_000);
});

describe('a session missing from the database whose head is on record (issue #33 item 4)', () => {
  it('DATA_LOSS on every RPC (not NOT_FOUND), listed as damaged, found by both verifies; a delete clears it', async () => {
    const db = join(dir, 'missing.db');
    let s = await start(db);
    for (const id of ['gone', 'kept']) {
      await s.a.createSession({ sessionId: id });
      await s.a.appendEvents({ sessionId: id, events: [input('x/note', { id })] });
    }
    await stop(s, 'SIGTERM');
    const raw = new Database(db);
    raw.prepare("DELETE FROM events WHERE session_id = 'gone'").run();
    expect(raw.prepare("DELETE FROM sessions WHERE id = 'gone'").run().changes).toBe(1);
    raw.close();

    s = await start(db);
    for (const call of [
      () => s.a.getSession({ sessionId: 'gone' }),
      () => s.a.listEvents({ sessionId: 'gone' }),
      () => s.a.appendEvents({ sessionId: 'gone', events: [input('x/note', 1)] }),
      () => s.a.createSession({ sessionId: 'gone' }),
      () => s.a.exportSession('gone'),
    ]) {
      expect(await failure(call())).toMatchObject({ code: status.DATA_LOSS, reason: 'DATA_CORRUPTED', metadata: { sessionId: 'gone' } });
    }
    const listed = await s.a.listSessions({ pageSize: 10 });
    expect(listed.sessions.map((x) => [x.id, x.damaged])).toEqual([['kept', false], ['gone', true]]);
    const byServer = await runCli(['verify', '--addr', s.server.address, '--json']);
    expect(byServer.code, byServer.stderr).toBe(1);
    expect((JSON.parse(byServer.stdout) as { problems: { sessionId: string }[] }).problems.map((p) => p.sessionId)).toEqual(['gone']);
    const byFile = await runCli(['verify', '--db', db]);
    expect(byFile.code).toBe(1);
    expect(byFile.stdout).toMatch(/session "gone"/);

    await s.a.deleteSession({ sessionId: 'gone' });
    expect((await failure(s.a.getSession({ sessionId: 'gone' }))).code).toBe(status.NOT_FOUND);
    expect((await runCli(['verify', '--addr', s.server.address])).code).toBe(0);
    await stop(s, 'SIGTERM');
  }, 120_000);
});
