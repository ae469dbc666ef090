/**
 * Importing a conversation given in a provider's format (issue #34, ImportMessages): the inverse
 * of the renderers. The provider messages are read into the neutral steps (user content, assistant
 * content with tool calls, tool results), then written as the events the reference writes for
 * them: `user/message`; `assistant/message` (`sourceEventSeqs: []`, there are no chunks) followed
 * by one `tool/call` per call; one `tool/result` per result, citing its `tool/call`. Turns count
 * user messages, steps count assistant messages within a turn.
 *
 * For every history in the canonical subset (what the renderer of the format writes),
 * `render(import(x)) == x` (test/unit/provider-import.test.ts). Outside it, what has no place in a
 * model history is refused with IMPORT_MESSAGES_INVALID (system messages, a result whose call is
 * not before it), and what the renderers never write back is dropped: Responses `reasoning` items
 * (their encrypted content cannot be replayed from a log) and Anthropic `redacted_thinking`.
 */
import { DomainError } from '../errors.js';
import type { CandidateEvent, Json, JsonObject } from '../event.js';
import { isJsonObject } from '../json.js';
import type { ProviderFormat } from './index.js';

/** Reason of provider messages that cannot be imported. */
export const IMPORT_MESSAGES_INVALID = 'IMPORT_MESSAGES_INVALID';

type Obj = { readonly [key: string]: Json };

/** A neutral imported message. */
type Imported =
  | { readonly kind: 'user'; readonly content: JsonObject[] }
  | { readonly kind: 'assistant'; readonly content: JsonObject[] }
  | { readonly kind: 'result'; readonly callId: string; readonly content: JsonObject[]; readonly isError: boolean };

function invalid(index: number, what: string): DomainError {
  return new DomainError(IMPORT_MESSAGES_INVALID, `provider message ${index}: ${what}`, { index: String(index) });
}

function arr(v: Json | undefined): Obj[] {
  return Array.isArray(v) ? (v as Json[]).filter(isJsonObject) : [];
}

/** An image attachment from a URL (a `data:` URL becomes base64 with its media type). */
function imageFromUrl(url: string, mimeType?: string): JsonObject {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (m !== null) return { type: 'image', attachment: { mimeType: m[1] as string, data: m[2] as string } };
  return { type: 'image', attachment: mimeType === undefined ? { url } : { url, mimeType } };
}

function text(t: string): JsonObject {
  return { type: 'text', text: t };
}

/** Text or text parts (`text`, `input_text`, `output_text`, `refusal`) as blocks. */
function textBlocks(v: Json | undefined): JsonObject[] {
  if (typeof v === 'string') return v === '' ? [] : [text(v)];
  const out: JsonObject[] = [];
  for (const p of arr(v)) {
    const t = p['text'] ?? p['refusal'];
    if (typeof t === 'string') out.push(text(t));
  }
  return out;
}

function fromOpenAiChat(msgs: readonly Obj[]): Imported[] {
  const out: Imported[] = [];
  msgs.forEach((m, i) => {
    const role = m['role'];
    if (role === 'user') {
      const c = m['content'];
      const content: JsonObject[] = [];
      if (typeof c === 'string') content.push(text(c));
      else for (const p of arr(c)) {
        if (p['type'] === 'text' && typeof p['text'] === 'string') content.push(text(p['text']));
        else if (p['type'] === 'image_url' && isJsonObject(p['image_url']) && typeof p['image_url']['url'] === 'string') content.push(imageFromUrl(p['image_url']['url']));
      }
      out.push({ kind: 'user', content });
    } else if (role === 'assistant') {
      const content = textBlocks(m['content']);
      for (const c of arr(m['tool_calls'])) {
        const f = c['function'];
        if (typeof c['id'] !== 'string' || !isJsonObject(f)) throw invalid(i, 'a tool call needs an id and a function');
        content.push({ type: 'tool-call', id: c['id'], name: typeof f['name'] === 'string' ? f['name'] : '', arguments: typeof f['arguments'] === 'string' ? f['arguments'] : '' });
      }
      out.push({ kind: 'assistant', content });
    } else if (role === 'tool') {
      if (typeof m['tool_call_id'] !== 'string') throw invalid(i, 'a tool message needs tool_call_id');
      out.push({ kind: 'result', callId: m['tool_call_id'], content: textBlocks(m['content']), isError: false });
    } else {
      throw invalid(i, `role ${JSON.stringify(role)} is not part of a model history (system and developer messages belong in the request header); leave it out`);
    }
  });
  return out;
}

function responsesParts(v: Json | undefined): JsonObject[] {
  if (typeof v === 'string') return v === '' ? [] : [text(v)];
  const out: JsonObject[] = [];
  for (const p of arr(v)) {
    if ((p['type'] === 'input_text' || p['type'] === 'output_text') && typeof p['text'] === 'string') out.push(text(p['text']));
    else if (p['type'] === 'refusal' && typeof p['refusal'] === 'string') out.push(text(p['refusal']));
    else if (p['type'] === 'input_image' && typeof p['image_url'] === 'string') out.push(imageFromUrl(p['image_url']));
  }
  return out;
}

function fromOpenAiResponses(items: readonly Obj[]): Imported[] {
  const out: Imported[] = [];
  items.forEach((it, i) => {
    const type = it['type'] ?? 'message';
    if (type === 'message') {
      const role = it['role'];
      if (role === 'user') out.push({ kind: 'user', content: responsesParts(it['content']) });
      else if (role === 'assistant') out.push({ kind: 'assistant', content: responsesParts(it['content']) });
      else throw invalid(i, `role ${JSON.stringify(role)} is not part of a model history (system and developer messages belong in the request header); leave it out`);
    } else if (type === 'function_call') {
      if (typeof it['call_id'] !== 'string') throw invalid(i, 'a function_call needs call_id');
      const call: JsonObject = { type: 'tool-call', id: it['call_id'], name: typeof it['name'] === 'string' ? it['name'] : '', arguments: typeof it['arguments'] === 'string' ? it['arguments'] : '' };
      // Calls right after an assistant message (or another call) belong to it.
      const last = out[out.length - 1];
      if (last?.kind === 'assistant') last.content.push(call);
      else out.push({ kind: 'assistant', content: [call] });
    } else if (type === 'function_call_output') {
      if (typeof it['call_id'] !== 'string') throw invalid(i, 'a function_call_output needs call_id');
      out.push({ kind: 'result', callId: it['call_id'], content: responsesParts(it['output']), isError: false });
    } else if (type !== 'reasoning') {
      throw invalid(i, `item type ${JSON.stringify(type)} has no place in a model history`);
    }
  });
  return out;
}

function anthropicBlocks(v: Json | undefined): JsonObject[] {
  if (typeof v === 'string') return v === '' ? [] : [text(v)];
  const out: JsonObject[] = [];
  for (const b of arr(v)) {
    if (b['type'] === 'text' && typeof b['text'] === 'string') out.push(text(b['text']));
    else if (b['type'] === 'image' && isJsonObject(b['source'])) {
      const s = b['source'];
      if (s['type'] === 'base64' && typeof s['data'] === 'string' && typeof s['media_type'] === 'string') out.push({ type: 'image', attachment: { mimeType: s['media_type'], data: s['data'] } });
      else if (s['type'] === 'url' && typeof s['url'] === 'string') out.push({ type: 'image', attachment: { url: s['url'] } });
    }
  }
  return out;
}

function fromAnthropic(msgs: readonly Obj[]): Imported[] {
  const out: Imported[] = [];
  msgs.forEach((m, i) => {
    const c = m['content'];
    if (m['role'] === 'assistant') {
      const content: JsonObject[] = [];
      for (const b of typeof c === 'string' ? [{ type: 'text', text: c } as Obj] : arr(c)) {
        if (b['type'] === 'thinking' && typeof b['thinking'] === 'string') {
          content.push(typeof b['signature'] === 'string' ? { type: 'reasoning', text: b['thinking'], signature: b['signature'] } : { type: 'reasoning', text: b['thinking'] });
        } else if (b['type'] === 'tool_use') {
          if (typeof b['id'] !== 'string') throw invalid(i, 'a tool_use block needs an id');
          content.push({ type: 'tool-call', id: b['id'], name: typeof b['name'] === 'string' ? b['name'] : '', arguments: JSON.stringify(b['input'] ?? {}) });
        } else content.push(...anthropicBlocks([b]));
      }
      out.push({ kind: 'assistant', content });
    } else if (m['role'] === 'user') {
      const rest: Obj[] = [];
      for (const b of typeof c === 'string' ? [{ type: 'text', text: c } as Obj] : arr(c)) {
        if (b['type'] !== 'tool_result') {
          rest.push(b);
          continue;
        }
        if (typeof b['tool_use_id'] !== 'string') throw invalid(i, 'a tool_result block needs tool_use_id');
        out.push({ kind: 'result', callId: b['tool_use_id'], content: anthropicBlocks(b['content']), isError: b['is_error'] === true });
      }
      const content = anthropicBlocks(rest);
      if (content.length > 0) out.push({ kind: 'user', content });
    } else {
      throw invalid(i, `role ${JSON.stringify(m['role'])} is not user or assistant`);
    }
  });
  return out;
}

function fromGemini(contents: readonly Obj[]): Imported[] {
  const out: Imported[] = [];
  let generated = 0;
  // Calls waiting for a response: id -> name (a response without an id takes the first of its name).
  const open = new Map<string, string>();
  contents.forEach((c, i) => {
    const parts = arr(c['parts']);
    const role = c['role'] ?? 'user';
    if (role !== 'user' && role !== 'model') throw invalid(i, `role ${JSON.stringify(role)} is not user or model`);
    let current: JsonObject[] | null = null;
    // The content of the result just read: images right after a functionResponse are its own
    // (the renderer writes a result's images there).
    let lastResult: JsonObject[] | null = null;
    const block = (b: JsonObject): void => {
      if (lastResult !== null && b['type'] === 'image') {
        lastResult.push(b);
        return;
      }
      lastResult = null;
      if (current === null) {
        current = [];
        out.push(role === 'model' ? { kind: 'assistant', content: current } : { kind: 'user', content: current });
      }
      current.push(b);
    };
    for (const p of parts) {
      if (typeof p['text'] === 'string') {
        if (p['thought'] !== true) block(text(p['text']));
      } else if (isJsonObject(p['inlineData']) && typeof p['inlineData']['data'] === 'string') {
        block({ type: 'image', attachment: { mimeType: typeof p['inlineData']['mimeType'] === 'string' ? p['inlineData']['mimeType'] : 'application/octet-stream', data: p['inlineData']['data'] } });
      } else if (isJsonObject(p['fileData']) && typeof p['fileData']['fileUri'] === 'string') {
        const mt = p['fileData']['mimeType'];
        block({ type: 'image', attachment: typeof mt === 'string' ? { url: p['fileData']['fileUri'], mimeType: mt } : { url: p['fileData']['fileUri'] } });
      } else if (isJsonObject(p['functionCall'])) {
        const f = p['functionCall'];
        const id = typeof f['id'] === 'string' ? f['id'] : `gemini-call-${++generated}`;
        const name = typeof f['name'] === 'string' ? f['name'] : '';
        open.set(id, name);
        block({ type: 'tool-call', id, name, arguments: JSON.stringify(f['args'] ?? {}) });
      } else if (isJsonObject(p['functionResponse'])) {
        const f = p['functionResponse'];
        let id = typeof f['id'] === 'string' ? f['id'] : undefined;
        if (id === undefined) for (const [k, n] of open) if (n === f['name']) { id = k; break; }
        if (id === undefined) throw invalid(i, `a functionResponse for ${JSON.stringify(f['name'])} has no call before it`);
        open.delete(id);
        const r = isJsonObject(f['response']) ? f['response'] : {};
        const isError = r['error'] !== undefined && r['output'] === undefined;
        const v = isError ? r['error'] : r['output'] ?? r;
        current = null;
        const content: JsonObject[] = typeof v === 'string' ? (v === '' ? [] : [text(v)]) : [text(JSON.stringify(v))];
        lastResult = content;
        out.push({ kind: 'result', callId: id, content, isError });
      }
    }
  });
  return out;
}

/** What the events are written with. */
export interface ImportOptions {
  readonly sessionId: string;
  /** The session's next seq (the events get explicit seqs from it, so a result can cite its call). */
  readonly nextSeq: number;
  readonly provider?: string;
  readonly model?: string;
  /** Message ids are `<idPrefix><seq>` (default `imported:<sessionId>:`). */
  readonly idPrefix?: string;
  /** Calls already in the session (call id -> seq of its `tool/call`): a result may answer one of them. */
  readonly knownCalls?: ReadonlyMap<string, number>;
}

/** The call ids the results of `messages` answer (to look up the calls of earlier batches). */
export function resultCallIds(format: ProviderFormat, messages: Json): string[] {
  const ids: string[] = [];
  const msgs = Array.isArray(messages) ? (messages as Json[]).filter(isJsonObject) : [];
  for (const m of msgs) {
    if (format === 'openai-chat' && typeof m['tool_call_id'] === 'string') ids.push(m['tool_call_id']);
    else if (format === 'openai-responses' && m['type'] === 'function_call_output' && typeof m['call_id'] === 'string') ids.push(m['call_id']);
    else if (format === 'anthropic') for (const b of arr(m['content'])) { if (b['type'] === 'tool_result' && typeof b['tool_use_id'] === 'string') ids.push(b['tool_use_id']); }
    else if (format === 'gemini') for (const p of arr(m['parts'])) { const f = p['functionResponse']; if (isJsonObject(f) && typeof f['id'] === 'string') ids.push(f['id']); }
  }
  return ids;
}

const DEFAULT_PROVIDER: Record<ProviderFormat, string> = { 'openai-chat': 'openai', 'openai-responses': 'openai', anthropic: 'anthropic', gemini: 'google' };

/**
 * The events a conversation in `format` stands for (see the module comment), with explicit seqs
 * from `opts.nextSeq`.
 *
 * @throws DomainError IMPORT_MESSAGES_INVALID (metadata `index`)
 */
export function importProviderMessages(format: ProviderFormat, messages: Json, opts: ImportOptions): CandidateEvent[] {
  if (!Array.isArray(messages)) throw new DomainError(IMPORT_MESSAGES_INVALID, 'messages must be a JSON array of provider messages', { index: '-1' });
  const msgs = messages as Json[];
  msgs.forEach((m, i) => {
    if (!isJsonObject(m)) throw invalid(i, 'not a JSON object');
  });
  const objs = msgs as Obj[];
  const imported = format === 'openai-chat' ? fromOpenAiChat(objs) : format === 'openai-responses' ? fromOpenAiResponses(objs) : format === 'anthropic' ? fromAnthropic(objs) : fromGemini(objs);
  const source: JsonObject = { kind: 'model', provider: opts.provider ?? DEFAULT_PROVIDER[format], model: opts.model ?? 'imported' };
  const prefix = opts.idPrefix ?? `imported:${opts.sessionId}:`;
  const out: CandidateEvent[] = [];
  let seq = opts.nextSeq;
  let turn = 0;
  let step = 0;
  const callSeqs = new Map<string, number>();
  imported.forEach((m, i) => {
    if (m.kind === 'user') {
      turn++;
      step = 0;
      out.push({ type: 'user/message', seq, data: { id: `${prefix}${seq}`, role: 'user', content: m.content, source: { kind: 'user' } }, surfaceOp: 'append' });
      seq++;
    } else if (m.kind === 'assistant') {
      if (turn === 0) turn = 1;
      step++;
      out.push({ type: 'assistant/message', seq, data: { turn, step, message: { id: `${prefix}${seq}`, role: 'assistant', content: m.content, source } }, surfaceOp: 'append', sourceEventSeqs: [] });
      seq++;
      for (const b of m.content) {
        if (b['type'] !== 'tool-call') continue;
        callSeqs.set(b['id'] as string, seq);
        out.push({ type: 'tool/call', seq, data: { turn, step, callId: b['id'] as string, name: b['name'] as string, arguments: b['arguments'] as string } });
        seq++;
      }
    } else {
      const callSeq = callSeqs.get(m.callId) ?? opts.knownCalls?.get(m.callId);
      if (callSeq === undefined) throw invalid(i, `the result for call ${JSON.stringify(m.callId)} has no call before it`);
      const block: JsonObject = { type: 'tool-result', toolCallId: m.callId, content: m.content };
      if (m.isError) block['isError'] = true;
      out.push({
        type: 'tool/result', seq,
        data: { turn, step, message: { id: `${prefix}${seq}`, role: 'user', source: { kind: 'tool', callId: m.callId }, content: [block] } },
        surfaceOp: 'append', sourceEventSeqs: [callSeq],
      });
      seq++;
    }
  });
  return out;
}
