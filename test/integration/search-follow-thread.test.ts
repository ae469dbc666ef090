import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import { SearchFollower } from '../../src/app/search-follower.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { SQLITE_FOLLOW_BATCH_EVENTS, SqliteSearchIndex } from '../../src/store/sqlite/search.js';
import { StoreClosedError } from '../../src/store/store-errors.js';
import { tempDbDir } from '../support/temp-db.js';

const dirs = tempDbDir('palimpsest-search-thread-');

function message(seq: number): SessionEvent {
  return { type: 'user/message', seq, time: 1_700_000_000_000 + seq, data: { id: `u${seq}`, role: 'user', content: [{ type: 'text', text: `needle${seq % 7} alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau` }], source: { kind: 'user' } }, surfaceOp: 'append' } as SessionEvent;
}

/** A store at a fresh path holding `sessions` sessions of `perSession` events, none indexed. */
async function backlog(sessions: number, perSession: number): Promise<{ path: string; store: SqliteSessionStore }> {
  const path = dirs.freshPath();
  const store = new SqliteSessionStore({ path });
  for (let s = 0; s < sessions; s++) {
    await store.createSession({ header: { version: 0, id: `s${s}`, createdAt: 1_700_000_000_000 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w' }, []);
    for (let from = 0; from < perSession; from += 500) {
      const events = Array.from({ length: Math.min(500, perSession - from) }, (_, i) => message(from + i));
      const r = await store.append(`s${s}`, { expectedNextSeq: from, expectedWriter: 'w', writer: 'w', events, surfaceLength: from + events.length });
      expect(r.kind).toBe('appended');
    }
  }
  return { path, store };
}

describe('SQLite search follower: failures (review)', () => {
  it('a damaged row (data that does not parse) is indexed with empty text: the follower moves on and indexes the rest', async () => {
    const { path, store } = await backlog(2, 30);
    const raw = new Database(path);
    raw.prepare("UPDATE events SET data = '{not json' WHERE session_id = 's0' AND seq = 4").run();
    raw.close();
    const index = new SqliteSearchIndex(path);
    expect(await new SearchFollower(index).catchUp(30_000)).toBe(true);
    expect(await index.lag()).toEqual({ events: 0, seconds: 0 });
    const app = new SessionService(store);
    app.search.useIndex(index, { follow: false });
    // s1 (after s0's damaged row) is indexed: needle4 is in seqs 4, 11, 18, 25 of each session.
    const hits = (await app.search.search({ tenant: '' }, { query: 'needle4', pageSize: 20 })).hits.map((h) => `${h.sessionId}@${h.seq}`).sort();
    expect(hits).toEqual(['s0@11', 's0@18', 's0@25', 's1@11', 's1@18', 's1@25', 's1@4'].sort());
    await app.close();
  });

  it('a batch that fails ends a search\'s catch-up (reported), and the search answers from the index as it is', async () => {
    const { path, store } = await backlog(1, 10);
    const index = new SqliteSearchIndex(path);
    const errors: unknown[] = [];
    const app = new SessionService(store);
    app.search.useIndex(index, { follow: false, onError: (e) => errors.push(e) });
    expect((await app.search.search({ tenant: '' }, { query: 'needle1', pageSize: 5 })).hits.map((h) => h.seq)).toEqual([8, 1]);
    await store.append('s0', { expectedNextSeq: 10, expectedWriter: 'w', writer: 'w', events: [message(10)], surfaceLength: 11 });
    index.followBatch = () => Promise.reject(new Error('the follower thread cannot open the file'));
    // Not yet indexed (the batch failed): answered from the index as it is, the failure reported.
    expect((await app.search.search({ tenant: '' }, { query: 'needle3', pageSize: 5 })).hits.map((h) => h.seq)).toEqual([3]);
    expect(errors.map((e) => (e as Error).message)).toEqual(['the follower thread cannot open the file']);
    await app.close();
  });
});

describe('SQLite search follower: events of other types', () => {
  it('passes over events it does not index without spending the batch on them (one batch for 3,000 ticks and 5 messages)', async () => {
    const path = dirs.freshPath();
    const store = new SqliteSessionStore({ path });
    await store.createSession({ header: { version: 0, id: 't0', createdAt: 1_700_000_000_000 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w' }, []);
    const tick = (seq: number): SessionEvent => ({ type: 'plugin/tick', seq, time: 1_700_000_000_000 + seq, data: { n: seq } } as SessionEvent);
    const events = Array.from({ length: 3005 }, (_, i) => (i % 601 === 600 ? message(i) : tick(i)));
    expect((await store.append('t0', { expectedNextSeq: 0, expectedWriter: 'w', writer: 'w', events, surfaceLength: 5 })).kind).toBe('appended');
    const index = new SqliteSearchIndex(path);
    const batch = await index.followBatch(200);
    expect(batch).toMatchObject({ events: 5, caughtUp: true });
    expect(await index.lag()).toEqual({ events: 0, seconds: 0 });
    expect(await index.verifyIndex()).toEqual({ events: 5, problems: [] });
    await index.close();
    await store.close();
  });

  it('bounds what one batch passes over too: 25,000 ticks take three batches of 200 (x50 passed over), then the message is found', async () => {
    const path = dirs.freshPath();
    const store = new SqliteSessionStore({ path });
    await store.createSession({ header: { version: 0, id: 't1', createdAt: 1_700_000_000_000 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w' }, []);
    const tick = (seq: number): SessionEvent => ({ type: 'plugin/tick', seq, time: 1_700_000_000_000 + seq, data: { n: seq } } as SessionEvent);
    for (let from = 0; from < 25_000; from += 5000) {
      const events = Array.from({ length: 5000 }, (_, i) => tick(from + i));
      expect((await store.append('t1', { expectedNextSeq: from, expectedWriter: 'w', writer: 'w', events, surfaceLength: 0 })).kind).toBe('appended');
    }
    expect((await store.append('t1', { expectedNextSeq: 25_000, expectedWriter: 'w', writer: 'w', events: [message(25_000)], surfaceLength: 1 })).kind).toBe('appended');
    const index = new SqliteSearchIndex(path);
    const batches = [];
    for (let i = 0; i < 4; i++) batches.push(await index.followBatch(200));
    expect(batches.map((b) => [b.events, b.caughtUp])).toEqual([[0, false], [0, false], [1, true], [0, true]]);
    expect(await index.verifyIndex()).toEqual({ events: 1, problems: [] });
    await index.close();
    await store.close();
  });
});

describe('SQLite search follower thread', () => {
  it('indexes a large backlog in its worker thread while the event loop stays free', async () => {
    const { path, store } = await backlog(4, 1500);
    const index = new SqliteSearchIndex(path);
    const follower = new SearchFollower(index);
    let maxGap = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
    }, 1);
    const before = performance.eventLoopUtilization();
    expect(await follower.catchUp(60_000)).toBe(true);
    const elu = performance.eventLoopUtilization(before);
    clearInterval(timer);
    // The batches ran on another thread: this one only posted them and waited (indexing 6,000
    // events on this thread keeps it busy for their whole duration, utilization near 1).
    expect(index.followThread?.threadId).toBeGreaterThan(0);
    expect(elu.utilization).toBeLessThan(0.5);
    expect(maxGap).toBeLessThan(250);
    expect(await index.verifyIndex()).toEqual({ events: 6000, problems: [] });
    const app = new SessionService(store);
    app.search.useIndex(index, { follow: false });
    const page = await app.search.search({ tenant: '' }, { query: 'needle3', pageSize: 5 });
    expect(page.hits).toHaveLength(5);
    await app.close();
    expect(index.followThread?.running).toBe(false);
  });

  it('a batch covers at most its share of events, even within one session', async () => {
    const { path, store } = await backlog(1, 1000);
    // The default cap (SQLITE_FOLLOW_BATCH_EVENTS) is above this backlog: a smaller one, set.
    expect(SQLITE_FOLLOW_BATCH_EVENTS).toBeGreaterThan(300);
    const index = new SqliteSearchIndex(path, { inProcess: true, maxBatchEvents: 300 });
    const sizes: number[] = [];
    for (;;) {
      const r = await index.followBatch(10_000);
      sizes.push(r.events);
      if (r.caughtUp) break;
    }
    expect(Math.max(...sizes)).toBe(300);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(1000);
    expect(await index.verifyIndex()).toEqual({ events: 1000, problems: [] });
    expect(await index.lag()).toMatchObject({ events: 0 });
    await index.close();
    await store.close();
  });

  it('closing during indexing ends the thread once its batch is answered', async () => {
    const { path, store } = await backlog(4, 1500);
    const app = new SessionService(store);
    const index = new SqliteSearchIndex(path);
    app.search.useIndex(index);
    // The background loop has started its first batch in the thread.
    const follower = app.search.follower!;
    const catching = follower.catchUp(60_000).then(() => 'done', (e: unknown) => e);
    expect(index.followThread?.running).toBe(true);
    await app.close();
    expect(index.followThread?.running).toBe(false);
    const outcome = await catching;
    // Either its batches finished before the close, or the close refused the next one.
    expect(outcome === 'done' || outcome instanceof StoreClosedError).toBe(true);
    await expect(index.followBatch(100)).rejects.toBeInstanceOf(StoreClosedError);
  });
});

describe('SQLite search follower thread failures', () => {
  it('a thread that dies fails the batch it owes; the next batch starts a new thread', async () => {
    const { path, store } = await backlog(1, 300);
    const { Worker } = await import('node:worker_threads');
    const { startThread } = await import('../../src/store/sqlite/append-thread.js');
    const { SearchFollowThread } = await import('../../src/store/sqlite/search-follow-thread.js');
    const { SqliteSearchIndex } = await import('../../src/store/sqlite/search.js');
    // The index file is created by the index's opening (search-file.ts); the thread only opens it.
    await new SqliteSearchIndex(path, { inProcess: true }).close();
    let starts = 0;
    const thread = new SearchFollowThread({ path, busyTimeoutMs: 5000 }, (c) => (++starts === 1 ? new Worker('process.exit(3)', { eval: true }) : startThread('search-follow-worker', c)));
    await expect(thread.followBatch(100)).rejects.toThrow(/exit code 3/);
    expect(thread.running).toBe(false);
    expect(await thread.followBatch(1000)).toEqual({ events: 300, caughtUp: true });
    expect(starts).toBe(2);
    await thread.close();
    expect(thread.running).toBe(false);
    await store.close();
  });

  it('a file the thread cannot open fails the batch with the reason', async () => {
    const { SearchFollowThread } = await import('../../src/store/sqlite/search-follow-thread.js');
    const thread = new SearchFollowThread({ path: `${dirs.freshPath()}-missing`, busyTimeoutMs: 100 });
    await expect(thread.followBatch(100)).rejects.toThrow(/search follower thread: .*(unable to open|does not exist|directory)/i);
    await thread.close();
    expect(thread.running).toBe(false);
  });
});

describe('SQLite search follower after retention removed feed records', () => {
  it('makes up for them in bounded batches and moves the mark once every session is done', async () => {
    const { path, store } = await backlog(2, 300);
    const { default: Database } = await import('better-sqlite3');
    const raw = new Database(path);
    // Retention removed every record before the follower read them (feed-statements.ts does this).
    raw.exec("INSERT INTO feed_pruned (tenant, position) SELECT tenant, max(position) FROM feed GROUP BY tenant ON CONFLICT (tenant) DO UPDATE SET position = excluded.position; DELETE FROM feed;");
    raw.close();
    const index = new SqliteSearchIndex(path, { inProcess: true });
    const sizes: number[] = [];
    for (;;) {
      const r = await index.followBatch(10_000);
      sizes.push(r.events);
      if (r.caughtUp) break;
    }
    expect(Math.max(...sizes)).toBeLessThanOrEqual(SQLITE_FOLLOW_BATCH_EVENTS);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(600);
    expect(await index.verifyIndex()).toEqual({ events: 600, problems: [] });
    expect(await index.followBatch(10_000)).toEqual({ events: 0, caughtUp: true });
    await index.close();
    await store.close();
  });
});
