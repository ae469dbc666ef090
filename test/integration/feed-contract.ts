/**
 * The session feed part of the store contract (issue #35): every store records each change of a
 * visible session in the transaction of the change, read back by position. Registered by
 * storeContract (store-contract.ts) for every implementation, and with two instances over one
 * database when the harness has one.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FeedRecord, SessionStore } from '../../src/app/store-port.js';
import type { SharedDatabase } from './multi-writer-contract.js';

type Helpers = {
  ev: (seq: number, type?: string) => import('../../src/domain/event.js').SessionEvent;
  newSession: (id: string, o?: { tenant?: string; labels?: Record<string, string>; createdAt?: number; pending?: boolean; writer?: string }) => import('../../src/app/store-port.js').NewSession;
  req: (expectedNextSeq: number, events: readonly import('../../src/domain/event.js').SessionEvent[], extra?: Partial<import('../../src/app/store-port.js').AppendRequest>) => import('../../src/app/store-port.js').AppendRequest;
  IMPORTER: string;
  LONG_LEASE: number;
};

async function all(store: SessionStore, tenant: string, after = 0): Promise<FeedRecord[]> {
  return store.readFeed({ tenant, after, limit: 10_000 });
}

/** What a record says, without its position and time. */
function gist(r: FeedRecord): Record<string, unknown> {
  return {
    kind: r.kind, sessionId: r.sessionId, nextSeq: r.nextSeq, eventCount: r.eventCount, surfaceLength: r.surfaceLength,
    eventTypes: [...r.eventTypes], labels: r.labels,
  };
}

export function feedContract<S extends SessionStore>(name: string, open: () => Promise<S>, h: Helpers, database?: () => Promise<SharedDatabase<S>>): void {
  describe(`${name}: session feed contract`, () => {
    let store: S;
    beforeEach(async () => {
      store = await open();
    });
    afterEach(async () => {
      await store.close();
    });

    it('records created, appended (head, count, surface length, types in order) and deleted, in commit order', async () => {
      const before = Date.now();
      expect(await store.feedEnd('')).toBe(0);
      await store.createSession(h.newSession('a', { labels: { team: 'x' } }), [h.ev(0, 'session/start')]);
      await store.append('a', h.req(1, [h.ev(1, 'turn/start'), h.ev(2, 'assistant/message'), h.ev(3, 'turn/start')], { surfaceLength: 2 }));
      await store.createSession(h.newSession('b'), []);
      await store.deleteSession('a');
      const records = await all(store, '');
      expect(records.map(gist)).toEqual([
        { kind: 'created', sessionId: 'a', nextSeq: 1, eventCount: 1, surfaceLength: 0, eventTypes: [], labels: { team: 'x' } },
        { kind: 'appended', sessionId: 'a', nextSeq: 4, eventCount: 4, surfaceLength: 2, eventTypes: ['turn/start', 'assistant/message'], labels: { team: 'x' } },
        { kind: 'created', sessionId: 'b', nextSeq: 0, eventCount: 0, surfaceLength: 0, eventTypes: [], labels: {} },
        { kind: 'deleted', sessionId: 'a', nextSeq: 4, eventCount: 4, surfaceLength: 2, eventTypes: [], labels: { team: 'x' } },
      ]);
      const positions = records.map((r) => r.position);
      expect(positions[0]).toBeGreaterThan(0);
      expect([...positions].sort((x, y) => x - y)).toEqual(positions);
      expect(new Set(positions).size).toBe(positions.length);
      expect(await store.feedEnd('')).toBe(positions[3]);
      for (const r of records) {
        expect(r.createdAt).toBe(1_000);
        expect(r.time).toBeGreaterThanOrEqual(before - 1000);
        expect(r.time).toBeLessThanOrEqual(Date.now() + 1000);
      }
      // Resume exactly after any position; a limit cuts the page.
      expect((await all(store, '', positions[1]!)).map((r) => r.position)).toEqual(positions.slice(2));
      expect((await store.readFeed({ tenant: '', after: 0, limit: 2 })).map((r) => r.position)).toEqual(positions.slice(0, 2));
      expect(await all(store, '', positions[3]!)).toEqual([]);
    });

    it('records nothing for a refused write (conflict, unknown session, existing id)', async () => {
      await store.createSession(h.newSession('a'), []);
      const end = await store.feedEnd('');
      expect((await store.append('a', h.req(5, [h.ev(5)]))).kind).toBe('conflict');
      expect((await store.append('nope', h.req(0, [h.ev(0)]))).kind).toBe('not-found');
      expect((await store.createSession(h.newSession('a'), [])).kind).toBe('exists');
      expect(await store.deleteSession('nope')).toBe(false);
      expect(await store.feedEnd('')).toBe(end);
      expect(await all(store, '', end)).toEqual([]);
    });

    it('an import in progress is invisible: created when published, nothing for its chunks or a dropped import', async () => {
      await store.createSession(h.newSession('imp', { pending: true }), [h.ev(0)]);
      await store.appendPending('imp', [h.ev(1), h.ev(2)], { owner: h.IMPORTER, leaseUntil: h.LONG_LEASE });
      await store.createSession(h.newSession('gone', { pending: true }), [h.ev(0)]);
      await store.deletePending('gone', h.IMPORTER);
      expect(await all(store, '')).toEqual([]);
      await store.publishSession('imp', h.IMPORTER);
      expect((await all(store, '')).map(gist)).toEqual([
        { kind: 'created', sessionId: 'imp', nextSeq: 3, eventCount: 3, surfaceLength: 0, eventTypes: [], labels: {} },
      ]);
    });

    it('a publish with metadata (an import trailer) makes the session visible with its labels, guard and bytes, recorded once as created', async () => {
      await store.createSession(h.newSession('imp2', { pending: true, tenant: 't9' }), [h.ev(0)]);
      const pendingUsage = await store.getTenantUsage('t9');
      const labels = { team: 'x', owner: 'me' };
      const delta = JSON.stringify(labels).length - JSON.stringify({}).length;
      await store.publishSession('imp2', h.IMPORTER, { labels, pairingGuard: true, bytesDelta: delta });
      expect(await store.getSession('imp2')).toMatchObject({ labels, pairingGuard: true, metadataVersion: 0 });
      expect(await store.getTenantUsage('t9')).toEqual({ sessions: pendingUsage.sessions, dataBytes: pendingUsage.dataBytes + delta });
      expect((await all(store, 't9')).map((r) => [r.kind, r.sessionId, r.labels])).toEqual([['created', 'imp2', labels]]);
    });

    it('keeps tenants apart: a tenant reads only its own records', async () => {
      await store.createSession(h.newSession('t1/a', { tenant: 't1' }), []);
      await store.createSession(h.newSession('t2/a', { tenant: 't2' }), []);
      await store.append('t2/a', h.req(0, [h.ev(0)]));
      expect((await all(store, 't1')).map((r) => [r.tenant, r.sessionId, r.kind])).toEqual([['t1', 't1/a', 'created']]);
      expect((await all(store, 't2')).map((r) => [r.tenant, r.sessionId, r.kind])).toEqual([['t2', 't2/a', 'created'], ['t2', 't2/a', 'appended']]);
      expect(await all(store, '')).toEqual([]);
      expect(await store.feedEnd('t3')).toBe(0);
    });

    it('updateLabels: a compare-and-set on the metadata version, counted in bytes, recorded as labels_changed', async () => {
      await store.createSession(h.newSession('a', { labels: { team: 'x' } }), [h.ev(0)]);
      const created = (await store.getSession('a'))!;
      expect(created.metadataVersion).toBe(0);
      const usage = await store.getTenantUsage('');
      const end = await store.feedEnd('');
      // Stale version: refused, nothing changed, nothing recorded.
      expect(await store.updateLabels('a', { team: 'y' }, 3)).toEqual({ kind: 'version-mismatch', actual: 0 });
      expect(await store.updateLabels('nope', { team: 'y' }, 0)).toEqual({ kind: 'not-found' });
      expect(await store.getSession('a')).toStrictEqual(created);
      expect(await store.feedEnd('')).toBe(end);
      // The expected version: replaced, version + 1, bytes moved by the labels' size change.
      expect(await store.updateLabels('a', { team: 'yy', owner: 'me' }, 0)).toEqual({ kind: 'updated' });
      const updated = (await store.getSession('a'))!;
      const delta = JSON.stringify({ team: 'yy', owner: 'me' }).length - JSON.stringify({ team: 'x' }).length;
      expect(updated).toStrictEqual({ ...created, labels: { team: 'yy', owner: 'me' }, metadataVersion: 1, dataBytes: created.dataBytes + delta });
      expect(await store.getTenantUsage('')).toEqual({ sessions: usage.sessions, dataBytes: usage.dataBytes + delta });
      expect(await store.updateLabels('a', {}, 0)).toEqual({ kind: 'version-mismatch', actual: 1 });
      const records = await all(store, '', end);
      expect(records.map((r) => [r.kind, r.sessionId, r.labels, r.previousLabels, r.nextSeq])).toEqual([
        ['labels_changed', 'a', { team: 'yy', owner: 'me' }, { team: 'x' }, 1],
      ]);
      // Listing by the new labels finds it; by the old ones not.
      expect((await store.listSessions({ labels: { owner: 'me' }, pageSize: 10 })).sessions.map((r) => r.header.id)).toEqual(['a']);
      expect((await store.listSessions({ labels: { team: 'x' }, pageSize: 10 })).sessions).toEqual([]);
    });

    it('an empty append (writer token only) records nothing', async () => {
      await store.createSession(h.newSession('a'), []);
      const end = await store.feedEnd('');
      expect((await store.append('a', h.req(0, []))).kind).toBe('appended');
      expect(await all(store, '', end)).toEqual([]);
    });
  });

  describe(`${name}: feed retention`, () => {
    let store: S;
    beforeEach(async () => {
      store = await open();
    });
    afterEach(async () => {
      await store.close();
    });

    it('pruneFeed removes the records older than the cutoff but each tenant\'s last; feedEnd stays, feedPrunedUpTo moves; a cutoff before everything removes nothing', async () => {
      expect(await store.feedPrunedUpTo('')).toBe(0);
      await store.createSession(h.newSession('a'), []);
      let writer = 'w0';
      const appendNext = async (seq: number): Promise<void> => {
        const r = h.req(seq, [h.ev(seq)], { expectedWriter: writer });
        writer = r.writer;
        expect((await store.append('a', r)).kind).toBe('appended');
      };
      for (let i = 0; i < 4; i++) await appendNext(i);
      await store.createSession(h.newSession('t1/b', { tenant: 't1' }), []);
      const records = await all(store, '');
      const other = await all(store, 't1');
      const end = await store.feedEnd('');
      expect(await store.feedPrunedUpTo('')).toBe(0);
      // Nothing is older than the first record: nothing removed.
      expect(await store.pruneFeed(records[0]!.time)).toBe(0);
      expect(await all(store, '')).toEqual(records);
      // Everything is older than a cutoff in the future: all but each tenant's last record.
      expect(await store.pruneFeed(Date.now() + 60_000)).toBe(records.length - 1);
      expect(await all(store, '')).toEqual([records[records.length - 1]]);
      expect(await all(store, 't1')).toEqual(other);
      expect(await store.feedEnd('')).toBe(end);
      expect(await store.feedPrunedUpTo('')).toBe(records[records.length - 2]!.position);
      // Positions continue after the kept record; reads after it are exact.
      await appendNext(4);
      const next = await all(store, '', end);
      expect(next.map((r) => [r.kind, r.nextSeq])).toEqual([['appended', 5]]);
      expect(next[0]!.position).toBeGreaterThan(end);
      expect(await store.feedPrunedUpTo('')).toBe(records[records.length - 2]!.position);
    });

    it('two tenants: a reader after a tenant\'s last pruned record missed nothing, wherever the other tenant\'s positions fall', async () => {
      // A's first record; B writes two; A writes again (on SQLite positions 1, 2, 3, 4).
      await store.createSession(h.newSession('a'), []);
      await store.createSession(h.newSession('t1/b', { tenant: 't1' }), []);
      const r = h.req(0, [h.ev(0)]);
      expect((await store.append('t1/b', r)).kind).toBe('appended');
      expect((await store.append('a', h.req(0, [h.ev(0)]))).kind).toBe('appended');
      const [a1, a2] = await all(store, '');
      const [b1, b2] = await all(store, 't1');
      expect(await store.feedPrunedUpTo('t1')).toBe(0);
      // Everything but each tenant's last record: A's first and B's first go.
      expect(await store.pruneFeed(Date.now() + 60_000)).toBe(2);
      expect(await store.feedPrunedUpTo('')).toBe(a1!.position);
      expect(await store.feedPrunedUpTo('t1')).toBe(b1!.position);
      // A after its first record (exactly the mark: nothing missed) reads the rest complete.
      expect(await all(store, '', a1!.position)).toEqual([a2]);
      expect(await all(store, 't1', b1!.position)).toEqual([b2]);
      // A later prune with nothing more to remove keeps the marks.
      expect(await store.pruneFeed(Date.now() + 60_000)).toBe(0);
      expect(await store.feedPrunedUpTo('')).toBe(a1!.position);
    });
  });

  if (database === undefined) return;
  describe(`${name}: session feed across two instances over one database`, () => {
    let db: SharedDatabase<S>;
    let a: S;
    let b: S;
    beforeEach(async () => {
      db = await database();
      a = await db.open();
      b = await db.open();
    });
    afterEach(async () => {
      await a.close();
      await b.close();
      await db.drop?.();
    });

    it('both instances read one feed with every change of either, positions ascending, heads in order', async () => {
      await a.createSession(h.newSession('x'), []);
      await b.createSession(h.newSession('y'), []);
      const appends: Promise<unknown>[] = [];
      // Concurrent appends through both instances, several per session.
      let nextX = 0;
      let nextY = 0;
      let wx = 'w0';
      let wy = 'w0';
      for (let i = 0; i < 10; i++) {
        const rx = h.req(nextX, [h.ev(nextX)], { expectedWriter: wx });
        wx = rx.writer;
        nextX++;
        const ry = h.req(nextY, [h.ev(nextY)], { expectedWriter: wy });
        wy = ry.writer;
        nextY++;
        appends.push((i % 2 === 0 ? a : b).append('x', rx), (i % 2 === 0 ? b : a).append('y', ry));
      }
      const outcomes = await Promise.all(appends);
      const appended = outcomes.filter((o) => (o as { kind: string }).kind === 'appended').length;
      await b.deleteSession('x');
      const fromA = await all(a, '');
      const fromB = await all(b, '');
      expect(fromB).toEqual(fromA);
      const positions = fromA.map((r) => r.position);
      expect([...positions].sort((p, q) => p - q)).toEqual(positions);
      expect(fromA.filter((r) => r.kind === 'appended')).toHaveLength(appended);
      for (const id of ['x', 'y']) {
        const heads = fromA.filter((r) => r.sessionId === id && r.kind === 'appended').map((r) => r.nextSeq);
        expect([...heads].sort((p, q) => p - q)).toEqual(heads);
        expect(new Set(heads).size).toBe(heads.length);
      }
      expect(fromA[fromA.length - 1]).toMatchObject({ kind: 'deleted', sessionId: 'x' });
      expect(await a.feedEnd('')).toBe(positions[positions.length - 1]);
    });
  });
}
