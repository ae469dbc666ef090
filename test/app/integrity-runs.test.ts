/**
 * Issue #33 item 1: a row missing from the middle of a session (removed from the file while the
 * server was stopped) is never served with a seq gap. Every read that returns a run of events
 * checks that its seqs follow each other (and, reading to the head, the session's count), answers
 * DATA_CORRUPTED, and from then on every use case refuses the session, including reads whose
 * run does not cross the gap; deleting the session clears it. The untouched session next to it
 * is served as before, and the same reads of an intact session pass.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import { DataCorruptedError } from '../../src/app/storage-error.js';
import { DomainError } from '../../src/domain/errors.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { user } from '../support/engine-harness.js';
import { tempDbDir } from '../support/temp-db.js';

const ctx = ANONYMOUS;
const dbs = tempDbDir('palimpsest-integrity-runs-');
const open: SessionService[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

function service(path: string): SessionService {
  const s = new SessionService(new SqliteSessionStore({ path }), DEFAULT_LIMITS);
  open.push(s);
  return s;
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection');
}

async function drain<T>(gen: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of gen) out.push(x);
  return out;
}

/** A file with sessions 'gap' and 'clean' of 10 events each; seq `missing` of 'gap' removed while stopped. */
async function fileWithGap(missing: number): Promise<string> {
  const path = dbs.freshPath();
  const s = service(path);
  for (const id of ['gap', 'clean']) {
    await s.createSession(ctx, { id });
    await s.append(ctx, id, Array.from({ length: 10 }, (_, i) => user(`${id}${i}`)));
  }
  await s.close();
  const raw = new Database(path);
  expect(raw.prepare('DELETE FROM events WHERE session_id = ? AND seq = ?').run('gap', missing).changes).toBe(1);
  raw.close();
  return path;
}

describe('a row missing from the middle of a session', () => {
  it('ListEvents over the gap answers DATA_CORRUPTED; then every read and append refuses the session, even away from the gap', async () => {
    const s = service(await fileWithGap(5));
    const e = await rejection(s.listEvents(ctx, 'gap', { direction: 'forward', pageSize: 100 }));
    expect(e).toBeInstanceOf(DataCorruptedError);
    expect((e as DataCorruptedError).sessionId).toBe('gap');
    expect(e.message).toMatch(/seq 5 is missing/);
    // A page that does not cross the gap, the surface, an append: all refused now.
    expect(await rejection(s.listEvents(ctx, 'gap', { fromSeq: 7, direction: 'forward', pageSize: 2 }))).toBeInstanceOf(DataCorruptedError);
    expect(await rejection(s.getSurface(ctx, 'gap'))).toBeInstanceOf(DataCorruptedError);
    expect(await rejection(s.append(ctx, 'gap', [user('more')]))).toBeInstanceOf(DataCorruptedError);
    expect(await rejection(s.getSession(ctx, 'gap'))).toBeInstanceOf(DataCorruptedError);
    // The untouched session is served as before.
    expect((await s.listEvents(ctx, 'clean', { direction: 'forward', pageSize: 100 })).events.map((x) => x.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect((await s.append(ctx, 'clean', [user('more')])).seqs).toEqual([10]);
  });

  it('a backward page over the gap and a page whose next seq skips it are refused too', async () => {
    const s = service(await fileWithGap(5));
    expect(await rejection(s.listEvents(ctx, 'gap', { fromSeq: 8, direction: 'backward', pageSize: 5 }))).toBeInstanceOf(DataCorruptedError);
    const t = service(await fileWithGap(5));
    expect(await rejection(t.listEvents(ctx, 'gap', { fromSeq: 2, direction: 'forward', pageSize: 3 }))).toBeInstanceOf(DataCorruptedError);
  });

  it('the missing head row is found by a read that reaches the head', async () => {
    const s = service(await fileWithGap(9));
    const e = await rejection(s.listEvents(ctx, 'gap', { fromSeq: 6, direction: 'forward', pageSize: 100 }));
    expect(e).toBeInstanceOf(DataCorruptedError);
    expect(e.message).toMatch(/the head is 9/);
  });

  it('an export refuses the session instead of yielding an incomplete log, and so does the cold open after it', async () => {
    const s = service(await fileWithGap(3));
    expect(await rejection(drain(s.exportJsonl(ctx, 'gap')))).toBeInstanceOf(DataCorruptedError);
    expect(await rejection(s.fork(ctx, 'gap', { childId: 'child' }))).toBeInstanceOf(DataCorruptedError);
    expect(await rejection(s.getSession(ctx, 'child'))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
    // The header, ten events and the metadata line (labels and the pairing guard, issue #35).
    expect((await drain(s.exportJsonl(ctx, 'clean'))).flat()).toHaveLength(12);
  });

  it('after the cold open refused it, ListEvents and export refuse it too', async () => {
    const s = service(await fileWithGap(4));
    expect(await rejection(s.getSurface(ctx, 'gap'))).toBeInstanceOf(DataCorruptedError);
    expect(await rejection(s.listEvents(ctx, 'gap', { fromSeq: 6, direction: 'forward', pageSize: 2 }))).toBeInstanceOf(DataCorruptedError);
    expect(await rejection(drain(s.scan(ctx, 'gap', 6)))).toBeInstanceOf(DataCorruptedError);
  });

  it('deleting the refused session clears it: the id can be created again', async () => {
    const s = service(await fileWithGap(5));
    await rejection(s.listEvents(ctx, 'gap', { direction: 'forward', pageSize: 100 }));
    expect(await s.deleteSession(ctx, 'gap')).toBe(true);
    await s.createSession(ctx, { id: 'gap' });
    expect((await s.append(ctx, 'gap', [user('again')])).seqs).toEqual([0]);
    expect((await s.listEvents(ctx, 'gap', { direction: 'forward' })).events.map((x) => x.seq)).toEqual([0]);
  });

  it('ListSessions keeps listing the refused session, marked damaged', async () => {
    const s = service(await fileWithGap(5));
    await rejection(s.listEvents(ctx, 'gap', { direction: 'forward', pageSize: 100 }));
    const listed = (await s.listSessions(ctx, {})).sessions;
    expect(listed.map((v) => [v.record.header.id, v.damaged === true]).sort()).toEqual([['clean', false], ['gap', true]]);
  });
});

describe('the same reads of intact sessions', () => {
  it('pages forward and backward, typed pages, scans and exports pass', async () => {
    const s = service(dbs.freshPath());
    await s.createSession(ctx, { id: 'ok' });
    await s.append(ctx, 'ok', Array.from({ length: 10 }, (_, i) => user(`ok${i}`)));
    expect((await s.listEvents(ctx, 'ok', { fromSeq: 2, direction: 'forward', pageSize: 3 })).nextSeq).toBe(5);
    expect((await s.listEvents(ctx, 'ok', { fromSeq: 8, direction: 'backward', pageSize: 5 })).nextSeq).toBe(3);
    expect((await s.listEvents(ctx, 'ok', { fromSeq: 20, direction: 'backward', pageSize: 100 })).events).toHaveLength(10);
    expect((await s.listEvents(ctx, 'ok', { fromSeq: 20, direction: 'forward', pageSize: 100 })).events).toHaveLength(0);
    expect((await s.listEvents(ctx, 'ok', { direction: 'forward', types: ['user/message'] })).events).toHaveLength(10);
    expect((await drain(s.scan(ctx, 'ok', 4))).flat().map((e) => e.seq)).toEqual([4, 5, 6, 7, 8, 9]);
    expect((await drain(s.exportJsonl(ctx, 'ok'))).flat()).toHaveLength(12);
    expect(await rejection(s.getSession(ctx, 'nope'))).toBeInstanceOf(DomainError);
  });
});

describe('a session missing from the database whose head is on record (issue #33 item 4)', () => {
  /** A file where session 'gone' (2 events, tenant 'acme') vanished from the database while the server was stopped. */
  async function fileWithoutSession(): Promise<string> {
    const path = dbs.freshPath();
    const s = service(path);
    const acme = { tenant: 'acme' };
    for (const id of ['gone', 'kept']) {
      await s.createSession(acme, { id });
      await s.append(acme, id, [user(`${id}0`), user(`${id}1`)]);
    }
    await s.close();
    const raw = new Database(path);
    raw.prepare("DELETE FROM events WHERE session_id = 'acme/gone'").run();
    expect(raw.prepare("DELETE FROM sessions WHERE id = 'acme/gone'").run().changes).toBe(1);
    raw.close();
    return path;
  }

  it('answers DATA_CORRUPTED (never NOT_FOUND) to reads, appends and a re-create, and ListSessions lists it as damaged', async () => {
    const s = service(await fileWithoutSession());
    const acme = { tenant: 'acme' };
    for (const call of [
      () => s.getSession(acme, 'gone'),
      () => s.listEvents(acme, 'gone', { direction: 'forward' }),
      () => s.getSurface(acme, 'gone'),
      () => s.append(acme, 'gone', [user('again')]),
      () => s.createSession(acme, { id: 'gone' }),
      () => drain(s.exportJsonl(acme, 'gone')),
    ]) {
      const e = await rejection(call());
      expect(e).toBeInstanceOf(DataCorruptedError);
      expect(e.message).toMatch(/is missing from the database but its recorded head is 1/);
    }
    const listed = (await s.listSessions(acme, {})).sessions.map((v) => [v.record.header.id, v.damaged === true]);
    expect(listed).toEqual([['kept', false], ['gone', true]]);
    // Another tenant does not see it; a label filter does not match it.
    expect((await s.listSessions({ tenant: 'other' }, {})).sessions).toEqual([]);
    expect((await s.listSessions(acme, { labels: { a: 'b' } })).sessions).toEqual([]);
    // Another tenant's id of the same name is another session.
    expect(await rejection(s.getSession({ tenant: 'other' }, 'gone'))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
  });

  it('deleting it clears it: the id can be created again and nothing lists it as damaged', async () => {
    const path = await fileWithoutSession();
    const s = service(path);
    const acme = { tenant: 'acme' };
    expect(await s.deleteSession(acme, 'gone')).toBe(true);
    expect(await rejection(s.getSession(acme, 'gone'))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
    await s.close();
    // Also after a restart (the delete is recorded).
    const t = service(path);
    await t.createSession(acme, { id: 'gone' });
    expect((await t.listSessions(acme, {})).sessions.map((v) => [v.record.header.id, v.damaged === true]).sort()).toEqual([['gone', false], ['kept', false]]);
  });
});
