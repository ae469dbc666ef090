/**
 * Appends plan on a replica's cached state without re-reading the session row first (one store
 * round trip less per append): two SessionService instances over one memory store show that a
 * plan rejected only because the other instance moved the session is re-checked and succeeds, that
 * a request wrong on the fresh state is still rejected with its reason and leaves the log as it
 * was, and that a moved head alone is a conflict and a re-plan.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService, DEFAULT_LIMITS } from '../../src/app/session-service.js';
import { DomainError } from '../../src/domain/errors.js';
import { MemoryDatabase, MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
let database: MemoryDatabase;
let services: SessionService[];
let storeA: MemorySessionStore;
let a: SessionService;
let b: SessionService;

beforeEach(async () => {
  database = new MemoryDatabase();
  storeA = new MemorySessionStore({ database });
  a = new SessionService(storeA, DEFAULT_LIMITS, Date.now);
  b = new SessionService(new MemorySessionStore({ database }), DEFAULT_LIMITS, Date.now);
  services = [a, b];
  await a.createSession(ctx, { id: 's' });
  await a.append(ctx, 's', [user('one')]);
  // A's cache is hot and idle at head 1; B moves the session on.
  await b.append(ctx, 's', [user('two'), user('three')]);
});
afterEach(async () => {
  for (const s of services) await s.close();
});

async function reason(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) return e.reason;
    throw e;
  }
  throw new Error('expected a rejection');
}

describe('appends on a stale cached state', () => {
  it('expected_last_seq matching the stored head (not the cached one) appends', async () => {
    expect((await a.append(ctx, 's', [user('four')], { expectedLastSeq: 2 })).seqs).toEqual([3]);
  });

  it("a replace of events only the other instance's commit added appends", async () => {
    const res = await a.append(ctx, 's', [user('summary', { op: 'replace', start: 1, end: 2 }, { sourceEventSeqs: [1, 2] })]);
    expect(res.seqs).toEqual([3]);
    expect((await b.getSurface(ctx, 's')).seqs).toEqual([0, 3]);
  });

  it('a request wrong on the fresh state is still rejected with its reason, and the log is untouched', async () => {
    expect(await reason(a.append(ctx, 's', [user('x')], { expectedLastSeq: 0 }))).toBe('HEAD_MISMATCH');
    expect(await reason(a.append(ctx, 's', [user('y', { op: 'replace', start: 7, end: 8 }, { sourceEventSeqs: [7, 8] })]))).toBe('REPLACE_START_NOT_ON_SURFACE');
    expect((await b.getSession(ctx, 's')).eventCount).toBe(3);
    expect((await a.getSurface(ctx, 's')).seqs).toEqual([0, 1, 2]);
  });

  it('a plain append after the other instance moved the head re-plans on fresh state', async () => {
    const before = storeA.stats().commits;
    expect((await a.append(ctx, 's', [user('four')])).seqs).toEqual([3]);
    expect((await a.append(ctx, 's', [user('five')])).seqs).toEqual([4]);
    expect(storeA.stats().commits - before).toBe(2);
    expect((await b.getSurface(ctx, 's')).seqs).toEqual([0, 1, 2, 3, 4]);
  });
});
