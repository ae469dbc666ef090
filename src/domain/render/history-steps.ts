/**
 * The provider-neutral step of rendering a model history for a provider (issue #34): the DSH
 * messages (GetMessages' shape: tool results as `role:"user"` messages with `tool-result` blocks)
 * regrouped into the three kinds every provider understands: user content, assistant content
 * (text, reasoning, images, tool calls) and the results answering the calls of the assistant
 * message right before them.
 *
 * The rule all four providers impose is checked here, once: every result answers a call of the
 * assistant message right before its run of results, and every call of that message is answered
 * in that run. A history that breaks it is refused with HISTORY_NOT_RENDERABLE (the seq and the
 * rule), unless `dropUnpaired`: then orphan results are left out and unanswered calls get the
 * result RepairSession would write for them (TOOL_OUTCOME_UNKNOWN's text, `isError: true`).
 *
 * Pure and O(messages); the content blocks are the log's frozen objects (never copied).
 */
import { DomainError } from '../errors.js';
import type { Json } from '../event.js';
import { isJsonObject } from '../json.js';
import type { MessageJson } from '../message-view.js';
import { TOOL_OUTCOME_UNKNOWN_TEXT } from '../repair.js';

/** Reason of a history a provider would refuse (FAILED_PRECONDITION). */
export const HISTORY_NOT_RENDERABLE = 'HISTORY_NOT_RENDERABLE';

/** The provider rules a history can break (metadata `rule` of HISTORY_NOT_RENDERABLE). */
export const RenderRule = {
  /** A tool result that does not answer a call of the assistant message right before its run of results. */
  RESULT_WITHOUT_CALL: 'tool-result-follows-its-call',
  /** A tool call not answered before the next message. */
  CALL_WITHOUT_RESULT: 'tool-call-answered-next',
  /** A tool call whose arguments are not a JSON object (Anthropic and Gemini take an object). */
  ARGUMENTS_NOT_OBJECT: 'tool-arguments-json-object',
} as const;

/** One model-history message with the seq it is projected from. */
export interface HistoryEntry {
  readonly seq: number;
  readonly message: MessageJson;
}

/** A content block (a JSON object of the log). */
export type Block = { readonly [key: string]: Json };

/** A tool result with the call it answers. */
export interface StepResult {
  readonly callId: string;
  /** Name of the call (Gemini's functionResponse needs it). */
  readonly name: string;
  /** The inner content blocks of the result. */
  readonly content: readonly Block[];
  readonly isError: boolean;
  /** Seq of the result's message; undefined for a result written by `dropUnpaired`. */
  readonly seq: number | undefined;
}

/** One regrouped message. */
export type Step =
  | { readonly kind: 'user'; readonly seq: number; readonly blocks: readonly Block[] }
  | { readonly kind: 'assistant'; readonly seq: number; readonly blocks: readonly Block[]; readonly message: MessageJson }
  | { readonly kind: 'results'; readonly results: StepResult[] };

/** Options of a rendering. */
export interface RenderOptions {
  /** Repair in the rendering instead of refusing (see the module comment). */
  readonly dropUnpaired?: boolean;
}

/** The content blocks of a message (a string content is one text block). */
export function blocksOf(m: MessageJson): Block[] {
  const c = m['content'];
  if (typeof c === 'string') return c === '' ? [] : [{ type: 'text', text: c }];
  if (!Array.isArray(c)) return [];
  return (c as Json[]).filter(isJsonObject);
}

/** The text of a text block list, joined (non-text blocks left out). */
export function textOf(blocks: readonly Block[]): string {
  let out = '';
  for (const b of blocks) if (b['type'] === 'text' && typeof b['text'] === 'string') out += (out === '' ? '' : '\n') + b['text'];
  return out;
}

/** HISTORY_NOT_RENDERABLE for `seq`, breaking `rule`, in `format`. */
export function notRenderable(format: string, seq: number, rule: string, what: string): DomainError {
  return new DomainError(
    HISTORY_NOT_RENDERABLE,
    `the model history cannot be rendered for ${format}: ${what} (seq ${seq}, rule ${rule}); repair the session (RepairSession, or append the missing result) or ask for drop_unpaired to repair in the rendering`,
    { seq: String(seq), rule, format },
  );
}

/** Regroups `entries` into steps (see the module comment). @throws DomainError HISTORY_NOT_RENDERABLE */
export function historySteps(entries: readonly HistoryEntry[], format: string, opts: RenderOptions = {}): Step[] {
  const out: Step[] = [];
  const drop = opts.dropUnpaired === true;
  // The calls of the last assistant message still waiting for a result: id -> name.
  let pending: Map<string, string> | null = null;
  let pendingSeq = -1;
  let run: StepResult[] | null = null;
  const close = (): void => {
    if (pending !== null && pending.size > 0) {
      const [callId] = pending.keys();
      if (!drop) throw notRenderable(format, pendingSeq, RenderRule.CALL_WITHOUT_RESULT, `the tool call ${JSON.stringify(callId)} has no result before the next message`);
      for (const [id, name] of pending) {
        (run ??= pushRun(out)).push({ callId: id, name, content: [{ type: 'text', text: TOOL_OUTCOME_UNKNOWN_TEXT }], isError: true, seq: undefined });
      }
    }
    pending = null;
    run = null;
  };
  for (const { seq, message } of entries) {
    const blocks = blocksOf(message);
    const others: Block[] = [];
    for (const b of blocks) {
      if (b['type'] !== 'tool-result') {
        others.push(b);
        continue;
      }
      const callId = typeof b['toolCallId'] === 'string' ? b['toolCallId'] : '';
      const name = pending?.get(callId);
      if (pending === null || name === undefined) {
        if (!drop) throw notRenderable(format, seq, RenderRule.RESULT_WITHOUT_CALL, `the tool result for call ${JSON.stringify(callId)} does not follow its call`);
        continue;
      }
      pending.delete(callId);
      const inner = b['content'];
      const content = typeof inner === 'string' ? [{ type: 'text', text: inner }] : Array.isArray(inner) ? (inner as Json[]).filter(isJsonObject) : [];
      (run ??= pushRun(out)).push({ callId, name, content, isError: b['isError'] === true, seq });
    }
    if (others.length === 0) continue;
    close();
    if (message['role'] === 'assistant') {
      out.push({ kind: 'assistant', seq, blocks: others, message });
      for (const b of others) {
        if (b['type'] !== 'tool-call' || typeof b['id'] !== 'string') continue;
        (pending ??= new Map()).set(b['id'], typeof b['name'] === 'string' ? b['name'] : '');
        pendingSeq = seq;
      }
    } else {
      out.push({ kind: 'user', seq, blocks: others });
    }
  }
  close();
  return out;
}

function pushRun(out: Step[]): StepResult[] {
  const results: StepResult[] = [];
  out.push({ kind: 'results', results });
  return results;
}

/** An image block's attachment as the providers take it: base64 data with a media type, or a URL. */
export type ImageSource = { readonly kind: 'base64'; readonly mediaType: string; readonly data: string } | { readonly kind: 'url'; readonly url: string; readonly mediaType: string | undefined };

/**
 * The source of an `image` block (`{type:"image", attachment}`): `attachment.data` (base64) with
 * `mimeType` / `mediaType`, a `data:` URL, or an `http(s)` `url`. Undefined when it has neither.
 */
export function imageSource(b: Block): ImageSource | undefined {
  const a = b['attachment'];
  if (!isJsonObject(a)) return undefined;
  const mt = typeof a['mimeType'] === 'string' ? a['mimeType'] : typeof a['mediaType'] === 'string' ? a['mediaType'] : undefined;
  const data = a['data'];
  if (typeof data === 'string' && mt !== undefined) return { kind: 'base64', mediaType: mt, data };
  const url = a['url'];
  if (typeof url === 'string') {
    const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
    if (m !== null) return { kind: 'base64', mediaType: m[1] as string, data: m[2] as string };
    return { kind: 'url', url, mediaType: mt };
  }
  return undefined;
}

/** The text standing in for an image a provider cannot take at that place. */
export function imagePlaceholder(b: Block): string {
  const a = b['attachment'];
  const name = isJsonObject(a) && typeof a['name'] === 'string' ? ` ${a['name']}` : '';
  return `[image${name}]`;
}

/** The parsed arguments of a tool call as a JSON object ('' is `{}`), or undefined when they are not one. */
export function argumentsObject(b: Block): { readonly [key: string]: Json } | undefined {
  const raw = b['arguments'];
  if (isJsonObject(raw)) return raw;
  if (typeof raw !== 'string') return raw === undefined ? {} : undefined;
  if (raw.trim() === '') return {};
  try {
    const v = JSON.parse(raw) as Json;
    return isJsonObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** The arguments of a tool call as the JSON text OpenAI takes. */
export function argumentsText(b: Block): string {
  const raw = b['arguments'];
  if (typeof raw === 'string') return raw;
  return JSON.stringify(raw ?? {});
}

/** One rendered provider message and the seqs of the events it comes from, ascending (what a renderer returns). */
export interface RenderedJson {
  readonly json: Json;
  readonly seqs: number[];
}

/** A rendered provider message with its estimated tokens (render/rendered-tokens.ts). */
export interface RenderedMessage extends RenderedJson {
  readonly tokens: number;
}

/** Seqs in first-seen order without duplicates, ascending. */
export function seqsOf(xs: readonly (number | undefined)[]): number[] {
  const s = new Set<number>();
  for (const x of xs) if (x !== undefined) s.add(x);
  return [...s].sort((a, b) => a - b);
}
