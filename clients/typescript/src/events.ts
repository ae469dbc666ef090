/**
 * Typed builders for the events the engine accepts (the reference vocabulary,
 * docs/dsh-semantics.md §1), as EventInput messages with canonical JSON data. Messages are
 * appended to the surface unless `replace` is given; every other type is log-only. `cites` is
 * `sourceEventSeqs`: an assistant message cites its chunks, a tool result its `tool/call`.
 * Same names and shapes as the Python package's `palimpsest.events`.
 */
import { createHash } from 'node:crypto';
import type { EventInput } from './gen/palimpsest/v1/event.js';

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A content block. */
export type ContentBlock =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'tool-call'; id: string; name: string; arguments: string }
  | { type: 'tool-result'; toolCallId: string; content: ContentBlock[]; isError?: true }
  | { type: 'image'; attachment: Json };

/** A message source (plugins may add kinds). */
export type MessageSource =
  | { kind: 'user' }
  | { kind: 'plugin'; plugin: string; [key: string]: Json }
  | { kind: 'model'; provider: string; model: string; replayState?: Json }
  | { kind: 'tool'; callId: string };

/** A StreamChunk of an assistant/chunk event. */
export type StreamChunk =
  | { type: 'block-start'; index: number; blockType: 'text' | 'reasoning' | 'tool-call' }
  | { type: 'text-delta'; index: number; text: string }
  | { type: 'reasoning-delta'; index: number; text: string }
  | { type: 'tool-call-delta'; index: number; id: string; name?: string; argumentsDelta: string }
  | { type: 'block-end'; index: number; block: ContentBlock }
  | { type: 'usage'; usage: TokenUsage }
  | { type: 'finish'; reason: string; replayState?: Json };

/** A message of the model history or transcript (`messages`, surface deltas, compaction plans). */
export interface Message {
  id: string;
  role: 'user' | 'assistant';
  content: ContentBlock[];
  source: MessageSource;
}

/** Token usage of an assistant message. */
export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  reasoningTokens?: number;
}

/** Surface placement and citations of a message event. */
export interface Placement {
  /** Replace the surface range [start, end] instead of appending (compaction, prune). */
  replace?: readonly [number, number];
  /** sourceEventSeqs. */
  cites?: readonly number[];
}

/** Any event: `data` as JSON, with an optional surface op and citations. */
export function event(type: string, data: Json, opts: { append?: boolean; ignorable?: boolean } & Placement = {}): EventInput {
  if (opts.append && opts.replace) throw new Error('an event is either appended to the surface or replaces a range, not both');
  return {
    type,
    data: { kind: { $case: 'json', value: JSON.stringify(data) } },
    sourceEventSeqs: opts.cites ? { seqs: [...opts.cites] } : undefined,
    surfaceOp: opts.replace
      ? { $case: 'replace', value: { start: opts.replace[0], end: opts.replace[1] } }
      : opts.append ? { $case: 'append', value: {} } : undefined,
    ignorable: opts.ignorable === true,
  };
}

function message(type: string, data: Json, p: Placement): EventInput {
  return event(type, data, { append: p.replace === undefined, ...p });
}

function blocks(content: string | readonly ContentBlock[]): ContentBlock[] {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : [...content];
}

/** A text block. */
export const text = (t: string): ContentBlock => ({ type: 'text', text: t });

/** The id prefix of each message type whose builder leaves the id to `append`. */
const ID_PREFIX: Readonly<Record<string, string>> = { 'user/message': 'u', 'assistant/message': 'a', 'tool/result': 'r' };

/**
 * The message id `append` gives the message at `index` of a batch sent with `key` when its builder
 * was given no id: `prefix-` + 24 hex of sha256(`key/index`), the same in the Python and Go
 * clients. The same key and batch give the same ids, so a retry that rebuilds its batch is answered
 * from the stored result instead of IDEMPOTENCY_KEY_REUSED.
 */
export function derivedId(prefix: string, key: string, index: number): string {
  return `${prefix}-${createHash('sha256').update(`${key}/${index}`).digest('hex').slice(0, 24)}`;
}

/** `events` with every message id a builder left empty set to {@link derivedId} (copies; the caller's are unchanged). */
export function withDerivedIds(key: string, events: readonly EventInput[]): EventInput[] {
  return events.map((e, i) => {
    const prefix = ID_PREFIX[e.type];
    const kind = e.data?.kind;
    if (prefix === undefined || kind?.$case !== 'json' || !kind.value.includes('"id":""')) return e;
    const data = JSON.parse(kind.value) as Record<string, Json>;
    const msg = (e.type === 'user/message' ? data : data['message']) as Record<string, Json> | null | undefined;
    if (!msg || typeof msg !== 'object' || msg['id'] !== '') return e;
    msg['id'] = derivedId(prefix, key, i);
    return { ...e, data: { kind: { $case: 'json', value: JSON.stringify(data) } } };
  });
}

/**
 * A `user/message`; `source` defaults to `{kind: "user"}`. Without `id` the id is left to
 * `append`, which derives it from the idempotency key and the event's index ({@link derivedId}).
 */
export function userMessage(content: string | readonly ContentBlock[], opts: { id?: string; source?: MessageSource } & Placement = {}): EventInput {
  const { id, source, ...p } = opts;
  return message('user/message', { id: id ?? '', role: 'user', content: blocks(content), source: source ?? { kind: 'user' } } as Json, p);
}

/** An `assistant/message`: content, then one tool-call block per `toolCalls` entry (no `id`: see {@link userMessage}). */
export function assistantMessage(content: string | readonly ContentBlock[], opts: {
  turn: number; step: number; provider: string; model: string; id?: string;
  toolCalls?: readonly { id: string; name: string; arguments: string }[];
  usage?: TokenUsage; interrupted?: boolean; replayState?: Json;
} & Placement): EventInput {
  const { turn, step, provider, model, id, toolCalls = [], usage, interrupted, replayState, ...p } = opts;
  const source: MessageSource = replayState === undefined ? { kind: 'model', provider, model } : { kind: 'model', provider, model, replayState };
  const data: Record<string, Json> = {
    turn, step,
    message: { id: id ?? '', role: 'assistant', content: [...blocks(content), ...toolCalls.map((c) => ({ type: 'tool-call' as const, ...c }))], source } as Json,
  };
  if (usage) data['usage'] = { ...usage };
  if (interrupted) data['interrupted'] = true;
  return message('assistant/message', data, p);
}

/** A `tool/result` for `callId`; `callSeq` (the tool/call seq) is cited. A prune keeps `id` (no `id`: see {@link userMessage}). */
export function toolResult(callId: string, output: string | readonly ContentBlock[], opts: {
  turn: number; step: number; id?: string; isError?: boolean; error?: { name: string; code: string }; meta?: Json; callSeq?: number;
} & Placement): EventInput {
  const { turn, step, id, isError, error, meta, callSeq, ...p } = opts;
  const block: ContentBlock = isError
    ? { type: 'tool-result', toolCallId: callId, content: blocks(output), isError: true }
    : { type: 'tool-result', toolCallId: callId, content: blocks(output) };
  const data: Record<string, Json> = {
    turn, step, message: { id: id ?? '', role: 'user', content: [block], source: { kind: 'tool', callId } } as Json,
  };
  if (error) data['error'] = { ...error };
  if (meta !== undefined) data['meta'] = meta;
  return message('tool/result', data, { cites: p.cites ?? (callSeq === undefined ? undefined : [callSeq]), ...(p.replace ? { replace: p.replace } : {}) });
}

/** `turn/start`. */
export const turnStart = (turn: number): EventInput => event('turn/start', { turn });
/** `turn/end` with a reason kind or a full reason. */
export const turnEnd = (turn: number, reason: string | { kind: string; [k: string]: Json } = 'completed'): EventInput =>
  event('turn/end', { turn, reason: typeof reason === 'string' ? { kind: reason } : reason });
/** `step/start`. */
export const stepStart = (turn: number, step: number): EventInput => event('step/start', { turn, step });
/** `step/end`. */
export const stepEnd = (turn: number, step: number): EventInput => event('step/end', { turn, step });
/** `tool/call` (`args`: the raw JSON string exactly as the model produced it). */
export const toolCall = (callId: string, name: string, args: string, opts: { turn: number; step: number }): EventInput =>
  event('tool/call', { turn: opts.turn, step: opts.step, callId, name, arguments: args });
/** One `assistant/chunk`. */
export const chunk = (turn: number, step: number, c: StreamChunk): EventInput => event('assistant/chunk', { turn, step, chunk: c as Json });

/** A streamed text block: block-start, `parts` text deltas, block-end. */
export function textChunks(turn: number, step: number, t: string, opts: { index?: number; parts?: number } = {}): EventInput[] {
  const index = opts.index ?? 0;
  const size = Math.max(1, Math.ceil(t.length / Math.max(1, opts.parts ?? 1)));
  const deltas: string[] = [];
  for (let i = 0; i < t.length; i += size) deltas.push(t.slice(i, i + size));
  if (deltas.length === 0) deltas.push('');
  return [
    chunk(turn, step, { type: 'block-start', index, blockType: 'text' }),
    ...deltas.map((d) => chunk(turn, step, { type: 'text-delta', index, text: d })),
    chunk(turn, step, { type: 'block-end', index, block: text(t) }),
  ];
}

export { blobDigest, image, imageRef } from './blobs.js';
