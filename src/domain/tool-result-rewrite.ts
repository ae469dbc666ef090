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

/** `data` with `message.content[0].content` blanked (set to null). */
function blankInnerContent(data: Json): Json {
  if (!isJsonObject(data)) return data;
  const message = data['message'];
  if (!isJsonObject(message)) return data;
  const content = message['content'];
  if (!Array.isArray(content) || content.length === 0) return data;
  const block = content[0];
  if (!isJsonObject(block)) return data;
  const b: JsonObject = { ...block, content: null };
  const m: JsonObject = { ...message, content: [b, ...content.slice(1)] };
  return { ...data, message: m };
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
  return jsonEqual(blankInnerContent(canonicalData(replacement, sessionId, resolve)), blankInnerContent(canonicalData(target, sessionId, resolve)));
}
