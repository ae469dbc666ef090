/**
 * SearchEvents (issue #40): decode, call the app's search use case (src/app/search-service.ts),
 * encode. The query language, tenant scoping, surface filters and paging are the app's; the
 * index is the store's. Merged into the handler table by makeHandlers (handlers.ts).
 */
import type { SessionService } from '../app/session-service.js';
import type { SearchOrder as AppSearchOrder } from '../app/search-port.js';
import { DomainError } from '../domain/errors.js';
import { SearchOrder, type SearchEventsRequest, type SearchEventsResponse } from '../../gen/palimpsest/v1/service.js';
import { unary, type HandlerTable } from './rpc/handler-table.js';

function orderOf(o: SearchOrder): AppSearchOrder {
  switch (o) {
    case SearchOrder.SEARCH_ORDER_UNSPECIFIED:
    case SearchOrder.SEARCH_ORDER_NEWEST:
      return 'newest';
    case SearchOrder.SEARCH_ORDER_SCORE:
      return 'score';
    default:
      throw new DomainError('SEARCH_REQUEST_INVALID', `order ${String(o)} is not a SearchOrder this server knows`, { field: 'order' });
  }
}

function timeOf(v: number | undefined, field: string): number | undefined {
  if (v !== undefined && !Number.isSafeInteger(v)) throw new DomainError('SEARCH_REQUEST_INVALID', `${field} is not a safe integer of milliseconds`, { field });
  return v;
}

/** The SearchEvents handler. */
export function searchHandlers(app: SessionService): HandlerTable {
  return {
    searchEvents: unary<SearchEventsRequest, SearchEventsResponse>('read', async (ctx, r) => {
      const page = await app.search.search(ctx.caller, {
        query: r.query, pageSize: r.pageSize, pageToken: r.pageToken, labels: r.labelSelector, sessionIds: r.sessionIds,
        types: r.eventTypes, fromTime: timeOf(r.startTime, 'start_time'), toTime: timeOf(r.endTime, 'end_time'), tool: r.toolName,
        surfaceOnly: r.surfaceOnly, includeShadowed: r.includeShadowed, order: orderOf(r.order),
      });
      return {
        hits: page.hits.map((h) => ({
          sessionId: h.sessionId, seq: h.seq, type: h.type, time: h.time, snippet: h.snippet.text,
          matches: h.snippet.ranges.map((m) => ({ start: m.start, end: m.end })), score: h.score,
        })),
        nextPageToken: page.nextPageToken,
      };
    }),
  };
}
