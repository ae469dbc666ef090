/**
 * The tool/result rewrite rule (dsh-semantics 2.4): a tool/result replacement may change only the
 * inner content of its single tool-result block; everything else (turn, step, error, meta, the
 * message id, role and source, the block's type, toolCallId and isError, any extra key) must be
 * structurally equal, key presence included, key order not. Only block 0 is compared (the
 * message-shape rule already requires exactly one block).
 *
 * Legacy flat shapes (before 2026-07-28) compare `data` minus its `content` key. When exactly one
 * side is legacy, both are compared through their canonical views (message-view.ts), so a
 * canonical rewrite of a legacy result must keep the upgraded legacy id.
 */
import type { Json, JsonObject, SessionEvent } from './event.js';
import { isJsonObject, jsonEqual } from './json.js';
import { canonicalData, isLegacyShape, messageOf, type TargetIdResolver } from './message-view.js';

/** jsonEqual over the own keys of two objects, ignoring `skip` (presence of every other key matters). */
function equalExcept(a: { readonly [key: string]: Json }, b: { readonly [key: string]: Json }, skip: string, inner: (x: Json, y: Json) => boolean): boolean {
  let na = 0;
  for (const k in a) {
    if (k === skip) continue;
    na++;
    if (!Object.prototype.hasOwnProperty.call(b, k) || !jsonEqual(a[k], b[k])) return false;
  }
  let nb = 0;
  for (const k in b) if (k !== skip) nb++;
  if (na !== nb) return false;
  const hasA = Object.prototype.hasOwnProperty.call(a, skip);
  if (hasA !== Object.prototype.hasOwnProperty.call(b, skip)) return false;
  return hasA ? inner(a[skip] as Json, b[skip] as Json) : true;
}

/** Equality of canonical tool/result data with `message.content[0].content` ignored (no allocation). */
function equalExceptInnerContent(a: Json, b: Json): boolean {
  if (!isJsonObject(a) || !isJsonObject(b)) return jsonEqual(a, b);
  return equalExcept(a, b, 'message', (ma, mb) => {
    if (!isJsonObject(ma) || !isJsonObject(mb)) return jsonEqual(ma, mb);
    return equalExcept(ma, mb, 'content', (ca, cb) => {
      if (!Array.isArray(ca) || !Array.isArray(cb) || ca.length === 0 || cb.length === 0) return jsonEqual(ca, cb);
      const ba = ca[0] as Json;
      const bb = cb[0] as Json;
      // Only block 0 is compared (the reference quirk); its inner content may differ.
      if (!isJsonObject(ba) || !isJsonObject(bb)) return jsonEqual(ba, bb);
      return equalExcept(ba, bb, 'content', () => true);
    });
  });
}

function withoutContent(data: Json): Json {
  if (!isJsonObject(data)) return data;
  const out: JsonObject = {};
  for (const k of Object.keys(data)) if (k !== 'content') out[k] = data[k] as Json;
  return out;
}

/**
 * True iff replacing `target` by `replacement` changes nothing but the tool-result content.
 *
 * @param lookup - events by seq, to resolve the upgraded id of a legacy replacement chain
 */
export function rewriteChangesOnlyContent(
  replacement: SessionEvent,
  target: SessionEvent,
  sessionId: string,
  lookup: (seq: number) => SessionEvent | undefined,
): boolean {
  if (isLegacyShape('tool/result', replacement.data) && isLegacyShape('tool/result', target.data)) {
    return jsonEqual(withoutContent(replacement.data), withoutContent(target.data));
  }
  const resolve: TargetIdResolver = (seq) => {
    const t = lookup(seq);
    if (t === undefined) return undefined;
    const id = messageOf(t, sessionId, resolve)?.['id'];
    return typeof id === 'string' ? id : undefined;
  };
  return equalExceptInnerContent(canonicalData(replacement, sessionId, resolve), canonicalData(target, sessionId, resolve));
}
