/**
 * Message views of surface events, including the upgrade of the legacy unwrapped shapes
 * (dsh-semantics 1.5). Legacy events are stored verbatim (the log stays lossless); every reader
 * that needs the canonical wrapper form goes through this view, which builds exactly what the
 * reference's persistence coordinator would have rewritten on load:
 *
 * | legacy `data` | canonical `data` |
 * |---|---|
 * | user/message `{content, source, envelope?, …}` | `{id, role:"user", content, source, envelope?, …}` |
 * | assistant/message `{turn, step, content, provenance, usage?, …}` | `{turn, step, message:{id, role:"assistant", content, source:{kind:"model", …provenance}}, usage?, …}` |
 * | tool/result `{turn, step, callId, content, isError, error?, meta?, …}` | `{turn, step, message:{id, role:"user", source:{kind:"tool", callId}, content:[{type:"tool-result", toolCallId: callId, content, isError}]}, error?, meta?, …}` |
 *
 * The id is `legacy-message:<sessionId>:<seq>`. A legacy tool/result *replacement* keeps the id of
 * the message it replaces: the (upgraded) id of the event at its `start` seq.
 *
 * A legacy shape is recognised structurally: a user/message whose data has neither `id` nor
 * `role`; an assistant/message or tool/result whose data has no `message` key.
 */
import type { Json, JsonObject, SessionEvent } from './event.js';
import { deepFreeze, isJsonObject } from './json.js';

/** A projected message (frozen JSON object). */
export type MessageJson = { readonly [key: string]: Json };

/** The minimal event fields the view needs. */
export type ViewableEvent = Pick<SessionEvent, 'type' | 'seq' | 'data' | 'surfaceOp'>;

/** Resolves the (upgraded) message id of the event at `seq`, used for legacy tool/result replacements. */
export type TargetIdResolver = (seq: number) => string | undefined;

/** The id the reference gives an upgraded legacy message. */
export function legacyMessageId(sessionId: string, seq: number): string {
  return `legacy-message:${sessionId}:${seq}`;
}

function has(o: object, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, key);
}

/** True iff `data` is a legacy unwrapped shape of surface type `type`. */
export function isLegacyShape(type: string, data: Json): boolean {
  if (!isJsonObject(data)) return false;
  switch (type) {
    case 'user/message':
      return !has(data, 'id') && !has(data, 'role');
    case 'assistant/message':
    case 'tool/result':
      return !has(data, 'message');
    default:
      return false;
  }
}

function without(data: { readonly [key: string]: Json }, drop: readonly string[]): JsonObject {
  const out: JsonObject = {};
  for (const k of Object.keys(data)) if (!drop.includes(k)) out[k] = data[k] as Json;
  return out;
}

/**
 * The canonical (wrapper-form) data of a surface event: the stored data itself when it is already
 * canonical, otherwise a frozen upgraded copy (see the module comment).
 *
 * @param resolveTargetId - for a legacy tool/result replacement, the id of the message at its
 *   `start` seq; when it returns undefined the id falls back to the legacy id of `start`.
 */
export function canonicalData(event: ViewableEvent, sessionId: string, resolveTargetId?: TargetIdResolver): Json {
  const { type, data } = event;
  if (!isLegacyShape(type, data)) return data;
  const d = data as { readonly [key: string]: Json };
  if (type === 'user/message') {
    return deepFreeze({ id: legacyMessageId(sessionId, event.seq), role: 'user', ...d });
  }
  if (type === 'assistant/message') {
    const prov = d['provenance'];
    const source: JsonObject = { kind: 'model' };
    if (isJsonObject(prov)) for (const k of Object.keys(prov)) if (k !== 'kind') source[k] = prov[k] as Json;
    const message: JsonObject = { id: legacyMessageId(sessionId, event.seq), role: 'assistant' };
    if (has(d, 'content')) message['content'] = d['content'] as Json;
    message['source'] = source;
    const out: JsonObject = {};
    for (const k of Object.keys(d)) {
      if (k === 'content' || k === 'provenance') continue;
      out[k] = d[k] as Json;
    }
    out['message'] = message;
    return deepFreeze(out);
  }
  // tool/result
  const op = event.surfaceOp;
  let id = legacyMessageId(sessionId, event.seq);
  if (op !== undefined && op !== 'append' && typeof op === 'object') {
    id = resolveTargetId?.(op.start) ?? legacyMessageId(sessionId, op.start);
  }
  const callId = d['callId'];
  const source: JsonObject = { kind: 'tool' };
  if (callId !== undefined) source['callId'] = callId;
  const block: JsonObject = { type: 'tool-result' };
  if (callId !== undefined) block['toolCallId'] = callId;
  if (has(d, 'content')) block['content'] = d['content'] as Json;
  if (has(d, 'isError')) block['isError'] = d['isError'] as Json;
  const out = without(d, ['callId', 'content', 'isError']);
  out['message'] = { id, role: 'user', source, content: [block] };
  return deepFreeze(out);
}

/**
 * The message a surface event contributes (before the empty-assistant rule of derivation):
 * `data` for user/message, `data.message` for assistant/message and tool/result, upgraded from
 * legacy shapes. Undefined for other types or when the data has no message object.
 *
 * @param lookup - committed events by seq; needed only for a legacy tool/result replacement, whose
 *   id is the upgraded id of the event at its `start` (resolved recursively).
 */
export function messageView(
  event: ViewableEvent,
  sessionId: string,
  lookup?: (seq: number) => SessionEvent | undefined,
): MessageJson | undefined {
  const resolver: TargetIdResolver | undefined =
    lookup === undefined
      ? undefined
      : (seq) => {
          const target = lookup(seq);
          if (target === undefined) return undefined;
          const m = messageView(target, sessionId, lookup);
          const id = m?.['id'];
          return typeof id === 'string' ? id : undefined;
        };
  return messageOf(event, sessionId, resolver);
}

/** Like {@link messageView}, with the legacy replacement target id given by a resolver. */
export function messageOf(event: ViewableEvent, sessionId: string, resolveTargetId?: TargetIdResolver): MessageJson | undefined {
  const data = canonicalData(event, sessionId, resolveTargetId);
  switch (event.type) {
    case 'user/message':
      return isJsonObject(data) ? data : undefined;
    case 'assistant/message':
    case 'tool/result': {
      if (!isJsonObject(data)) return undefined;
      const m = data['message'];
      return isJsonObject(m) ? m : undefined;
    }
    default:
      return undefined;
  }
}
