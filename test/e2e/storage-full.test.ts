/**
 * Storage failures (issue #17, finding 4): a full disk used to be reported as INTERNAL for every
 * write. Now a full disk is RESOURCE_EXHAUSTED / STORAGE_FULL (with a QuotaFailure), logged once
 * per episode rather than per request; reads keep being served, nothing half-written is visible,
 * and writes succeed again once space returns.
 *
 * Two ways to fill the disk: SQLite's own `max_page_count` (a real SQLITE_FULL from the engine,
 * runs anywhere), and, when the suite runs as root, a real full filesystem: the server's database
 * on a small tmpfs filled up with a filler file (ENOSPC under SQLite), unmounted afterwards.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, status } from '@grpc/grpc-js';
import type Database from 'better-sqlite3';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import type { StorageEpisodes } from '../../src/app/storage-monitor.js';
import { api, failure, until, type Api } from '../support/e2e.js';
import { input, userMessage } from '../support/events.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';

const big = (n: number) => input('x/blob', { pad: 'z'.repeat(n) });

describe('a full disk (SQLite max_page_count)', () => {
  let t: TestServer;
  let a: Api;
  let db: Database.Database;
  let episodes: StorageEpisodes;
  beforeAll(async () => {
    // max_page_count is a setting of one connection: appends are written on the store's own
    // (--sqlite-writer inline). The writer thread meets a full disk in the tmpfs test below.
    t = await startTestServer({ sqliteWriter: 'inline' });
    a = api(t.client);
    // The app's store is the SQLite store wrapped by the blobs layer (BlobbingStore.inner).
    const store = t.server.app.store as unknown as { inner: { db: Database.Database }; storageEpisodes: StorageEpisodes };
    db = store.inner.db;
    episodes = store.storageEpisodes;
  });
  afterAll(async () => { await t?.stop(); });

  it('writes fail with RESOURCE_EXHAUSTED/STORAGE_FULL, reads are served, and writes recover when space returns', async () => {
    await a.createSession({ sessionId: 'full' });
    await a.appendEvents({ sessionId: 'full', events: [input('turn/start', { turn: 1 }), userMessage('u', 'hello')] });
    const before = await a.exportSession('full');
    const pages = Number(db.pragma('page_count', { simple: true }));
    db.pragma(`max_page_count = ${pages}`);
    for (let i = 0; i < 5; i++) {
      const e = await failure(a.appendEvents({ sessionId: 'full', events: [big(200_000)] }));
      expect(e, `attempt ${i}`).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'STORAGE_FULL', domain: 'palimpsest.dev' });
      expect(e.message).toMatch(/storage is full; nothing was stored/);
      expect(e.quotaFailure?.violations[0]?.subject).toBe('storage');
    }
    // One episode, however many requests failed.
    expect(episodes).toMatchObject({ current: 'full', episodes: 1 });
    expect(episodes.failures).toBe(5);
    // Reads are served, and show nothing of the failed writes.
    expect(await a.exportSession('full')).toBe(before);
    expect((await a.getSession({ sessionId: 'full' })).session?.headSeq).toBe(1);
    expect((await a.getSurface({ sessionId: 'full' })).seqs).toEqual([1]);
    expect((await a.listEvents({ sessionId: 'full' })).events.map((e) => e.seq)).toEqual([0, 1]);
    // Space returns: the next write succeeds right after the last acknowledged one.
    db.pragma('max_page_count = 1073741823');
    expect((await a.appendEvents({ sessionId: 'full', events: [big(200_000)] })).seqs).toEqual([2]);
    expect(episodes.current).toBeUndefined();
    expect((await a.listEvents({ sessionId: 'full' })).events.map((e) => e.seq)).toEqual([0, 1, 2]);
  });
});

const root = process.getuid?.() === 0;

describe.skipIf(!root)('a full filesystem (tmpfs, root only)', () => {
  let mnt: string;
  let server: ServerProcess;
  let a: Api;
  let client: SessionServiceClient;
  let mounted = false;
  beforeAll(async () => {
    ensureBuilt();
    mnt = mkdtempSync(join(tmpdir(), 'palimpsest-full-'));
    const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', mnt], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`mount -t tmpfs failed as root: ${r.stderr}`);
    mounted = true;
    mkdirSync(join(mnt, 'db'));
    server = await spawnServer(['--db', join(mnt, 'db', 'p.db'), '--log-level', 'warn']);
    client = new SessionServiceClient(server.address, credentials.createInsecure());
    a = api(client);
  }, 60_000);
  afterAll(async () => {
    client?.close();
    if (server) {
      server.proc.kill('SIGTERM');
      await server.exited;
    }
    if (mounted) spawnSync('umount', [mnt]);
    rmSync(mnt, { recursive: true, force: true });
  });

  it('ENOSPC is STORAGE_FULL, logged once; reads are served; writes recover once the filler is removed', async () => {
    await a.createSession({ sessionId: 'disk' });
    await a.appendEvents({ sessionId: 'disk', events: [input('turn/start', { turn: 1 }), userMessage('u', 'hello')] });
    const before = await a.exportSession('disk');
    // Fill the filesystem to the last byte.
    const filler = join(mnt, 'filler');
    const fd = openSync(filler, 'w');
    const chunk = Buffer.alloc(64 * 1024, 1);
    try {
      for (;;) writeSync(fd, chunk);
    } catch (e) {
      expect((e as NodeJS.ErrnoException).code).toBe('ENOSPC');
    }
    try {
      for (;;) writeSync(fd, chunk, 0, 512);
    } catch {
      // full to the block
    }
    closeSync(fd);
    for (let i = 0; i < 8; i++) {
      const e = await failure(a.appendEvents({ sessionId: 'disk', events: [big(300_000)] }));
      expect(e, `attempt ${i}`).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'STORAGE_FULL' });
    }
    expect(await a.exportSession('disk')).toBe(before);
    expect((await a.getSurface({ sessionId: 'disk' })).seqs).toEqual([1]);
    // The server's log reaches us through a pipe: wait for the line, then count.
    await until(() => server.stderr().includes('storage is full'), 'the storage-full log line');
    const full = server.stderr().split('\n').filter((l) => l.includes('storage is full'));
    expect(full, server.stderr()).toHaveLength(1);
    expect(server.stderr()).not.toMatch(/unexpected error/);
    rmSync(filler);
    expect((await a.appendEvents({ sessionId: 'disk', events: [big(300_000)] })).seqs).toEqual([2]);
    await until(() => server.stderr().includes('storage recovered'), 'the recovery log line');
    expect((await a.listEvents({ sessionId: 'disk' })).events.map((e) => e.seq)).toEqual([0, 1, 2]);
  });
});
