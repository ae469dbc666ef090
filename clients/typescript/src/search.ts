/**
 * SearchEvents (issue #40, docs/search.md) for PalimpsestClient: the request built from options
 * named like the proto's fields, one page at a time (`searchPage`) or every hit across pages
 * (`PalimpsestClient.search`, an async generator that asks for the next page only when the caller
 * reads past the current one), and `snippetParts`, which cuts a hit's snippet at its matches.
 * The matches are offsets in Unicode code points (the same in every client and language), so they
 * are applied to the snippet's code points, never to its UTF-16 units.
 */
import { SearchOrder, type SearchEventsRequest, type SearchEventsResponse, type SearchHit, type SnippetRange } from './gen/palimpsest/v1/service.js';

export type { SearchHit, SnippetRange };

/** The filters and order of a search (every one optional; unset = no filter). */
export interface SearchOptions {
  /** Only sessions carrying every one of these labels. */
  readonly labels?: Readonly<Record<string, string>>;
  /** Only these sessions (at most 100). */
  readonly sessionIds?: readonly string[];
  /** Only these event types (user/message, assistant/message, tool/result, steering/message). */
  readonly eventTypes?: readonly string[];
  /** Only events at or after this time (a Date or Unix epoch milliseconds). */
  readonly startTime?: Date | number;
  /** Only events before this time (a Date or Unix epoch milliseconds). */
  readonly endTime?: Date | number;
  /** Only events that call this tool or are the result of a call to it. */
  readonly toolName?: string;
  /** Only events on the session's current surface (what the model still sees). */
  readonly surfaceOnly?: boolean;
  /** Also events a replace took off the surface (compacted or pruned). */
  readonly includeShadowed?: boolean;
  /** 'newest' (the default) or 'score' (best match first). */
  readonly order?: 'newest' | 'score';
  /** Hits per page (0 or unset = the server's default, 20). */
  readonly pageSize?: number;
}

/** One page of hits and the token of the next ('' on the last page). */
export interface SearchPage {
  readonly hits: SearchHit[];
  readonly nextPageToken: string;
}

const ORDERS = { newest: SearchOrder.SEARCH_ORDER_NEWEST, score: SearchOrder.SEARCH_ORDER_SCORE } as const;

function millis(t: Date | number | undefined): number | undefined {
  return t === undefined ? undefined : t instanceof Date ? t.getTime() : t;
}

/** The SearchEventsRequest of `query` and `opts` at `pageToken`. */
export function searchRequest(query: string, opts: SearchOptions = {}, pageToken = ''): SearchEventsRequest {
  const order = opts.order === undefined ? SearchOrder.SEARCH_ORDER_UNSPECIFIED : ORDERS[opts.order];
  if (order === undefined) throw new TypeError(`unknown order ${JSON.stringify(opts.order)}; use 'newest' or 'score'`);
  return {
    query, pageSize: opts.pageSize ?? 0, pageToken, labelSelector: { ...opts.labels }, sessionIds: [...(opts.sessionIds ?? [])],
    eventTypes: [...(opts.eventTypes ?? [])], startTime: millis(opts.startTime), endTime: millis(opts.endTime), toolName: opts.toolName ?? '',
    surfaceOnly: opts.surfaceOnly ?? false, includeShadowed: opts.includeShadowed ?? false, order,
  };
}

/** The page of a SearchEventsResponse. */
export function searchPageOf(res: SearchEventsResponse): SearchPage {
  return { hits: res.hits, nextPageToken: res.nextPageToken };
}

/** One piece of a snippet: matched text (`match: true`) or the text between matches. */
export interface SnippetPart {
  readonly text: string;
  readonly match: boolean;
}

/**
 * The hit's snippet cut at its matches, in order (ranges out of order, overlapping or past the end
 * are clamped, so the parts always join back to the snippet).
 */
export function snippetParts(hit: Pick<SearchHit, 'snippet' | 'matches'>): SnippetPart[] {
  const points = [...hit.snippet];
  const out: SnippetPart[] = [];
  let at = 0;
  for (const m of [...hit.matches].sort((a, b) => a.start - b.start)) {
    const start = Math.max(at, Math.min(m.start, points.length));
    const end = Math.max(start, Math.min(m.end, points.length));
    if (start > at) out.push({ text: points.slice(at, start).join(''), match: false });
    if (end > start) out.push({ text: points.slice(start, end).join(''), match: true });
    at = end;
  }
  if (at < points.length) out.push({ text: points.slice(at).join(''), match: false });
  return out;
}
