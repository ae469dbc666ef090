/**
 * The shared state of the in-memory store: sessions and tenant counters of one "database" that
 * several MemorySessionStore instances may open (the in-process analogue of several processes on
 * one database file), and the head watchers of all of them.
 */
import type { FeedChangeKind, FeedRecord, IdempotentResult } from '../../app/store-port.js';
import type { SessionHeader } from '../../domain/event.js';
import type { EventLog } from './event-log.js';
import { MemoryBlobTable } from './memory-blobs.js';

/** One stored session. */
export interface MemorySession {
  header: SessionHeader;
  labels: Readonly<Record<string, string>>;
  tenant: string;
  strict: boolean;
  pairingGuard: boolean;
  pending: { owner: string; leaseUntil: number } | undefined;
  writer: string;
  nextSeq: number;
  dataBytes: number;
  /** Surface length after the last append (the feed's `surfaceLength`). */
  surfaceLength: number;
  /** Version of the labels (0 at create, one more per updateLabels). */
  metadataVersion: number;
  /** Ascending by seq (gaps possible for imported logs). */
  readonly events: EventLog;
  readonly idempotency: Map<string, IdempotentResult>;
}

type HeadListener = (head: number | 'deleted') => void;

/** The shared state of one in-memory "database": any number of {@link MemorySessionStore} instances may open it. */
export class MemoryDatabase {
  /** @internal */ readonly sessions = new Map<string, MemorySession>();
  /** @internal */ readonly tenants = new Map<string, { sessions: number; dataBytes: number }>();
  /** @internal Head watchers by session id. */
  readonly watchers = new Map<string, Set<{ readonly onHead: HeadListener }>>();

  /** @internal The blobs (issue #39). */
  readonly blobs = new MemoryBlobTable();

  /** @internal Each tenant's feed (issue #35): record i has position feedBase + i + 1. */
  readonly feeds = new Map<string, FeedRecord[]>();
  /** @internal Feed watchers (HeadWatch.watchFeed) of every instance: told of every feed record. */
  readonly feedWatchers = new Set<(tenant?: string) => void>();
  /** @internal Records pruned from the front of each tenant's feed (feed retention). */
  readonly feedBase = new Map<string, number>();

  /** @internal Records a change of `session` in its tenant's feed (part of the write's own step). */
  record(id: string, session: MemorySession, kind: FeedChangeKind, extra: { eventTypes?: readonly string[]; previousLabels?: Readonly<Record<string, string>> } = {}): void {
    let feed = this.feeds.get(session.tenant);
    if (feed === undefined) {
      feed = [];
      this.feeds.set(session.tenant, feed);
    }
    feed.push(Object.freeze({
      position: (this.feedBase.get(session.tenant) ?? 0) + feed.length + 1,
      tenant: session.tenant,
      sessionId: id,
      kind,
      createdAt: session.header.createdAt,
      nextSeq: session.nextSeq,
      eventCount: session.events.length,
      surfaceLength: session.surfaceLength,
      eventTypes: Object.freeze([...(extra.eventTypes ?? [])]),
      labels: session.labels,
      previousLabels: extra.previousLabels,
      time: Date.now(),
    }));
    // A hint after the write's step, as a NOTIFY would arrive (listeners read by position).
    if (this.feedWatchers.size > 0) queueMicrotask(() => {
      for (const w of this.feedWatchers) w(session.tenant);
    });
  }

  /** @internal */
  tenant(name: string): { sessions: number; dataBytes: number } {
    let t = this.tenants.get(name);
    if (t === undefined) {
      t = { sessions: 0, dataBytes: 0 };
      this.tenants.set(name, t);
    }
    return t;
  }

  /**
   * @internal Tells the watchers that a session's head moved: every instance's, this one's too
   * (so two services over one store instance hear each other), later on a macrotask like a
   * notification from another process, never inside the writer's call (by then the writer's app
   * has published the batch itself, and its subscribers ignore the head).
   */
  changed(_writer: object, id: string, head: number | 'deleted'): void {
    const set = this.watchers.get(id);
    if (set === undefined) return;
    for (const w of set) {
      setImmediate(() => {
        if (set.has(w)) w.onHead(head);
      });
    }
  }
}
