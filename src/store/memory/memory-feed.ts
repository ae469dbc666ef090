/**
 * The memory store's change feed (issue #35) and head watches: reads and retention of each
 * tenant's feed, kept by MemoryDatabase, and the watches told of new heads and feed records.
 */
import type { FeedQuery, FeedRecord, HeadWatch } from '../../app/store-port.js';
import type { MemoryDatabase } from './memory-database.js';

/** SessionStore.readFeed over `db`. */
export function readFeed(db: MemoryDatabase, query: FeedQuery): FeedRecord[] {
  const feed = db.feeds.get(query.tenant) ?? [];
  // Positions are dense: record i has position base + i + 1 (base: records pruned).
  const from = Math.max(0, Math.floor(query.after) - (db.feedBase.get(query.tenant) ?? 0));
  return feed.slice(from, from + Math.max(0, query.limit));
}

/** SessionStore.feedEnd over `db`. */
export function feedEnd(db: MemoryDatabase, tenant: string): number {
  return (db.feedBase.get(tenant) ?? 0) + (db.feeds.get(tenant)?.length ?? 0);
}

/** SessionStore.feedPrunedUpTo over `db`: positions are dense per tenant, the pruned ones 1..base. */
export function feedPrunedUpTo(db: MemoryDatabase, tenant: string): number {
  return db.feedBase.get(tenant) ?? 0;
}

/** SessionStore.pruneFeed over `db`. */
export function pruneFeed(db: MemoryDatabase, before: number): number {
  let removed = 0;
  for (const [tenant, feed] of db.feeds) {
    // A prefix, never the tenant's last record (where from_now and positions continue).
    let k = 0;
    while (k < feed.length - 1 && (feed[k] as FeedRecord).time < before) k++;
    if (k === 0) continue;
    feed.splice(0, k);
    db.feedBase.set(tenant, (db.feedBase.get(tenant) ?? 0) + k);
    removed += k;
  }
  return removed;
}

/** SessionStore.openHeadWatch over `db`: its watches, all stopped by close(). */
export function openHeadWatch(db: MemoryDatabase): HeadWatch {
  const watchers = db.watchers;
  const mine = new Set<() => void>();
  return {
    watch: (sessionId, onHead) => {
      const entry = { onHead };
      let set = watchers.get(sessionId);
      if (set === undefined) {
        set = new Set();
        watchers.set(sessionId, set);
      }
      set.add(entry);
      const stop = (): void => {
        mine.delete(stop);
        const s = watchers.get(sessionId);
        if (s === undefined) return;
        s.delete(entry);
        if (s.size === 0) watchers.delete(sessionId);
      };
      mine.add(stop);
      return stop;
    },
    watchFeed: (onChange) => {
      const entry = (tenant?: string): void => onChange(tenant);
      db.feedWatchers.add(entry);
      const stop = (): void => {
        mine.delete(stop);
        db.feedWatchers.delete(entry);
      };
      mine.add(stop);
      return stop;
    },
    close: async () => {
      for (const stop of [...mine]) stop();
    },
  };
}
