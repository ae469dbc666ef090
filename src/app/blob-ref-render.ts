/**
 * Provider renderings with blob references (GetMessages `blob_refs` with a provider `format`,
 * issue #39, docs/blobs.md). A provider's message shape has no place for a `{"$blob": …}` object:
 * its image fields hold strings (a base64 `data`, a `data:` URL), and a long tool output is text.
 * So each reference is rendered as a unique placeholder string, and in the rendered JSON every
 * string value that is a placeholder (the value itself, or a `data:` URL around it) is replaced
 * whole by the reference object. A client gets back the provider's shape with the reference
 * where the bytes would be, and fetches them with GetBlob.
 *
 * A format that joins several parts into one string (OpenAI Chat and Responses join an assistant
 * message's or a tool result's text parts with newlines) can put a placeholder next to other text
 * or next to another placeholder: no single reference can stand for that string, and replacing it
 * would drop the rest. Such a history is refused (HISTORY_NOT_RENDERABLE, rule
 * `blob-ref-whole-value`), saying to ask without blob_refs or in the DSH shape.
 */
import { findBlobRefs, parseBlobRef } from '../domain/blobs.js';
import { DomainError } from '../domain/errors.js';
import type { Json, JsonObject } from '../domain/event.js';
import type { MessageJson } from '../domain/message-view.js';
import { renderHistory, type HistoryEntry, type ProviderFormat, type RenderedMessage } from '../domain/render/index.js';
import { HISTORY_NOT_RENDERABLE } from '../domain/render/history-steps.js';

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

/** `v` with each string holding a placeholder replaced by its reference (`find` throws when none can stand for it). */
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

/** A `data:` URL's prefix (`data:image/png;base64,`): the one text a placeholder may carry in front of it. */
const DATA_URL_PREFIX = /^data:[^,\u0000]*,$/;

/** The model history `entries` (holding references) rendered for `format`, references kept (see the module comment). */
export function renderWithRefs(format: ProviderFormat, entries: readonly HistoryEntry[], opts: { dropUnpaired?: boolean }): RenderedMessage[] {
  if (!entries.some((e) => findBlobRefs(e.message).length > 0)) return renderHistory(format, entries, opts);
  const nonce = Math.random().toString(36).slice(2, 10);
  const marker = new RegExp(`\\u0000palimpsest-blob-${nonce}-(\\d+)\\u0000`, 'g');
  const refs: JsonObject[] = [];
  const marked = entries.map((e) => ({
    ...e,
    message: substitute(e.message as unknown as Json, (ref) => `\u0000palimpsest-blob-${nonce}-${refs.push(ref) - 1}\u0000`) as unknown as MessageJson,
  }));
  return renderHistory(format, marked, opts).map((r) => {
    const find = (s: string): JsonObject | undefined => {
      if (!s.includes('\u0000')) return undefined;
      const all = [...s.matchAll(marker)];
      const m = all[0]!;
      const before = s.slice(0, m.index);
      if (all.length === 1 && m.index + m[0].length === s.length && (before === '' || DATA_URL_PREFIX.test(before))) return refs[Number(m[1])];
      const seq = r.seqs[0] ?? -1;
      throw new DomainError(HISTORY_NOT_RENDERABLE,
        `the model history cannot be rendered for ${format} with blob_refs: a message joins a value stored as a blob with other text in one string (seq ${seq}), which no single reference can stand for; ask without blob_refs (the bytes) or without a format (the DSH shape keeps each part)`,
        { seq: String(seq), rule: 'blob-ref-whole-value', format });
    };
    return { ...r, json: restore(r.json, find) as RenderedMessage['json'] };
  });
}
