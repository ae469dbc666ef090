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
