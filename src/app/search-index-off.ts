/**
 * The search index of a server started with `--search-index off` (issue #40): no index is kept
 * (no follower, no index file opened), and SearchEvents answers FAILED_PRECONDITION
 * SEARCH_INDEX_OFF saying how to turn it on. Appends then pay nothing for search.
 */
import { DomainError } from '../domain/errors.js';
import type { SearchCandidate, SearchIndex, SearchIndexReport } from './search-port.js';

/** What SEARCH_INDEX_OFF says. */
export const SEARCH_INDEX_OFF_MESSAGE =
  'search is turned off on this server (palimpsest serve --search-index off): restart it with --search-index on (the default) to use SearchEvents; the index is then built from the stored events online';

function off(): DomainError {
  return new DomainError('SEARCH_INDEX_OFF', SEARCH_INDEX_OFF_MESSAGE);
}

/** An index that refuses every search. */
export class SearchIndexOff implements SearchIndex {
  searchCandidates(): Promise<SearchCandidate[]> {
    return Promise.reject(off());
  }

  reindex(): Promise<{ sessions: number; events: number }> {
    return Promise.reject(off());
  }

  verifyIndex(): Promise<SearchIndexReport> {
    return Promise.reject(off());
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * The search index of a server that could not open its index at start for a cause that is no
 * damage (SQLite: its file's write lock held past the busy timeout, a read-only directory, a full
 * disk; the file is left as it is): the server runs, and SearchEvents answers FAILED_PRECONDITION
 * SEARCH_INDEX_UNAVAILABLE saying why and to restart once the cause is gone.
 */
export class SearchIndexUnavailable implements SearchIndex {
  readonly #message: string;

  constructor(cause: string) {
    this.#message = `search is unavailable on this server: ${cause}; restart the server once the cause is gone (the index is then built from the stored events online)`;
  }

  searchCandidates(): Promise<SearchCandidate[]> {
    return Promise.reject(this.#error());
  }

  reindex(): Promise<{ sessions: number; events: number }> {
    return Promise.reject(this.#error());
  }

  verifyIndex(): Promise<SearchIndexReport> {
    return Promise.reject(this.#error());
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  #error(): DomainError {
    return new DomainError('SEARCH_INDEX_UNAVAILABLE', this.#message);
  }
}
