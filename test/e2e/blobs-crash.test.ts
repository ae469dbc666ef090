/**
 * Blobs through crashes and damage (issue #39), on the real server process and SQLite:
 *
 *  - SIGKILL while clients append images (new and repeated ones) and delete sessions holding
 *    them: after the restart every acknowledged image reads back byte for byte, and the blob
 *    tables are exactly what the surviving events reference (no blob without an event, no event
 *    without its blob, reference counts right: `palimpsest verify` finds nothing).
 *  - A damaged blob is DATA_LOSS naming the session, the seq and the digest, and verify lists it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, status } from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { input } from '../support/events.js';
import { allEvents, api, failure, until, type Api } from '../support/e2e.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';
import { verifyFile } from '../../src/store/sqlite/verify.js';

let dir: string;
const running: ServerProcess[] = [];
beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'palimpsest-blobs-crash-'));
}, 120_000);
afterAll(() => {
  for (const p of running) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function connect(address: string): Api {
  return api(new SessionServiceClient(address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
}

const shared = randomBytes(8192).toString('base64');

function imageMessage(id: string, data: string) {
  return input('user/message', { id, role: 'user', content: [{ type: 'image', attachment: { mimeType: 'image/png', data } }], source: { kind: 'user' } }, { surfaceOp: { $case: 'append', value: {} } });
}

function jsonOf(e: { data?: { kind?: { $case: string; value?: unknown } } }): string {
  return e.data?.kind?.$case === 'json' ? (e.data.kind.value as string) : '';
}

async function writer(c: Api, sessionId: string, acked: Map<string, string>): Promise<void> {
  for (let n = 0; ; n++) {
    const data = n % 3 === 0 ? shared : randomBytes(4096 + n).toString('base64');
    const id = `${sessionId}-${n}`;
    try {
      const [seq] = (await c.appendEvents({ sessionId, events: [imageMessage(id, data)] })).seqs;
      acked.set(`${sessionId}/${seq}`, data);
    } catch {
      return;
    }
  }
}

/** Creates, fills and deletes sessions holding the shared image and a new one, until the server goes away. */
async function churner(c: Api): Promise<void> {
  for (let n = 0; ; n++) {
    try {
      await c.createSession({ sessionId: `churn-${n}` });
      await c.appendEvents({ sessionId: `churn-${n}`, events: [imageMessage('a', shared), imageMessage('b', randomBytes(3000).toString('base64'))] });
      await c.deleteSession({ sessionId: `churn-${n}` });
    } catch {
      return;
    }
  }
}

function blobTablesConsistent(db: string): void {
  const raw = new Database(db, { readonly: true, fileMustExist: true });
  try {
    // Every blob is referenced, and every reference's blob exists.
    expect(raw.prepare('SELECT count(*) FROM blobs b WHERE refs <= 0 OR NOT EXISTS (SELECT 1 FROM event_blobs r WHERE r.tenant = b.tenant AND r.digest = b.digest)').pluck().get()).toBe(0);
    expect(raw.prepare('SELECT count(*) FROM event_blobs r WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.tenant = r.tenant AND b.digest = r.digest)').pluck().get()).toBe(0);
    expect(raw.prepare('SELECT count(*) FROM event_blobs r WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.session_id = r.session_id AND e.seq = r.seq)').pluck().get()).toBe(0);
  } finally {
    raw.close();
  }
}

describe('blobs and crashes', () => {
  it('SIGKILL mid-stream: acknowledged images read back byte for byte, no blob without its event nor event without its blob', async () => {
    const db = join(dir, 'crash.db');
    let server = await spawnServer(['--db', db, '--blob-min-bytes', '1024']);
    running.push(server);
    let c = connect(server.address);
    const sessions = ['img-a', 'img-b'];
    for (const id of sessions) await c.createSession({ sessionId: id });
    const acked = new Map<string, string>();
    const clients = [connect(server.address), connect(server.address), connect(server.address)];
    const work = [writer(clients[0]!, 'img-a', acked), writer(clients[1]!, 'img-b', acked), churner(clients[2]!)];
    await until(() => acked.size >= 60, 'appends to flow', 20_000);
    server.proc.kill('SIGKILL');
    expect((await server.exited).signal).toBe('SIGKILL');
    await Promise.all(work);
    for (const x of clients) x.client.close();
    c.client.close();

    blobTablesConsistent(db);
    server = await spawnServer(['--db', db]);
    running.push(server);
    c = connect(server.address);
    for (const sessionId of sessions) {
      const events = await allEvents(c, sessionId, 200);
      for (const e of events) {
        const sent = acked.get(`${sessionId}/${e.seq}`);
        const data = JSON.parse(jsonOf(e)) as { content: { attachment: { data: string } }[] };
        if (sent !== undefined) expect(data.content[0]!.attachment.data === sent, `${sessionId} seq ${e.seq}`).toBe(true);
      }
      expect(events.length).toBeGreaterThanOrEqual([...acked.keys()].filter((k) => k.startsWith(`${sessionId}/`)).length);
    }
    server.proc.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(verifyFile(db).problems).toEqual([]);
  }, 60_000);

  it('a damaged blob is DATA_LOSS naming the session, seq and digest; verify lists it', async () => {
    const db = join(dir, 'damage.db');
    let server = await spawnServer(['--db', db, '--blob-min-bytes', '1024']);
    running.push(server);
    let c = connect(server.address);
    await c.createSession({ sessionId: 'd' });
    const bytes = randomBytes(5000);
    await c.appendEvents({ sessionId: 'd', events: [imageMessage('x', shared), imageMessage('y', bytes.toString('base64'))] });
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    server.proc.kill('SIGTERM');
    await server.exited;
    c.client.close();
    expect(verifyFile(db).problems).toEqual([]);
    const raw = new Database(db, { fileMustExist: true });
    const flipped = Buffer.from(bytes);
    flipped[100] = (flipped[100]! + 1) & 0xff;
    expect(raw.prepare('UPDATE blobs SET bytes = ? WHERE digest = ?').run(flipped, digest).changes).toBe(1);
    raw.close();
    expect(verifyFile(db).problems.join('\n')).toContain(`blob ${digest} of tenant "" fails its checksum`);
    server = await spawnServer(['--db', db]);
    running.push(server);
    c = connect(server.address);
    const err = await failure(c.listEvents({ sessionId: 'd' }));
    expect([err.code, err.reason]).toEqual([status.DATA_LOSS, 'DATA_CORRUPTED']);
    expect(err.metadata).toMatchObject({ sessionId: 'd', seq: '1', digest });
    c.client.close();
  }, 60_000);
});
