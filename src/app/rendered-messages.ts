/**
 * GetMessages in a provider's format (issue #34): the model history (now or as of a seq) rendered
 * by the domain renderer of the format, paged by position over the rendered messages with the
 * model-history page tokens (stale after a replace, as for the DSH shape). The rendering of a page
 * renders the whole history (a provider message may merge several DSH messages, so positions only
 * exist after rendering); bench/provider.bench.ts measures it against the DSH shape.
 *
 * The last rendering of each recently read (session, format) is kept (at most RENDER_CACHE
 * entries) with the session record, replace generation and surface length it was rendered at.
 * Within one generation the model history is only appended to (a node's message never changes;
 * compaction and prunes are replaces), so the same record and generation with the same surface
 * length (and the same last node) mean the same history: the rendering is answered again, so
 * paging renders once and a warm read costs the snapshot's two array copies. A surface that only
 * grew since renders from the last safe cut only (domain/render/incremental.ts renderAppended),
 * with no pass over the reused prefix but its copy. A replace or another record renders afresh.
 */
import { DomainError } from '../domain/errors.js';
import type { MessageJson } from '../domain/message-view.js';
import { renderHistory, type HistoryEntry, type ProviderFormat, type RenderedMessage } from '../domain/render/index.js';
import { renderAppended } from '../domain/render/incremental.js';
import { checkPageSizeLimit, type AppLimits, type CallContext } from './app-types.js';
import { decodeMessagesToken, encodeMessagesToken, staleMessagesToken } from './message-pages.js';
import type { Reads } from './reads.js';
import { renderWithRefs } from './blob-ref-render.js';

/** How many (session, format) renderings are kept. */
const RENDER_CACHE = 64;

interface CachedRendering {
  /** The session record the rendering belongs to (a reloaded or recreated session has another). */
  readonly record: object;
  readonly generation: number;
  /** Surface nodes rendered, and the seq of the last one. */
  readonly nodes: number;
  readonly lastSeq: number;
  /** The entries rendered (owned by the cache, appended to as the surface grows). */
  readonly entries: HistoryEntry[];
  readonly rendered: RenderedMessage[];
}

const renderings = new Map<string, CachedRendering>();

/** The live history's surface and its nodes' messages (Reads.modelSnapshot with `surface`). */
interface LiveHistory {
  readonly record: object;
  readonly generation: number;
  readonly surface: readonly number[];
  readonly nodeMessages: readonly (MessageJson | undefined)[];
}

function pushEntries(into: HistoryEntry[], h: LiveHistory, from: number): void {
  for (let i = from; i < h.surface.length; i++) {
    const message = h.nodeMessages[i];
    if (message !== undefined) into.push({ seq: h.surface[i]!, message });
  }
}

/**
 * The rendering of the live history `h` for the key: the cached one when the history is
 * unchanged, one that reuses it when the surface only grew, else a fresh one (module comment).
 */
function rendering(key: string, h: LiveHistory, format: ProviderFormat, dropUnpaired: boolean | undefined): RenderedMessage[] {
  const hit = renderings.get(key);
  renderings.delete(key);
  const n = h.surface.length;
  const reusable = hit !== undefined && hit.record === h.record && hit.generation === h.generation && hit.nodes <= n && (hit.nodes === 0 || h.surface[hit.nodes - 1] === hit.lastSeq);
  let entries: HistoryEntry[];
  let rendered: RenderedMessage[];
  if (reusable && hit.nodes === n) {
    renderings.set(key, hit);
    return hit.rendered;
  }
  if (reusable) {
    // The cache's entries array is ours; nothing else holds it.
    entries = hit.entries;
    const prevCount = entries.length;
    pushEntries(entries, h, hit.nodes);
    rendered = renderAppended(format, entries, prevCount, hit.rendered, { dropUnpaired });
  } else {
    entries = [];
    pushEntries(entries, h, 0);
    rendered = renderHistory(format, entries, { dropUnpaired });
  }
  renderings.set(key, { record: h.record, generation: h.generation, nodes: n, lastSeq: n > 0 ? h.surface[n - 1]! : -1, entries, rendered });
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
  /** Blobbed values as their references (issue #39, blob-ref-render.ts), rendered fresh (not cached). */
  readonly blobRefs?: boolean;
}

/**
 * One page of the model history rendered for `q.format`.
 *
 * @throws DomainError HISTORY_NOT_RENDERABLE, PAGE_SIZE_TOO_LARGE, INVALID_PAGE_TOKEN, PAGE_TOKEN_STALE, SESSION_NOT_FOUND
 */
export async function renderedMessagesPage(reads: Reads, limits: AppLimits, ctx: CallContext, id: string, q: RenderedQuery): Promise<RenderedPage> {
  checkPageSizeLimit(limits, q.pageSize);
  const token = q.pageToken ? decodeMessagesToken(q.pageToken, false) : undefined;
  let all: RenderedMessage[];
  let headSeq: number | undefined;
  let generation: number;
  if (q.blobRefs === true) {
    const out = await reads.getMessages(ctx, id, 'model', { asOfSeq: q.asOfSeq, blobRefs: true });
    generation = out.replaceGeneration;
    headSeq = out.headSeq;
    if (token !== undefined && token.g !== generation) throw staleMessagesToken(token.g as number, generation);
    all = renderWithRefs(q.format, out.messages.map((m) => ({ seq: m.seq, message: m.message as MessageJson })), { dropUnpaired: q.dropUnpaired });
  } else if (q.asOfSeq === undefined) {
    const snap = await reads.modelSnapshot(ctx, id, { surface: true });
    generation = snap.replaceGeneration;
    headSeq = snap.headSeq;
    if (token !== undefined && token.g !== generation) throw staleMessagesToken(token.g as number, generation);
    const live: LiveHistory = { record: snap.record, generation, surface: snap.surface ?? [], nodeMessages: snap.nodeMessages ?? [] };
    all = rendering(`${ctx.tenant}\0${id}\0${q.format}\0${q.dropUnpaired === true ? 1 : 0}`, live, q.format, q.dropUnpaired);
  } else {
    // As-of reads build fresh objects every time: no point keeping them.
    const out = await reads.getMessages(ctx, id, 'model', { asOfSeq: q.asOfSeq });
    generation = out.replaceGeneration;
    headSeq = out.headSeq;
    if (token !== undefined && token.g !== generation) throw staleMessagesToken(token.g as number, generation);
    all = renderHistory(q.format, out.messages.map((m) => ({ seq: m.seq, message: m.message as MessageJson })), { dropUnpaired: q.dropUnpaired });
  }
  const from = token?.o ?? 0;
  if (from > all.length) throw new DomainError('INVALID_PAGE_TOKEN', 'page_token points past the rendered history; start again without it', { field: 'page_token' });
  const messages = q.pageSize > 0 || from > 0 ? all.slice(from, q.pageSize > 0 ? from + q.pageSize : undefined) : all;
  const next = q.pageSize > 0 && from + q.pageSize < all.length ? encodeMessagesToken({ v: 'm', o: from + q.pageSize, g: generation }) : '';
  return { messages, headSeq, nextPageToken: next };
}
