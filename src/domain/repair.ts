/**
 * Crash repair (dsh-semantics 4): the synthetic events that close a turn left open by a crash,
 * byte for byte as the reference's `interruptedTurnClosers` writes them.
 */
import type { Json, JsonObject, SessionEvent } from './event.js';

/** `error.code` of a closer for a call that was recorded (`tool/call`) but has no result. */
export const TOOL_OUTCOME_UNKNOWN = 'TOOL_OUTCOME_UNKNOWN';
/** `error.code` of a closer for a call advertised by the assistant message but never recorded. */
export const TOOL_NOT_STARTED = 'TOOL_NOT_STARTED';

/** Text of a {@link TOOL_OUTCOME_UNKNOWN} closer, verbatim from the reference. */
export const TOOL_OUTCOME_UNKNOWN_TEXT =
  'The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. ' +
  'Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; ' +
  'if it may have side effects, first verify external state or ask the user. Do not retry blindly.';
/** Text of a {@link TOOL_NOT_STARTED} closer, verbatim from the reference. */
export const TOOL_NOT_STARTED_TEXT =
  'The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.';

interface Pending {
  /** `data.step` of the advertising assistant message. */
  readonly step: Json | undefined;
  /** Seq of the recorded `tool/call`, if any. */
  callSeq?: number;
}

/** A JSON object from entries, leaving out `undefined` values (a malformed log may lack `turn`/`step`). */
function object(entries: ReadonlyArray<readonly [string, Json | undefined]>): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of entries) if (value !== undefined) out[key] = value;
  return out;
}

function asObject(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** The content array of an assistant message: wrapper `data.message.content` or legacy `data.content`. */
function assistantContent(data: Record<string, unknown>): unknown {
  const message = asObject(data['message']);
  return message !== undefined ? message['content'] : data['content'];
}

/** The call id a tool/result answers: wrapper `data.message.source.callId` or legacy `data.callId`. */
function resultCallId(data: Record<string, unknown>): unknown {
  const message = asObject(data['message']);
  if (message !== undefined) return asObject(message['source'])?.['callId'];
  return data['callId'];
}

/**
 * Computes the events that balance a log whose last turn was left open (dsh-semantics 4).
 *
 * One pass: `turn/start` opens a turn (unless its `turn` is null) and clears the step and the
 * pending calls; `turn/end` clears all three; `step/start` opens a step (unless its `step` is
 * null: the reference tracks the open step by its number, so `step: null` is no open step); `step/end` clears the step and the pending calls;
 * every `tool-call` block of an `assistant/message` becomes pending (in order); a `tool/call`
 * for a pending id records its seq; a `tool/result` (append or replace) settles its call.
 *
 * If a turn is still open at the end, the closers are: one `tool/result` per pending call (in
 * the order advertised) — `TOOL_OUTCOME_UNKNOWN` citing the recorded `tool/call`, or
 * `TOOL_NOT_STARTED` without `sourceEventSeqs` — then `step/end` if a step is open, then
 * `turn/end {reason:{kind:"interrupted"}}`. Seqs continue from the last event's seq + 1 and every
 * closer carries the last event's `time`. Nothing is returned for an empty or balanced log, so
 * repair is idempotent.
 *
 * Legacy unwrapped shapes (before 2026-07-28) are understood: assistant messages with
 * `data.content` and tool results with `data.callId`.
 *
 * Supported input: the whole log, or any suffix of it that starts at the last `turn/start` (the
 * scan resets there, so the result is the same); the app reads only that suffix.
 *
 * @param events - the durable log in ascending seq order, after the torn tail was cut.
 * @param sessionId - the session's id; accepted for parity with the reference's signature. The
 *   closers do not depend on it (their ids are derived from call id and seq).
 * @returns fresh closer events, plain JSON, in the reference envelope and key order.
 */
export function interruptedTurnClosers(events: Iterable<SessionEvent>, sessionId?: string): SessionEvent[] {
  void sessionId;
  let turn: Json | undefined;
  let turnOpen = false;
  let step: Json | undefined;
  let stepOpen = false;
  let pending = new Map<string, Pending>();
  let last: SessionEvent | undefined;

  for (const event of events) {
    last = event;
    const data = asObject(event.data) ?? {};
    switch (event.type) {
      case 'turn/start':
        // As the reference: a null turn or step number means none is open.
        turn = data['turn'] as Json | undefined;
        turnOpen = turn !== null;
        stepOpen = false;
        step = undefined;
        pending = new Map();
        break;
      case 'turn/end':
        turnOpen = false;
        turn = undefined;
        stepOpen = false;
        step = undefined;
        pending = new Map();
        break;
      case 'step/start':
        step = data['step'] as Json | undefined;
        stepOpen = step !== null;
        break;
      case 'step/end':
        stepOpen = false;
        step = undefined;
        pending = new Map();
        break;
      case 'assistant/message': {
        const content = assistantContent(data);
        if (!Array.isArray(content)) break;
        for (const block of content) {
          const b = asObject(block);
          if (b?.['type'] === 'tool-call' && typeof b['id'] === 'string') {
            pending.set(b['id'], { step: data['step'] as Json | undefined });
          }
        }
        break;
      }
      case 'tool/call': {
        const callId = data['callId'];
        if (typeof callId !== 'string') break;
        const entry = pending.get(callId);
        if (entry !== undefined) entry.callSeq = event.seq;
        break;
      }
      case 'tool/result': {
        const callId = resultCallId(data);
        if (typeof callId === 'string') pending.delete(callId);
        break;
      }
      default:
        break;
    }
  }

  if (!turnOpen || last === undefined) return [];
  const time = last.time;
  let seq = last.seq + 1;
  const closers: SessionEvent[] = [];
  for (const [callId, entry] of pending) {
    const recorded = entry.callSeq !== undefined;
    const message: JsonObject = {
      id: `interrupted-tool-result-${callId}-${seq}`,
      role: 'user',
      source: { kind: 'tool', callId },
      content: [
        {
          type: 'tool-result',
          toolCallId: callId,
          isError: true,
          content: [{ type: 'text', text: recorded ? TOOL_OUTCOME_UNKNOWN_TEXT : TOOL_NOT_STARTED_TEXT }],
        },
      ],
    };
    const data = object([
      ['turn', turn],
      ['step', entry.step],
      ['message', message],
      [
        'error',
        recorded
          ? { name: 'ToolOutcomeUnknownError', code: TOOL_OUTCOME_UNKNOWN }
          : { name: 'ToolNotStartedError', code: TOOL_NOT_STARTED },
      ],
    ]);
    closers.push(
      recorded
        ? { type: 'tool/result', seq, time, data, sourceEventSeqs: [entry.callSeq as number], surfaceOp: 'append' }
        : { type: 'tool/result', seq, time, data, surfaceOp: 'append' },
    );
    seq++;
  }
  if (stepOpen) {
    closers.push({ type: 'step/end', seq, time, data: object([['turn', turn], ['step', step]]) });
    seq++;
  }
  closers.push({ type: 'turn/end', seq, time, data: object([['turn', turn], ['reason', { kind: 'interrupted' }]]) });
  return closers;
}
