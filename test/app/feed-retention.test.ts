/**
 * Feed retention at the app tier (issue #35, memory store): the sweeper prunes records older than
 * `--feed-retention-days`; a subscription resuming after a pruned position is refused with
 * FEED_POSITION_EXPIRED (saying to relist and subscribe from_now), one resuming at the oldest kept
 * position still gets exactly the rest, and a subscriber left behind by a prune while catching up
 * ends with the same error instead of skipping records.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import { FeedRetention } from '../../src/app/feed-retention.js';
import type { FeedItem } from '../../src/app/session-feed.js';
import { DomainError } from '../../src/domain/errors.js';
import { MemoryDatabase, MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
const DAY = 86_400_000;
let app: SessionService;

beforeEach(() => {
  app = new SessionService(new MemorySessionStore({ database: new MemoryDatabase() }), DEFAULT_LIMITS, Date.now, undefined, undefined, undefined, { pageSize: 2 });
});
afterEach(async () => {
  await app.close();
});

async function rejection(p: Promise<unknown>): Promise<DomainError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error('expected a rejection');
}

const brief = (it: FeedItem | undefined): string => (it === undefined ? 'end' : it.kind === 'caught-up' ? 'caught-up' : `${it.change} head=${it.headSeq}`);

/** Six records for session s: created, then five appends. */
async function history(): Promise<number[]> {
  await app.createSession(ctx, { id: 's' });
  for (let i = 0; i < 5; i++) await app.append(ctx, 's', [user(`m${i}`)]);
  return (await app.store.readFeed({ tenant: '', after: 0, limit: 100 })).map((r) => r.position);
}

describe('feed retention (app)', () => {
  it('the sweeper prunes records older than the retention period and keeps the last; with 0 days it prunes nothing', async () => {
    const positions = await history();
    expect(await new FeedRetention(app.store, { days: 0 }).sweep()).toBe(0);
    expect(await new FeedRetention(app.store, { days: 7 }).sweep()).toBe(0);
    expect(await app.store.feedPrunedUpTo('')).toBe(0);
    expect(positions[0]).toBe(1);
    // Eight days later, everything is older than seven days.
    expect(await new FeedRetention(app.store, { days: 7, now: () => Date.now() + 8 * DAY }).sweep()).toBe(positions.length - 1);
    expect((await app.store.readFeed({ tenant: '', after: 0, limit: 100 })).map((r) => r.position)).toEqual([positions[positions.length - 1]]);
    expect(await app.store.feedEnd('')).toBe(positions[positions.length - 1]);
  });

  it('a resume after a pruned position is FEED_POSITION_EXPIRED; at the oldest kept position (or from_now) it gets exactly the rest', async () => {
    const positions = await history();
    // Keep the last three records (prune by hand: a prefix, as the stores do).
    const records = await app.store.readFeed({ tenant: '', after: 0, limit: 100 });
    const db = (app.store as MemorySessionStore & { database: MemoryDatabase }).database;
    expect(db.feeds.get('')).toHaveLength(6);
    db.feeds.get('')!.splice(0, 3);
    db.feedBase.set('', 3);
    expect(await app.store.feedPrunedUpTo('')).toBe(records[2]!.position);

    const expired = await rejection(app.sessionFeed.subscribe(ctx, { after: positions[1] }));
    expect(expired.reason).toBe('FEED_POSITION_EXPIRED');
    expect(expired.message).toMatch(/ListSessions/);
    expect(expired.message).toMatch(/from_now/);
    expect(expired.metadata).toMatchObject({ after: String(positions[1]), oldest: String(positions[3]) });

    // After the last pruned position: nothing is missing.
    const ok = await app.sessionFeed.subscribe(ctx, { after: positions[2] });
    const got: string[] = [];
    for (let i = 0; i < 4; i++) got.push(brief(await ok.next()));
    expect(got).toEqual(['appended head=2', 'appended head=3', 'appended head=4', 'caught-up']);
    ok.close();
    const now = await app.sessionFeed.subscribe(ctx, { fromNow: true });
    expect(brief(await now.next())).toBe('caught-up');
    now.close();
  });

  it('a subscriber catching up behind a prune ends with FEED_POSITION_EXPIRED instead of skipping records', async () => {
    await history();
    const sub = await app.sessionFeed.subscribe(ctx, { after: 0 });
    // The first page (2 records) is read; then everything but the last record is pruned.
    expect(brief(await sub.next())).toBe('created head=undefined');
    expect(await app.store.pruneFeed(Date.now() + DAY)).toBe(5);
    await sub.next(); // the second record of the page already read
    const err = await rejection(sub.next());
    expect(err.reason).toBe('FEED_POSITION_EXPIRED');
    expect(sub.open).toBe(false);
  });
});

describe('feed retention with positions shared by all tenants (SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-feed-retention-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a resume after a tenant\'s last pruned position is not expired although another tenant\'s records in between were pruned', async () => {
    const sq = new SessionService(new SqliteSessionStore({ path: join(dir, 'shared.db') }), DEFAULT_LIMITS, Date.now, undefined, undefined, undefined, { pageSize: 2 });
    try {
      const a = ctx;
      const b = { tenant: 'b' };
      // A at position 1; B writes 2 and 3; A writes 4.
      await sq.createSession(a, { id: 's' });
      await sq.createSession(b, { id: 's' });
      await sq.append(b, 's', [user('b0')]);
      await sq.append(a, 's', [user('a0')]);
      const mine = (await sq.store.readFeed({ tenant: '', after: 0, limit: 10 })).map((r) => r.position);
      expect(mine).toEqual([1, 4]);
      // The prune removes 1 and 2 (each tenant's last record stays).
      expect(await sq.store.pruneFeed(Date.now() + DAY)).toBe(2);
      expect(await sq.store.feedPrunedUpTo('')).toBe(1);
      expect(await sq.store.feedPrunedUpTo('b')).toBe(2);

      const sub = await sq.sessionFeed.subscribe(a, { after: 1 });
      expect([brief(await sub.next()), brief(await sub.next())]).toEqual(['appended head=0', 'caught-up']);
      sub.close();
      // B resuming after 1 did miss its pruned record 2.
      const expired = await rejection(sq.sessionFeed.subscribe(b, { after: 1 }));
      expect(expired.reason).toBe('FEED_POSITION_EXPIRED');
      expect(expired.metadata).toMatchObject({ after: '1', oldest: '3' });
    } finally {
      await sq.close();
    }
  });
});
