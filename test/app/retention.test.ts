/**
 * Retention (issue #17) at the app tier, over the memory store and the SQLite store: sessions
 * untouched for longer than --retention-days (or their palimpsest.dev/ttl-days label) are deleted
 * in small batches while appends continue between the batches; recently touched sessions, and
 * sessions whose label keeps them longer, stay; subscribers of a deleted session are told.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Retention, TTL_LABEL, retentionMs } from '../../src/app/retention.js';
import { DataCorruptedError } from '../../src/app/storage-error.js';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import type { SessionStore } from '../../src/app/store-port.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { user } from '../support/engine-harness.js';

const DAY = 86_400_000;
const NOW = 1_800_000_000_000;
const dir = mkdtempSync(join(tmpdir(), 'palimpsest-retention-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const services: SessionService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) await s.close();
});

describe('retentionMs', () => {
  it('takes the label over the server setting; ignores a malformed label', () => {
    expect(retentionMs({}, 0)).toBeUndefined();
    expect(retentionMs({}, 30)).toBe(30 * DAY);
    expect(retentionMs({ [TTL_LABEL]: '2' }, 30)).toBe(2 * DAY);
    expect(retentionMs({ [TTL_LABEL]: '2' }, 0)).toBe(2 * DAY);
    expect(retentionMs({ [TTL_LABEL]: 'soon' }, 30)).toBe(30 * DAY);
    expect(retentionMs({ [TTL_LABEL]: '0' }, 0)).toBeUndefined();
  });
});

describe.each([
  ['memory', (): SessionStore => new MemorySessionStore()],
  ['sqlite', (): SessionStore => new SqliteSessionStore({ path: join(dir, `r-${Math.random().toString(36).slice(2)}.db`) })],
])('Retention on the %s store', (_name, makeStore) => {
  it('deletes old sessions in batches while appends continue; keeps touched and label-kept sessions; tells subscribers', async () => {
    let clock = NOW - 40 * DAY;
    const app = new SessionService(makeStore(), DEFAULT_LIMITS, () => clock);
    services.push(app);
    // 23 sessions created 40 days ago: 20 untouched, one touched yesterday, one kept by its label, one expired by its label.
    for (let i = 0; i < 20; i++) await app.createSession(ANONYMOUS, { id: `old${i}` });
    await app.append(ANONYMOUS, 'old0', [user('hello')]);
    await app.createSession(ANONYMOUS, { id: 'touched' });
    await app.createSession(ANONYMOUS, { id: 'kept', labels: { [TTL_LABEL]: '100' } });
    clock = NOW - 3 * DAY;
    await app.createSession(ANONYMOUS, { id: 'short', labels: { [TTL_LABEL]: '2' } });
    clock = NOW - DAY;
    await app.append(ANONYMOUS, 'touched', [user('recent')]);
    clock = NOW;
    await app.createSession(ANONYMOUS, { id: 'live' });

    let told = false;
    const unsubscribe = app.feed.subscribe(app.storageKey(ANONYMOUS, 'old7'), {
      onCommit: () => undefined, onHead: () => undefined, onDeleted: () => { told = true; },
    });
    const order: string[] = [];
    const retention = new Retention(app, { retentionDays: 30, batchSize: 4, now: () => clock, onDeleted: () => order.push('delete') });
    let appending = true;
    const appends = (async () => {
      let n = 0;
      while (appending) {
        await app.append(ANONYMOUS, 'live', [user(`m${n++}`)]);
        order.push('append');
        // As requests do: each append arrives in its own event-loop turn.
        await new Promise((r) => setImmediate(r));
      }
      return n;
    })();
    const report = await retention.sweep();
    appending = false;
    const appended = await appends;
    unsubscribe();

    expect(report).toMatchObject({ examined: 24, deleted: 21 });
    expect(report.batches).toBeGreaterThanOrEqual(6);
    const left = (await app.listSessions(ANONYMOUS, { pageSize: 100 })).sessions.map((s) => s.record.header.id).sort();
    expect(left).toEqual(['kept', 'live', 'touched']);
    expect(told).toBe(true);
    // Appends ran between the delete batches and all of them committed.
    const first = order.indexOf('delete');
    const last = order.lastIndexOf('delete');
    expect(order.slice(first, last).filter((x) => x === 'append').length).toBeGreaterThan(0);
    expect((await app.getSession(ANONYMOUS, 'live')).eventCount).toBe(appended);
    // A second sweep finds nothing more to delete.
    expect(await retention.sweep()).toMatchObject({ deleted: 0, examined: 3 });
  });

  it('with no --retention-days and no label nothing is deleted', async () => {
    let clock = NOW - 400 * DAY;
    const app = new SessionService(makeStore(), DEFAULT_LIMITS, () => clock);
    services.push(app);
    await app.createSession(ANONYMOUS, { id: 'ancient' });
    clock = NOW;
    expect(await new Retention(app, { retentionDays: 0, now: () => clock }).sweep()).toMatchObject({ examined: 1, deleted: 0 });
    expect((await app.getSession(ANONYMOUS, 'ancient')).record.header.id).toBe('ancient');
  });
});

/**
 * Two sessions idle for 40 days, then a sweep during which the user of the newest one ('resumed',
 * examined first) appends at the point `RacingStore` chooses; the other ('idle') must be deleted.
 */
async function raceRetention(makeStore: (resume: () => Promise<void>) => MemorySessionStore): Promise<SessionService> {
  let clock = NOW - 40 * DAY;
  let resumed = false;
  const holder: { app?: SessionService } = {};
  const store = makeStore(async () => {
    resumed = true;
    expect((await holder.app!.append(ANONYMOUS, 'resumed', [user('back again')])).seqs).toEqual([1]);
  });
  const app = new SessionService(store, DEFAULT_LIMITS, () => clock);
  holder.app = app;
  services.push(app);
  await app.createSession(ANONYMOUS, { id: 'idle' });
  await app.append(ANONYMOUS, 'idle', [user('old')]);
  await app.createSession(ANONYMOUS, { id: 'resumed' });
  await app.append(ANONYMOUS, 'resumed', [user('old')]);
  clock = NOW;
  const report = await new Retention(app, { retentionDays: 30, now: () => clock }).sweep();
  expect(resumed).toBe(true);
  expect(report).toMatchObject({ examined: 2, deleted: 1 });
  expect((await app.listSessions(ANONYMOUS, { pageSize: 100 })).sessions.map((s) => s.record.header.id)).toEqual(['resumed']);
  // The acknowledged append is still there.
  expect((await app.getSession(ANONYMOUS, 'resumed')).eventCount).toBe(2);
  return app;
}

describe('Retention and an append racing its idle check', () => {
  it('keeps a session appended to between the idle check and the delete; deletes an idle one next to it', async () => {
    /** A store whose tail read (the idle check) lets an append land right after it read. */
    await raceRetention((resume) => {
      let pending: (() => Promise<void>) | undefined = resume;
      return new (class extends MemorySessionStore {
        override async readEvents(...args: Parameters<MemorySessionStore['readEvents']>): ReturnType<MemorySessionStore['readEvents']> {
          const tail = await super.readEvents(...args);
          const go = pending;
          pending = undefined;
          if (go !== undefined && args[1].direction === 'backward') await go();
          return tail;
        }
      })();
    });
  });

  it('keeps a session appended to during the delete call itself (the delete is conditional in the store)', async () => {
    /** A store whose delete lets an append commit first, as another replica's append would. */
    const app = await raceRetention((resume) => {
      let pending: (() => Promise<void>) | undefined = resume;
      return new (class extends MemorySessionStore {
        override async deleteSession(...args: Parameters<MemorySessionStore['deleteSession']>): ReturnType<MemorySessionStore['deleteSession']> {
          const go = pending;
          pending = undefined;
          if (go !== undefined) await go();
          return super.deleteSession(...args);
        }
      })();
    });
    // The next sweep (the session was just touched) keeps it too.
    expect(await new Retention(app, { retentionDays: 30, now: () => NOW }).sweep()).toMatchObject({ examined: 1, deleted: 0 });
  });
});

describe('Retention and a damaged session', () => {
  it('skips a session whose rows fail their checksums (logged) and deletes the expired ones after it', async () => {
    let clock = NOW - 40 * DAY;
    const errors: string[] = [];
    const store = new (class extends MemorySessionStore {
      override async readEvents(...args: Parameters<MemorySessionStore['readEvents']>): ReturnType<MemorySessionStore['readEvents']> {
        if (args[0] === 'damaged') throw new DataCorruptedError('damaged', 0, 'session damaged: the stored event at seq 0 failed its data checksum');
        return super.readEvents(...args);
      }
    })();
    const app = new SessionService(store, DEFAULT_LIMITS, () => clock);
    services.push(app);
    for (const id of ['old-1', 'damaged', 'old-2']) {
      await app.createSession(ANONYMOUS, { id });
      await app.append(ANONYMOUS, id, [user('old')]);
    }
    clock = NOW;
    const log = { info: () => undefined, error: (_o: object, msg: string) => void errors.push(msg) };
    const report = await new Retention(app, { retentionDays: 30, now: () => clock, log }).sweep();
    expect(report).toMatchObject({ examined: 3, deleted: 2 });
    expect(errors).toEqual(['retention: skipped a damaged session']);
    expect((await app.listSessions(ANONYMOUS, { pageSize: 100 })).sessions.map((s) => s.record.header.id)).toEqual(['damaged']);
  });
});
