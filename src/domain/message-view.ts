/**
 * Message views of surface events, including the upgrade of the legacy unwrapped shapes
 * (dsh-semantics 1.5). Legacy events are stored verbatim (the log stays lossless); every reader
 * that needs the canonical wrapper form goes through this view, which builds exactly what the
 * reference's persistence coordinator would have rewritten on load:
 *
 * | legacy `data` | canonical `data` |
 * |---|---|
 * | user/message `{content, source, envelope?, …}` | `{content, source, envelope?, …, id, role:"user"}` |
 * | assistant/message `{turn, step, content, provenance, usage?, …}` | `{turn, step, usage?, …, message:{id, role:"assistant", content, source:{…provenance, kind:"model"}}}` |
 * | tool/result `{turn, step, callId, content, isError, error?, meta?, …}` | `{turn, step, error?, meta?, …, message:{id, role:"user", content:[{type:"tool-result", toolCallId: callId, content, isError}], source:{kind:"tool", callId}}}` |
 *
 * The id is `legacy-message:<sessionId>:<seq>`. A legacy tool/result *replacement* keeps the id of
 * the message it replaces: the (upgraded) id of the event at its `start` seq.
 *
 * The retired `steering/message` (imported logs only) is seen as the user/message the reference's
 * load path upgrades it to (see {@link upgradeSteering}).
 *
 * A legacy shape is recognised structurally, with the reference's conditions (see
 * {@link isLegacyShape}); anything else is judged as the current wrapper shape.
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

/**
 * The keys an unwrapped (legacy) shape must carry to be upgraded, as the reference's load path
 * requires them; without them the event is judged as the current shape (and fails MESSAGE_SHAPE).
 */
export const LEGACY_REQUIRED_KEYS: Readonly<Record<string, readonly string[]>> = {
  'user/message': ['content', 'source'],
  'assistant/message': ['content', 'provenance'],
  'tool/result': ['callId', 'content', 'isError'],
};

/**
 * True iff `data` is a legacy unwrapped shape of surface type `type`, exactly as the reference
 * recognises one: a user/message without `id`, `role` and `message` that has `content` and
 * `source`; an assistant/message without `message` that has `content` and `provenance`; a
 * tool/result without `message` that has `callId`, `content` and `isError`.
 */
export function isLegacyShape(type: string, data: Json): boolean {
  if (!isJsonObject(data)) return false;
  const required = LEGACY_REQUIRED_KEYS[type];
  if (required === undefined || has(data, 'message')) return false;
  if (type === 'user/message' && (has(data, 'id') || has(data, 'role'))) return false;
  return required.every((k) => has(data, k));
}

/** The retired surface type the reference's load path upgrades to a user/message (2026-08). */
export const STEERING_TYPE = 'steering/message';

/**
 * The user message a `steering/message` stands for, as the reference's load path upgrades it:
 * `{turn, message}` (the wrapped shape) gives the message itself; `{turn, content, source}`
 * (exactly these keys) gives `{content, source, id: legacy-message:<session>:<seq>, role:"user"}`.
 * Undefined for any other shape (the reference refuses it as corruption); `turn` must be a safe
 * integer in both.
 */
export function upgradeSteering(data: Json, sessionId: string, seq: number): { readonly [key: string]: Json } | undefined {
  if (!isJsonObject(data)) return undefined;
  const turn = data['turn'];
  if (!(typeof turn === 'number' && Number.isSafeInteger(turn))) return undefined;
  const keys = Object.keys(data);
  const wrapped = data['message'];
  if (isJsonObject(wrapped) && keys.length === 2 && has(data, 'message')) return wrapped;
  if (keys.length !== 3 || !has(data, 'content') || !has(data, 'source')) return undefined;
  return deepFreeze({ ...without(data, ['turn']), id: legacyMessageId(sessionId, seq), role: 'user' });
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
  if (type === STEERING_TYPE) return upgradeSteering(data, sessionId, event.seq) ?? data;
  if (!isLegacyShape(type, data)) return data;
  const d = data as { readonly [key: string]: Json };
  // Key order as the reference's upgrade writes it (derived messages are compared as JSON text).
  if (type === 'user/message') {
    return deepFreeze({ ...d, id: legacyMessageId(sessionId, event.seq), role: 'user' });
  }
  if (type === 'assistant/message') {
    const prov = d['provenance'];
    const source: JsonObject = isJsonObject(prov) ? { ...prov, kind: 'model' } : { kind: 'model' };
    const out = without(d, ['content', 'provenance']);
    out['message'] = { id: legacyMessageId(sessionId, event.seq), role: 'assistant', content: d['content'] as Json, source };
    return deepFreeze(out);
  }
  // tool/result
  const op = event.surfaceOp;
  let id = legacyMessageId(sessionId, event.seq);
  if (op !== undefined && op !== 'append' && typeof op === 'object') {
    id = resolveTargetId?.(op.start) ?? legacyMessageId(sessionId, op.start);
  }
  const callId = d['callId'] as Json;
  const block: JsonObject = { type: 'tool-result', toolCallId: callId, content: d['content'] as Json, isError: d['isError'] as Json };
  const out = without(d, ['callId', 'content', 'isError']);
  out['message'] = { id, role: 'user', content: [block], source: { kind: 'tool', callId } };
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
    case STEERING_TYPE:
      return upgradeSteering(event.data, sessionId, event.seq);
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
