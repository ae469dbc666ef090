/**
 * Rendering a model history that grew by appends only, reusing the rendering of its previous
 * version (issue #34, the bench's "after an append" case): the provider messages before a safe
 * cut are final, so only the entries from the cut on are rendered again, and the reused messages
 * keep their objects (and so their cached JSON text).
 *
 * The cut is the last entry of the previous history that is an assistant message rendering
 * something (text, an image or a call) right after a user-role message rendering something (text,
 * an image or a tool result): every pending call before it was closed there, and no provider
 * merges an assistant message into a user one, so what was rendered before it cannot change. test/unit/render-incremental.test.ts checks the result
 * equals a full rendering, as a property.
 */
import type { Json } from '../event.js';
import { isJsonObject } from '../json.js';
import type { HistoryEntry, RenderedMessage, RenderOptions } from './history-steps.js';
import { renderHistory, type ProviderFormat } from './index.js';

/** Whether a message of `role` renders something in every format (text, an image, or `kinds`). */
function rendersContent(m: HistoryEntry['message'], role: string, kinds: readonly string[]): boolean {
  if (m['role'] !== role) return false;
  const c = m['content'];
  if (typeof c === 'string') return c !== '';
  if (!Array.isArray(c)) return false;
  return (c as Json[]).some((b) => isJsonObject(b) && ((b['type'] === 'text' && typeof b['text'] === 'string' && b['text'] !== '') || b['type'] === 'image' || kinds.includes(b['type'] as string)));
}

/**
 * `renderHistory(format, entries, opts)` when the caller knows that `entries[0, prevCount)` are
 * the entries `prevRendered` was rendered from (same messages, same seqs): O(entries after the
 * cut + rendered messages after it), with no pass over the reused prefix except its copy. The app
 * knows it from the session's replace generation (a history only appended to keeps its prefix).
 *
 * @throws DomainError HISTORY_NOT_RENDERABLE
 */
export function renderAppended(format: ProviderFormat, entries: readonly HistoryEntry[], prevCount: number, prevRendered: readonly RenderedMessage[], opts: RenderOptions = {}): RenderedMessage[] {
  let cut = -1;
  for (let i = prevCount - 1; i >= 1; i--) {
    if (rendersContent(entries[i]!.message, 'assistant', ['tool-call']) && rendersContent(entries[i - 1]!.message, 'user', ['tool-result'])) {
      cut = i;
      break;
    }
  }
  if (cut < 0) return renderHistory(format, entries, opts);
  const again = new Set<number>();
  for (let i = cut; i < prevCount; i++) again.add(entries[i]!.seq);
  // The messages rendered from the entries from the cut on are the last ones with seqs (each
  // message comes from adjacent entries, in order); those without seqs (results written by
  // drop_unpaired) go with what follows them.
  let keep = prevRendered.length;
  for (let k = prevRendered.length - 1; k >= 0; k--) {
    const seqs = prevRendered[k]!.seqs;
    if (seqs.length === 0) continue;
    if (!seqs.some((x) => again.has(x))) break;
    keep = k;
  }
  const tail = renderHistory(format, entries.slice(cut), opts);
  const out = prevRendered.slice(0, keep);
  for (const m of tail) out.push(m);
  return out;
}
