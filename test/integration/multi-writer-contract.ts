/**
 * The multi-writer section of the store contract: several store instances over ONE database (for
 * SQLite two connections to one file, for memory two instances over one MemoryDatabase, for
 * PostgreSQL two pools on one database) racing on one session. They must behave exactly as one
 * store: conditional appends, pipelined batches, idempotency keys, quotas, pending imports and
 * head notifications. storeContract runs it when the harness has `database`; another store can
 * call {@link multiWriterContract} directly.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AppendOutcome, SessionStore } from '../../src/app/store-port.js';
import { IMPORTER, LONG_LEASE, WRITER0, ev, newSession, req } from './store-contract.js';

/** One database that any number of store instances can open. */
export interface SharedDatabase<S extends SessionStore> {
  /** Opens one more store instance over the database. */
  open(): Promise<S>;
  /** Removes the database, after every instance was closed (optional). */
  drop?(): Promise<void>;
}

/** Waits for `cond` to hold, polling on macrotasks (the head watches poll), failing after `ms`. */
async function eventually(cond: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Registers the multi-writer contract for a store whose `database()` opens a fresh shared database. */
export function multiWriterContract<S extends SessionStore>(name: string, database: () => Promise<SharedDatabase<S>>): void {
  describe(`${name}: multi-writer store contract (two instances over one database)`, () => {
    let db: SharedDatabase<S>;
    let a: S;
    let b: S;
    const extra: S[] = [];
    beforeEach(async () => {
      db = await database();
      a = await db.open();
      b = await db.open();
    });
    afterEach(async () => {
      for (const s of [a, b, ...extra.splice(0)]) await s.close();
      await db.drop?.();
    });

    it('conditional appends: 100 racing clients on both instances lose and duplicate nothing', async () => {
      await a.createSession(newSession('race'), []);
      const client = async (c: number): Promise<void> => {
        const store = c % 2 === 0 ? a : b;
        for (let attempt = 1; ; attempt++) {
          const { nextSeq, writer } = (await store.getSession('race'))!;
          const outcome = await store.append('race', req(nextSeq, [ev(nextSeq, 'note', { c })], {
            expectedWriter: writer, writer: `c${c}a${attempt}`, idempotency: { key: `k${c}`, requestHash: `h${c}` }, surfaceLength: c,
          }));
          if (outcome.kind === 'appended' || outcome.kind === 'duplicate') return;
          expect(outcome.kind).toBe('conflict');
          expect(attempt).toBeLessThan(2000);
        }
      };
      await Promise.all(Array.from({ length: 100 }, (_, c) => client(c)));
      for (const store of [a, b]) {
        const events = await store.readEvents('race', { fromSeq: 0, direction: 'forward', limit: 1000 });
        expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
        expect(new Set(events.map((e) => (e.data as { c: number }).c)).size).toBe(100);
        expect(events).toHaveLength(100);
        expect(await store.getSession('race')).toMatchObject({ nextSeq: 100, eventCount: 100 });
        const last = events[99]!;
        expect(await store.getIdempotent('race', `k${(last.data as { c: number }).c}`)).toEqual({
          seqs: [99], requestHash: `h${(last.data as { c: number }).c}`, surfaceLength: (last.data as { c: number }).c,
        });
      }
    });

    it("pipelined batches: a batch planned on a failed batch does not commit even when the head matches (the other instance's commit)", async () => {
      await a.createSession(newSession('pipe'), [ev(0)]);
      // B commits seq 1 first; A's pipeline (seq 1 on w0, seq 2 on A's seq-1 batch) must fail as a whole.
      expect(await b.append('pipe', req(1, [ev(1, 'note', { by: 'b' })], { writer: 'b1' }))).toEqual({ kind: 'appended' });
      const mine1 = a.append('pipe', req(1, [ev(1, 'note', { by: 'a' })], { writer: 'a1' }));
      const mine2 = a.append('pipe', req(2, [ev(2, 'note', { by: 'a' })], { expectedWriter: 'a1', writer: 'a2' }));
      expect(await mine1).toEqual({ kind: 'conflict', actualNextSeq: 2 });
      expect(await mine2).toEqual({ kind: 'conflict', actualNextSeq: 2 });
      // Both instances read the same head and token; a batch planned on them commits from either.
      expect(await a.getSession('pipe')).toMatchObject({ nextSeq: 2, writer: 'b1' });
      expect(await b.getSession('pipe')).toMatchObject({ nextSeq: 2, writer: 'b1' });
      expect(await a.append('pipe', req(2, [ev(2, 'note', { by: 'a' })], { expectedWriter: 'b1', writer: 'a3' }))).toEqual({ kind: 'appended' });
      const log = await b.readEvents('pipe', { fromSeq: 0, direction: 'forward', limit: 10 });
      expect(log.map((e) => [e.seq, e.data])).toEqual([[0, { turn: 0 }], [1, { by: 'b' }], [2, { by: 'a' }]]);
      // And a pipeline whose first batch commits continues on the other instance's view.
      const p1 = b.append('pipe', req(3, [ev(3)], { expectedWriter: 'a3', writer: 'b4' }));
      const p2 = b.append('pipe', req(4, [ev(4)], { expectedWriter: 'b4', writer: 'b5' }));
      expect([await p1, await p2]).toEqual([{ kind: 'appended' }, { kind: 'appended' }]);
      expect(await a.getSession('pipe')).toMatchObject({ nextSeq: 5, writer: 'b5' });
    });

    it('idempotency keys: the same key through both instances appends once; the replay answers the stored result on either', async () => {
      await a.createSession(newSession('idem'), []);
      const send = (store: S, writer: string): Promise<AppendOutcome> =>
        store.append('idem', req(0, [ev(0, 'note', { writer })], { writer, idempotency: { key: 'same', requestHash: 'h' }, surfaceLength: 1 }));
      const outcomes = await Promise.all([send(a, 'from-a'), send(b, 'from-b')]);
      expect(outcomes.filter((o) => o.kind === 'appended')).toHaveLength(1);
      const loser = outcomes.find((o) => o.kind !== 'appended')!;
      expect(['duplicate', 'conflict']).toContain(loser.kind);
      // Retried on what is stored, the loser gets the original result, whichever instance it asks.
      for (const store of [a, b]) {
        const { nextSeq, writer } = (await store.getSession('idem'))!;
        expect(await store.append('idem', req(nextSeq, [ev(nextSeq)], { expectedWriter: writer, idempotency: { key: 'same', requestHash: 'h' } }))).toEqual({
          kind: 'duplicate', result: { seqs: [0], requestHash: 'h', surfaceLength: 1 },
        });
        expect(await store.getIdempotent('idem', 'same')).toEqual({ seqs: [0], requestHash: 'h', surfaceLength: 1 });
      }
      expect(await b.readEvents('idem', { fromSeq: 0, direction: 'forward', limit: 10 })).toHaveLength(1);
    });

    it('session quota: 20 concurrent creates through both instances against a quota of 5 create exactly 5', async () => {
      const quota = { maxSessions: 5, maxBytes: 0 };
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).createSession(newSession(`q${i}`, { tenant: 'quota' }), [], quota)),
      );
      expect(outcomes.filter((o) => o.kind === 'created')).toHaveLength(5);
      for (const o of outcomes.filter((x) => x.kind !== 'created')) expect(o).toMatchObject({ kind: 'quota-exceeded', limitName: 'tenant_max_sessions', limit: 5 });
      expect((await a.listSessions({ tenant: 'quota', pageSize: 100 })).sessions).toHaveLength(5);
      expect(await b.getTenantUsage('quota')).toMatchObject({ sessions: 5 });
      expect(await a.getTenantUsage('quota')).toMatchObject({ sessions: 5 });
    });

    it('byte quota: concurrent appends through both instances never store more than the quota', async () => {
      const ids = ['ba', 'bb', 'bc'];
      for (const id of ids) await a.createSession(newSession(id, { tenant: 'bytes' }), []);
      const base = (await a.getTenantUsage('bytes')).dataBytes;
      const payload = { text: 'x'.repeat(200) };
      const per = JSON.stringify(payload).length;
      const maxBytes = base + per * 25 + per / 2;
      let refused = 0;
      const client = async (c: number): Promise<void> => {
        const store = c % 2 === 0 ? a : b;
        const id = ids[c % ids.length]!;
        for (let n = 0; n < 6; n++) {
          for (;;) {
            const { nextSeq, writer } = (await store.getSession(id))!;
            const o = await store.append(id, req(nextSeq, [ev(nextSeq, 'note', payload)], { expectedWriter: writer, quota: { tenant: 'bytes', maxBytes } }));
            if (o.kind === 'conflict') continue;
            if (o.kind === 'quota-exceeded') {
              expect(o).toMatchObject({ limitName: 'tenant_max_bytes', limit: maxBytes });
              expect(o.actual).toBeGreaterThan(maxBytes);
              refused++;
            } else expect(o.kind).toBe('appended');
            break;
          }
        }
      };
      await Promise.all(Array.from({ length: 12 }, (_, c) => client(c)));
      const usage = await b.getTenantUsage('bytes');
      expect(usage.dataBytes).toBeLessThanOrEqual(maxBytes);
      let sum = 0;
      let events = 0;
      for (const id of ids) {
        const s = (await a.getSession(id))!;
        sum += s.dataBytes;
        events += s.eventCount;
      }
      expect(usage.dataBytes).toBe(sum);
      expect(events).toBe(25);
      expect(refused).toBe(12 * 6 - 25);
    });

    it("pending imports: opening another instance leaves a live owner's import alone and removes an expired one", async () => {
      expect(await a.createSession(newSession('live-import', { pending: true }), [ev(0)])).toEqual({ kind: 'created' });
      expect(await a.createSession(newSession('dead-import', { pending: { owner: 'crashed', leaseUntil: 1 } }), [ev(0)])).toEqual({ kind: 'created' });
      const usage = await a.getTenantUsage('');
      expect(usage.sessions).toBe(2);
      const c = await db.open();
      extra.push(c);
      // The expired one is gone (its id is free again, its counters released), the live one is not.
      expect(await c.getTenantUsage('')).toMatchObject({ sessions: 1 });
      expect(await c.createSession(newSession('dead-import'), [])).toEqual({ kind: 'created' });
      expect(await c.createSession(newSession('live-import'), [])).toEqual({ kind: 'exists' });
      // The owner goes on importing through its own instance; another owner may not.
      expect(await a.appendPending('live-import', [ev(1)], { owner: IMPORTER, leaseUntil: LONG_LEASE })).toEqual({ kind: 'appended' });
      await expect(c.appendPending('live-import', [ev(2)], { owner: 'someone-else', leaseUntil: LONG_LEASE })).rejects.toThrow(/owned by another/);
      await expect(c.publishSession('live-import', 'someone-else')).rejects.toThrow(/owned by another/);
      await a.publishSession('live-import', IMPORTER);
      expect(await c.getSession('live-import')).toMatchObject({ nextSeq: 2, eventCount: 2 });
    });

    it("head watch: an instance hears the other's commits and deletes of a watched session", async () => {
      await a.createSession(newSession('watched'), []);
      const watch = b.openHeadWatch();
      const heads: (number | 'deleted')[] = [];
      const stop = watch.watch('watched', (h) => heads.push(h));
      try {
        expect(await a.append('watched', req(0, [ev(0), ev(1)], { writer: 'x1' }))).toEqual({ kind: 'appended' });
        await eventually(() => heads.includes(2), 5_000, 'head 2 reported');
        expect(await a.append('watched', req(2, [ev(2)], { expectedWriter: 'x1' }))).toEqual({ kind: 'appended' });
        await eventually(() => heads.includes(3), 5_000, 'head 3 reported');
        expect(await a.deleteSession('watched')).toBe(true);
        await eventually(() => heads.includes('deleted'), 5_000, 'deletion reported');
        // Reports are hints, never ahead of the store: each reported head was stored at the time.
        expect(heads.filter((h) => h !== 'deleted').every((h) => typeof h === 'number' && h <= 3)).toBe(true);
      } finally {
        stop();
        await watch.close();
      }
    });

    it('head watch: a session deleted and re-created by the other instance is reported deleted', async () => {
      await a.createSession(newSession('again', { createdAt: 1_000 }), [ev(0)]);
      const watch = b.openHeadWatch();
      const heads: (number | 'deleted')[] = [];
      const stop = watch.watch('again', (h) => heads.push(h));
      try {
        expect(await a.deleteSession('again')).toBe(true);
        expect(await a.createSession(newSession('again', { createdAt: 2_000 }), [ev(0), ev(1)])).toEqual({ kind: 'created' });
        await eventually(() => heads.includes('deleted'), 5_000, 'deletion reported');
      } finally {
        stop();
        await watch.close();
      }
    });

    it('reads through either instance see the writer token and head of the last commit, atomically', async () => {
      await a.createSession(newSession('tok', { writer: WRITER0 }), []);
      for (let i = 0; i < 10; i++) {
        const [w, r] = i % 2 === 0 ? [a, b] : [b, a];
        const before = (await r.getSession('tok'))!;
        expect(await w.append('tok', req(before.nextSeq, [ev(before.nextSeq)], { expectedWriter: before.writer, writer: `t${i}` }))).toEqual({ kind: 'appended' });
        expect(await r.getSession('tok')).toMatchObject({ nextSeq: i + 1, writer: `t${i}` });
      }
    });
  });
}
