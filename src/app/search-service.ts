/**
 * SearchEvents (issue #40): parses the query (one parser for every store), scopes it to the
 * caller's tenant (session ids become storage keys, so another tenant's sessions are neither
 * matched nor counted), asks the store's index for candidates, keeps those the surface filters
 * allow, and answers a page of hits with snippets.
 *
 * Surface filters need the session's current surface, which no index holds (a replace moves it):
 * - default: shadowed events (entered the surface, since replaced away: compacted or pruned) are
 *   left out; `include_shadowed` keeps them; `surface_only` keeps only what the model still sees.
 * - A session without any replace has nothing shadowed, and its surface is exactly the events that
 *   entered it: the index says so per candidate (`sessionReplaced`), and only sessions with a
 *   replace are opened (the hot-session cache: one structure read on a miss).
 */
import { DomainError } from '../domain/errors.js';
import { parseSearchQuery, type SearchField, type SearchQuery } from '../domain/search-query.js';
import { searchSnippet, type Snippet } from '../domain/search-match.js';
import { SEARCH_EVENT_TYPES } from '../domain/search-text.js';
import { checkPageSizeLimit, type AppLimits, type CallContext } from './app-types.js';
import type { SessionCache } from './session-cache.js';
import type { SearchCandidate, SearchCursor, SearchIndex, SearchLag, SearchOrder } from './search-port.js';
import { SearchFollower, type SearchFollowerOptions } from './search-follower.js';
import { storageKey } from './tenant-scope.js';

/** A SearchEvents request (see proto SearchEventsRequest). */
export interface SearchRequest {
  readonly query: string;
  readonly sessionIds?: readonly string[];
  readonly labels?: Readonly<Record<string, string>>;
  readonly types?: readonly string[];
  readonly fromTime?: number;
  readonly toTime?: number;
  readonly tool?: string;
  readonly surfaceOnly?: boolean;
  readonly includeShadowed?: boolean;
  readonly order?: SearchOrder;
  readonly pageSize?: number;
  readonly pageToken?: string;
}

/** One hit. */
export interface SearchHit {
  /** The client's session id. */
  readonly sessionId: string;
  readonly seq: number;
  readonly type: string;
  readonly time: number;
  readonly snippet: Snippet;
  readonly score: number;
}

/** A page of hits. */
export interface SearchPage {
  readonly hits: readonly SearchHit[];
  /** '' on the last page. */
  readonly nextPageToken: string;
}

/**
 * How long a search waits for the follower to index what was acknowledged before it (then it
 * answers from the index as it is; docs/search.md "Read your writes").
 */
export const SEARCH_CATCH_UP_MS = 2000;

/** Hits per page when page_size is 0. */
export const DEFAULT_SEARCH_PAGE_SIZE = 20;
/** Most session ids or types one request may name. */
export const MAX_SEARCH_FILTER_VALUES = 100;

function bad(field: string, message: string): DomainError {
  return new DomainError('SEARCH_REQUEST_INVALID', message, { field });
}

function encodeToken(order: SearchOrder, c: SearchCursor): string {
  return Buffer.from(JSON.stringify({ o: order, c })).toString('base64url');
}

function decodeToken(token: string, order: SearchOrder): SearchCursor {
  try {
    const v = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { o?: unknown; c?: Record<string, unknown> };
    const c = v.c;
    if (v.o === order && c !== undefined && c !== null) {
      const int = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
      if (c['kind'] === 'score' && int(c['offset'])) return { kind: 'score', offset: c['offset'] };
      if (c['kind'] === 'newest' && int(c['time']) && int(c['seq']) && typeof c['sessionId'] === 'string') {
        return { kind: 'newest', time: c['time'], seq: c['seq'], sessionId: c['sessionId'] };
      }
    }
  } catch {
    // fall through
  }
  throw new DomainError('INVALID_PAGE_TOKEN', 'page_token is not a token this server issued for this order; start again without it', { field: 'page_token' });
}

/** The client's id of a storage key of tenant `tenant`. */
function clientId(tenant: string, key: string): string {
  return tenant !== '' && key.startsWith(`${tenant}/`) ? key.slice(tenant.length + 1) : key;
}

/** The search use case over one index. */
export class SearchService {
  #follower: SearchFollower | undefined;

  constructor(
    private index: SearchIndex,
    private readonly cache: SessionCache,
    private readonly limits: AppLimits,
  ) {}

  /** The index in use (the composition root swaps the scan for a store's index). */
  get searchIndex(): SearchIndex {
    return this.index;
  }

  /** Serves searches from `index` from now on; an index kept by a follower gets its follower started. */
  useIndex(index: SearchIndex, options: SearchFollowerOptions & { readonly follow?: boolean; readonly onError?: (e: unknown) => void } = {}): void {
    void this.#follower?.stop();
    this.index = index;
    this.#follower = index.followBatch === undefined ? undefined : new SearchFollower(index as SearchIndex & Required<Pick<SearchIndex, 'followBatch'>>, options, options.onError);
    if (options.follow !== false) this.#follower?.start();
  }

  /** The follower of the index in use, if it has one. */
  get follower(): SearchFollower | undefined {
    return this.#follower;
  }

  /** How far the index is behind the events (zero for an index kept in the write or a scan). */
  async lag(): Promise<SearchLag> {
    return this.#follower ? this.#follower.lag() : { events: 0, seconds: 0 };
  }

  /** Stops the follower and closes the index. */
  async close(): Promise<void> {
    await this.#follower?.stop();
    await this.index.close();
  }

  /** Checks a request and answers one page (see the module comment). */
  async search(ctx: CallContext, req: SearchRequest): Promise<SearchPage> {
    const parsed = parseSearchQuery(req.query);
    const pageSize = req.pageSize || DEFAULT_SEARCH_PAGE_SIZE;
    checkPageSizeLimit(this.limits, pageSize);
    if (req.surfaceOnly === true && req.includeShadowed === true) {
      throw bad('include_shadowed', 'surface_only and include_shadowed exclude each other: the surface holds no shadowed event; set one');
    }
    const ids = req.sessionIds ?? [];
    const types = req.types ?? [];
    if (ids.length > MAX_SEARCH_FILTER_VALUES) throw bad('session_ids', `at most ${MAX_SEARCH_FILTER_VALUES} session ids`);
    if (types.length > MAX_SEARCH_FILTER_VALUES) throw bad('event_types', `at most ${MAX_SEARCH_FILTER_VALUES} event types`);
    for (const t of types) {
      if (!SEARCH_EVENT_TYPES.has(t)) throw bad('event_types', `event type ${JSON.stringify(t)} is not searchable; searchable: ${[...SEARCH_EVENT_TYPES].join(', ')}`);
    }
    if (req.fromTime !== undefined && req.toTime !== undefined && req.fromTime >= req.toTime) {
      throw bad('end_time', 'end_time must be after start_time');
    }
    // Read-your-writes: what was acknowledged before the call is indexed first (bounded wait; a
    // request refused above waits for nothing).
    if (this.#follower) await this.#follower.catchUp(SEARCH_CATCH_UP_MS);
    const order = req.order ?? 'newest';
    let cursor = req.pageToken ? decodeToken(req.pageToken, order) : undefined;
    const query: SearchQuery = {
      terms: parsed.terms,
      fields: parsed.fields.map((f): SearchField => (f.field === 'session' ? { ...f, value: storageKey(ctx.tenant, f.value) } : f)),
    };
    const base = {
      tenant: ctx.tenant, query, sessionIds: ids.map((id) => storageKey(ctx.tenant, id)), labels: req.labels ?? {}, types,
      fromTime: req.fromTime, toTime: req.toTime, tool: req.tool || undefined, order,
    };
    const hits: SearchHit[] = [];
    const surfaces = new Map<string, ReadonlySet<number> | null>();
    // Ask for a few more than a page: some may be filtered out by the surface.
    const batch = pageSize + 1;
    let offset = cursor?.kind === 'score' ? cursor.offset : 0;
    for (;;) {
      const candidates = await this.index.searchCandidates({ ...base, after: cursor, limit: batch });
      for (let i = 0; i < candidates.length; i++) {
        const c = candidates[i]!;
        if (hits.length === pageSize) {
          return { hits, nextPageToken: encodeToken(order, order === 'score' ? { kind: 'score', offset: offset + i } : cursor!) };
        }
        cursor = { kind: 'newest', time: c.time, sessionId: c.sessionId, seq: c.seq };
        if (!(await this.#keep(ctx, c, req, surfaces))) continue;
        hits.push({ sessionId: clientId(ctx.tenant, c.sessionId), seq: c.seq, type: c.type, time: c.time, snippet: searchSnippet(c.text, query.terms), score: c.score });
      }
      if (candidates.length < batch) return { hits, nextPageToken: '' };
      offset += candidates.length;
      if (order === 'score') cursor = { kind: 'score', offset };
    }
  }

  /** Applies the surface filters to a candidate. */
  async #keep(ctx: CallContext, c: SearchCandidate, req: SearchRequest, surfaces: Map<string, ReadonlySet<number> | null>): Promise<boolean> {
    if (req.includeShadowed === true) return true;
    if (!c.sessionReplaced) return req.surfaceOnly === true ? c.entered : true;
    if (!c.entered && req.surfaceOnly !== true) return true;
    let surface = surfaces.get(c.sessionId);
    if (surface === undefined) {
      try {
        surface = await this.cache.withRead(ctx, clientId(ctx.tenant, c.sessionId), (h) => new Set(h.engine.surface()));
      } catch (e) {
        // Deleted (or refused) since the index answered: its events are no hits.
        if (e instanceof DomainError) surface = null;
        else throw e;
      }
      surfaces.set(c.sessionId, surface);
    }
    return surface !== null && surface.has(c.seq);
  }
}
