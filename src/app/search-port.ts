/**
 * The search index port (issue #40). A store's index answers *candidates*: the events of one
 * tenant that match the query's terms and fields and the request's filters, in the requested
 * order. The app then applies what needs the session's surface (surface_only, include_shadowed),
 * builds snippets and pages (search-service.ts).
 *
 * Every implementation must find the same candidates for the same stored events: the memory
 * store's scan (scan-search-index.ts) is the reference, and test/integration/search-contract
 * compares SQLite and PostgreSQL with it.
 */
import type { SearchQuery } from '../domain/search-query.js';

/** Result order: newest first (time, then session key, then seq, all descending) or best score first. */
export type SearchOrder = 'newest' | 'score';

/** Where the next page of candidates starts. */
export type SearchCursor =
  /** Newest-first keyset: candidates strictly after this one in that order. */
  | { readonly kind: 'newest'; readonly time: number; readonly sessionId: string; readonly seq: number }
  /** Score order: candidates from this offset (scores move as the index changes; pages may then overlap or skip). */
  | { readonly kind: 'score'; readonly offset: number };

/** A candidate query. Session ids (filters and `session:` fields) are storage keys. */
export interface SearchCandidateQuery {
  /** Only sessions of this tenant ('' when auth is off), never pending ones. */
  readonly tenant: string;
  /** The parsed query, its `session:` values already storage keys. */
  readonly query: SearchQuery;
  /** Only these sessions (storage keys); empty = all of the tenant's. */
  readonly sessionIds: readonly string[];
  /** Only sessions with all these labels. */
  readonly labels: Readonly<Record<string, string>>;
  /** Only these event types; empty = all indexed types. */
  readonly types: readonly string[];
  /** Only events with time >= this (ms since epoch). */
  readonly fromTime?: number;
  /** Only events with time < this. */
  readonly toTime?: number;
  /** Only events that call this tool or answer a call to it. */
  readonly tool?: string;
  readonly order: SearchOrder;
  readonly after?: SearchCursor;
  /** At most this many candidates. */
  readonly limit: number;
}

/** One candidate event. */
export interface SearchCandidate {
  /** The session's storage key. */
  readonly sessionId: string;
  readonly seq: number;
  readonly type: string;
  readonly time: number;
  /** The event's searchable text (search-text.ts). */
  readonly text: string;
  /** Relevance, higher is better; comparable only within one store and one query. */
  readonly score: number;
  /** The event entered the surface (it has a surfaceOp). */
  readonly entered: boolean;
  /** The session holds a replace (so some entered events may be shadowed). */
  readonly sessionReplaced: boolean;
}

/** What `verifyIndex` found. */
export interface SearchIndexReport {
  /** Indexable events checked. */
  readonly events: number;
  /** Problems, e.g. `session s: seq 7 missing from the index`; empty when the index matches the events. */
  readonly problems: readonly string[];
}

/** How far a followed index is behind the store's events (`palimpsest_search_index_lag_*`). */
export interface SearchLag {
  /** Events appended to sessions whose feed records are not followed yet (non-message events included). */
  readonly events: number;
  /** Age of the oldest feed record not followed yet, in seconds; 0 when caught up. */
  readonly seconds: number;
}

/** What one follower batch did. */
export interface SearchFollowBatch {
  /** Events covered (the sessions' ranges followed, message or not). */
  readonly events: number;
  /** The index had followed the whole feed when the batch committed. */
  readonly caughtUp: boolean;
  /** Another indexer (a replica) holds the index: nothing was done, try again shortly. */
  readonly busy?: boolean;
}

/** The search index of a store. */
export interface SearchIndex {
  /**
   * A store whose index is kept by a follower of the session feed (search-follower.ts drives it):
   * indexes one batch of what the feed recorded since the index's mark, at least one record and
   * about `maxEvents` events, in one transaction.
   */
  followBatch?(maxEvents: number): Promise<SearchFollowBatch>;
  /** The follower's lag, read from the store. */
  lag?(): Promise<SearchLag>;
  /** Candidates in `query.order` after `query.after`, at most `query.limit`. */
  searchCandidates(query: SearchCandidateQuery): Promise<SearchCandidate[]>;
  /**
   * Rebuilds the index online, one session per transaction (readers and writers keep working;
   * a session being rebuilt is searchable by its old entries until its transaction commits).
   */
  reindex(onSession?: (sessionId: string, events: number) => void): Promise<{ sessions: number; events: number }>;
  /** Compares the index with the events (text, tools, flags) and reports every difference. */
  verifyIndex(): Promise<SearchIndexReport>;
  /** Releases what the index opened (not the store). */
  close(): Promise<void>;
}
