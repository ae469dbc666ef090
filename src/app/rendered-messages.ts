/**
 * GetMessages in a provider's format (issue #34): the model history (now or as of a seq) rendered
 * by the domain renderer of the format, paged by position over the rendered messages with the
 * model-history page tokens (stale after a replace, as for the DSH shape). The rendering of a page
 * renders the whole history (a provider message may merge several DSH messages, so positions only
 * exist after rendering); bench/provider.bench.ts measures it against the DSH shape.
 *
 * The last rendering of each recently read (session, format) is kept (at most RENDER_CACHE
 * entries): a read whose model history holds the very same message objects (the projection keeps
 * them across reads; an append or a replace changes the list) answers it again, so paging through
 * a rendered history renders it once, and the rendered objects keep their cached JSON text. A
 * history that only grew since (appends) re-renders from the last safe cut only
 * (domain/render/incremental.ts).
 */
import { DomainError } from '../domain/errors.js';
import type { MessageJson } from '../domain/message-view.js';
import { renderHistory, type HistoryEntry, type ProviderFormat, type RenderedMessage } from '../domain/render/index.js';
import { renderExtended } from '../domain/render/incremental.js';
import { checkPageSizeLimit, type AppLimits, type CallContext } from './app-types.js';
import { decodeMessagesToken, encodeMessagesToken, staleMessagesToken } from './message-pages.js';
import type { Reads } from './reads.js';

/** How many (session, format) renderings are kept. */
const RENDER_CACHE = 64;

interface CachedRendering {
  readonly entries: readonly HistoryEntry[];
  readonly rendered: RenderedMessage[];
}

const renderings = new Map<string, CachedRendering>();

function sameEntries(a: readonly HistoryEntry[], b: readonly HistoryEntry[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.message !== b[i]!.message || a[i]!.seq !== b[i]!.seq) return false;
  return true;
}

/**
 * The rendering of `entries` for the key: the cached one when the history is unchanged, else one
 * that reuses it when the history only grew (renderExtended), else a fresh one.
 */
function rendering(key: string, entries: readonly HistoryEntry[], format: ProviderFormat, dropUnpaired: boolean | undefined): RenderedMessage[] {
  const hit = renderings.get(key);
  renderings.delete(key);
  if (hit !== undefined && sameEntries(hit.entries, entries)) {
    renderings.set(key, hit);
    return hit.rendered;
  }
  const rendered = renderExtended(format, entries, hit, { dropUnpaired });
  renderings.set(key, { entries, rendered });
  if (renderings.size > RENDER_CACHE) renderings.delete(renderings.keys().next().value as string);
  return rendered;
}

/** One page of rendered messages. */
export interface RenderedPage {
  readonly messages: RenderedMessage[];
  readonly headSeq: number | undefined;
  /** '' on the last page. */
  readonly nextPageToken: string;
}

/** What a rendered GetMessages asks for. */
export interface RenderedQuery {
  readonly format: ProviderFormat;
  readonly pageSize: number;
  readonly pageToken: string;
  readonly asOfSeq?: number;
  /** Omit orphan results and answer unanswered calls instead of HISTORY_NOT_RENDERABLE. */
  readonly dropUnpaired?: boolean;
}

/**
 * One page of the model history rendered for `q.format`.
 *
 * @throws DomainError HISTORY_NOT_RENDERABLE, PAGE_SIZE_TOO_LARGE, INVALID_PAGE_TOKEN, PAGE_TOKEN_STALE, SESSION_NOT_FOUND
 */
export async function renderedMessagesPage(reads: Reads, limits: AppLimits, ctx: CallContext, id: string, q: RenderedQuery): Promise<RenderedPage> {
  checkPageSizeLimit(limits, q.pageSize);
  const token = q.pageToken ? decodeMessagesToken(q.pageToken, false) : undefined;
  const out = await reads.getMessages(ctx, id, 'model', { asOfSeq: q.asOfSeq });
  if (token !== undefined && token.g !== out.replaceGeneration) throw staleMessagesToken(token.g as number, out.replaceGeneration);
  const entries = out.messages.map((m) => ({ seq: m.seq, message: m.message as MessageJson }));
  // As-of reads build fresh objects every time: no point keeping them.
  const all = q.asOfSeq === undefined
    ? rendering(`${ctx.tenant}\0${id}\0${q.format}\0${q.dropUnpaired === true ? 1 : 0}`, entries, q.format, q.dropUnpaired)
    : renderHistory(q.format, entries, { dropUnpaired: q.dropUnpaired });
  const from = token?.o ?? 0;
  if (from > all.length) throw new DomainError('INVALID_PAGE_TOKEN', 'page_token points past the rendered history; start again without it', { field: 'page_token' });
  const messages = q.pageSize > 0 || from > 0 ? all.slice(from, q.pageSize > 0 ? from + q.pageSize : undefined) : all;
  const next = q.pageSize > 0 && from + q.pageSize < all.length ? encodeMessagesToken({ v: 'm', o: from + q.pageSize, g: out.replaceGeneration }) : '';
  return { messages, headSeq: out.headSeq, nextPageToken: next };
}
