/**
 * Provider renderings with blob references (GetMessages `blob_refs` with a provider `format`,
 * issue #39, docs/blobs.md). A provider's message shape has no place for a `{"$blob": …}` object:
 * its image fields hold strings (a base64 `data`, a `data:` URL), and a long tool output is text.
 * So each reference is rendered as a unique placeholder string, and in the rendered JSON every
 * string value holding a placeholder (the value itself, or a data URL or a text built around it)
 * is replaced whole by the reference object. A client gets back the provider's shape with the
 * reference where the bytes would be, and fetches them with GetBlob.
 */
import { findBlobRefs, parseBlobRef } from '../domain/blobs.js';
import type { Json, JsonObject } from '../domain/event.js';
import type { MessageJson } from '../domain/message-view.js';
import { renderHistory, type HistoryEntry, type ProviderFormat, type RenderedMessage } from '../domain/render/index.js';

/** `v` with each reference object replaced by `mark(ref)`. */
function substitute(v: Json, mark: (ref: JsonObject) => string): Json {
  if (Array.isArray(v)) return v.map((x) => substitute(x, mark));
  if (v !== null && typeof v === 'object') {
    if ('$blob' in v && parseBlobRef(v) !== undefined) return mark(v);
    const out: JsonObject = {};
    for (const [k, x] of Object.entries(v)) out[k] = substitute(x as Json, mark);
    return out;
  }
  return v;
}

/** `v` with each string holding a placeholder replaced by its reference (the first one it holds). */
function restore(v: unknown, find: (s: string) => JsonObject | undefined): unknown {
  if (typeof v === 'string') return find(v) ?? v;
  if (Array.isArray(v)) return v.map((x) => restore(x, find));
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = restore(x, find);
    return out;
  }
  return v;
}

/** The model history `entries` (holding references) rendered for `format`, references kept (see the module comment). */
export function renderWithRefs(format: ProviderFormat, entries: readonly HistoryEntry[], opts: { dropUnpaired?: boolean }): RenderedMessage[] {
  if (!entries.some((e) => findBlobRefs(e.message).length > 0)) return renderHistory(format, entries, opts);
  const nonce = Math.random().toString(36).slice(2, 10);
  const marker = new RegExp(`\\u0000palimpsest-blob-${nonce}-(\\d+)\\u0000`);
  const refs: JsonObject[] = [];
  const marked = entries.map((e) => ({
    ...e,
    message: substitute(e.message as unknown as Json, (ref) => `\u0000palimpsest-blob-${nonce}-${refs.push(ref) - 1}\u0000`) as unknown as MessageJson,
  }));
  const find = (s: string): JsonObject | undefined => {
    const m = s.includes('\u0000') ? marker.exec(s) : null;
    return m === null ? undefined : refs[Number(m[1])];
  };
  return renderHistory(format, marked, opts).map((r) => ({ ...r, json: restore(r.json, find) as RenderedMessage['json'] }));
}
