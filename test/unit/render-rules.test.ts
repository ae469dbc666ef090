/**
 * The renderers' rules (issue #34), each named and tested on the rich session (image, signed and
 * unsigned reasoning, parallel calls, an error result with an image, a compaction summary, a
 * pruned result) and on hand-built histories: ids kept, results where each provider wants them,
 * roles alternating, reasoning only where it goes back, images, HISTORY_NOT_RENDERABLE and
 * drop_unpaired. The rendered rich session is also committed as typed TypeScript
 * (test/fixtures/rendered/rich-session.ts) that `tsc` checks against the providers' SDK types.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { DomainError } from '../../src/domain/errors.js';
import type { Json } from '../../src/domain/event.js';
import type { MessageJson } from '../../src/domain/message-view.js';
import { TOOL_OUTCOME_UNKNOWN_TEXT } from '../../src/domain/repair.js';
import { PROVIDER_FORMATS, renderHistory, type HistoryEntry, type ProviderFormat } from '../../src/domain/render/index.js';
import { PNG, richSessionBatches } from '../support/rich-session.js';
import { providerProblems, renderedCallIds } from '../support/provider-invariants.js';
import * as committed from '../fixtures/rendered/rich-session.js';

const ctx = ANONYMOUS;
let rich: HistoryEntry[];

beforeAll(async () => {
  const app = new SessionService(new MemorySessionStore(), undefined, () => 1_000);
  await app.createSession(ctx, { id: 'rich' });
  for (const b of richSessionBatches()) await app.append(ctx, 'rich', b);
  rich = (await app.getMessages(ctx, 'rich', 'model')).messages.map((m) => ({ seq: m.seq, message: m.message as MessageJson }));
});

const json = (f: ProviderFormat, h: HistoryEntry[] = rich, dropUnpaired = false): Record<string, unknown>[] => renderHistory(f, h, { dropUnpaired }).map((r) => r.json as Record<string, unknown>);

const EXPORTS: Record<ProviderFormat, string> = { 'openai-chat': 'openaiChat', 'openai-responses': 'openaiResponses', anthropic: 'anthropic', gemini: 'gemini' };

describe('the rich session', () => {
  it('has the expected surface (summary first, pruned copy in place)', () => {
    expect(rich.map((e) => e.seq)).toEqual([12, 2, 3, 6, 7, 8, 14, 11, 15]);
  });

  it.each(PROVIDER_FORMATS)('%s: passes the provider invariants and keeps every call id in order', (f) => {
    expect(providerProblems(f, json(f))).toEqual([]);
    expect(renderedCallIds(f, json(f))).toEqual(['toolu_01', 'toolu_02', 'toolu_03']);
  });

  it.each(PROVIDER_FORMATS)('%s: equals the committed typed fixture that tsc checks against the SDK types', (f) => {
    const rendered = renderHistory(f, rich);
    if (process.env['UPDATE_RENDER_FIXTURE'] === '1') writeFixture();
    expect((committed as Record<string, unknown>)[EXPORTS[f]]).toEqual(rendered.map((r) => r.json));
  });

  it('openai-chat: one tool message per result right after the assistant message, reasoning left out, images as data URLs in user messages only', () => {
    const m = json('openai-chat');
    expect(m.map((x) => x['role'])).toEqual(['user', 'user', 'assistant', 'tool', 'tool', 'assistant', 'tool', 'assistant', 'user']);
    expect(m[1]!['content']).toEqual([{ type: 'text', text: 'Read both files; here is a screenshot.' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } }]);
    expect(m[2]).toEqual({ role: 'assistant', content: 'Reading both.', tool_calls: [
      { id: 'toolu_01', type: 'function', function: { name: 'read', arguments: '{"path":"a.txt"}' } },
      { id: 'toolu_02', type: 'function', function: { name: 'read', arguments: '{"path":"b.png"}' } },
    ] });
    expect(m[4]).toEqual({ role: 'tool', tool_call_id: 'toolu_02', content: 'binary file\n[image]' });
    expect(m[5]).toEqual({ role: 'assistant', content: null, tool_calls: [{ id: 'toolu_03', type: 'function', function: { name: 'bash', arguments: '{"cmd":"ls"}' } }] });
    expect(m[6]).toEqual({ role: 'tool', tool_call_id: 'toolu_03', content: 'xxxx…[pruned]' });
  });

  it('openai-responses: function_call items and function_call_output items (with an input_image for the image result)', () => {
    const m = json('openai-responses');
    expect(m.map((x) => x['type'])).toEqual(['message', 'message', 'message', 'function_call', 'function_call', 'function_call_output', 'function_call_output', 'function_call', 'function_call_output', 'message', 'message']);
    expect(m[3]).toEqual({ type: 'function_call', call_id: 'toolu_01', name: 'read', arguments: '{"path":"a.txt"}' });
    expect(m[6]).toEqual({ type: 'function_call_output', call_id: 'toolu_02', output: [{ type: 'input_text', text: 'binary file' }, { type: 'input_image', detail: 'auto', image_url: `data:image/png;base64,${PNG}` }] });
  });

  it('anthropic: alternating roles (summary and user merged), signed thinking kept, unsigned left out, tool_result blocks first in the next user message', () => {
    const r = renderHistory('anthropic', rich);
    expect(r.map((x) => (x.json as { role: string }).role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user']);
    expect(r.map((x) => x.seqs)).toEqual([[2, 12], [3], [6, 7], [8], [14], [11], [15]]);
    const m = r.map((x) => x.json as { content: Record<string, unknown>[] });
    expect(m[1]!.content[0]).toEqual({ type: 'thinking', thinking: 'Two reads, in parallel.', signature: 'sig-abc' });
    expect(m[1]!.content[2]).toEqual({ type: 'tool_use', id: 'toolu_01', name: 'read', input: { path: 'a.txt' } });
    expect(m[2]!.content[1]).toEqual({ type: 'tool_result', tool_use_id: 'toolu_02', is_error: true, content: [{ type: 'text', text: 'binary file' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } }] });
    expect(m[3]!.content).toEqual([{ type: 'tool_use', id: 'toolu_03', name: 'bash', input: { cmd: 'ls' } }]);
  });

  it('gemini: user/model alternation, functionCall ids kept, functionResponse with output or error, inlineData images', () => {
    const m = json('gemini') as { role: string; parts: Record<string, unknown>[] }[];
    expect(m.map((x) => x.role)).toEqual(['user', 'model', 'user', 'model', 'user', 'model', 'user']);
    expect(m[0]!.parts[2]).toEqual({ inlineData: { mimeType: 'image/png', data: PNG } });
    expect(m[1]!.parts).toEqual([{ text: 'Reading both.' }, { functionCall: { id: 'toolu_01', name: 'read', args: { path: 'a.txt' } } }, { functionCall: { id: 'toolu_02', name: 'read', args: { path: 'b.png' } } }]);
    expect(m[2]!.parts).toEqual([
      { functionResponse: { id: 'toolu_01', name: 'read', response: { output: 'contents of a' } } },
      { functionResponse: { id: 'toolu_02', name: 'read', response: { error: 'binary file' } } },
      { inlineData: { mimeType: 'image/png', data: PNG } },
    ]);
  });
});

function writeFixture(): void {
  const body = (f: ProviderFormat): string => JSON.stringify(renderHistory(f, rich).map((r) => r.json), null, 2);
  writeFileSync(new URL('../fixtures/rendered/rich-session.ts', import.meta.url), `/**
 * The rich session (test/support/rich-session.ts) rendered for each provider, typed with the
 * providers' own SDK request types: \`tsc\` (npm run typecheck) fails if a renderer writes what
 * the SDK does not accept. Generated: UPDATE_RENDER_FIXTURE=1 npx vitest run --project main
 * test/unit/render-rules.test.ts; test/unit/render-rules.test.ts checks it is current.
 */
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { ResponseInputItem } from 'openai/resources/responses/responses';
import type { MessageParam } from '@anthropic-ai/sdk/resources/messages';
import type { Content } from '@google/genai';

export const openaiChat: ChatCompletionMessageParam[] = ${body('openai-chat')};

export const openaiResponses: ResponseInputItem[] = ${body('openai-responses')};

export const anthropic: MessageParam[] = ${body('anthropic')};

export const gemini: Content[] = ${body('gemini')};
`);
}

const u = (seq: number, text: string): HistoryEntry => ({ seq, message: { id: `u${seq}`, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } } });
const a = (seq: number, calls: string[], text = ''): HistoryEntry => ({ seq, message: { id: `a${seq}`, role: 'assistant', content: [...(text ? [{ type: 'text', text }] : []), ...calls.map((id) => ({ type: 'tool-call', id, name: 'read', arguments: '{}' }))] as Json[], source: { kind: 'model', provider: 'p', model: 'm' } } });
const r = (seq: number, callId: string): HistoryEntry => ({ seq, message: { id: `r${seq}`, role: 'user', content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: `out ${callId}` }] }], source: { kind: 'tool', callId } } });

function refusal(f: ProviderFormat, h: HistoryEntry[]): Record<string, string> {
  try {
    renderHistory(f, h);
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    return { reason: (e as DomainError).reason, ...(e as DomainError).metadata };
  }
  throw new Error('not refused');
}

describe('HISTORY_NOT_RENDERABLE and drop_unpaired', () => {
  const orphan = [u(0, 'hi'), r(1, 'ghost'), u(2, 'next')];
  const unanswered = [u(0, 'hi'), a(1, ['c1', 'c2']), r(2, 'c2'), u(3, 'next')];

  it.each(PROVIDER_FORMATS)('%s: an orphan result is refused naming its seq and the rule; drop_unpaired leaves it out', (f) => {
    expect(refusal(f, orphan)).toEqual({ reason: 'HISTORY_NOT_RENDERABLE', seq: '1', rule: 'tool-result-follows-its-call', format: f });
    const out = renderHistory(f, orphan, { dropUnpaired: true });
    expect(out.flatMap((x) => x.seqs)).toEqual([0, 2]);
    expect(providerProblems(f, out.map((x) => x.json))).toEqual([]);
  });

  it.each(PROVIDER_FORMATS)('%s: a call without a result before the next message is refused at the call; drop_unpaired answers it with the RepairSession text', (f) => {
    expect(refusal(f, unanswered)).toEqual({ reason: 'HISTORY_NOT_RENDERABLE', seq: '1', rule: 'tool-call-answered-next', format: f });
    const out = renderHistory(f, unanswered, { dropUnpaired: true }).map((x) => x.json);
    expect(providerProblems(f, out)).toEqual([]);
    expect(JSON.stringify(out)).toContain(JSON.stringify(TOOL_OUTCOME_UNKNOWN_TEXT).slice(1, 40));
  });

  it.each(PROVIDER_FORMATS)('%s: a result after an intervening message is an orphan (the call went unanswered first)', (f) => {
    const h = [u(0, 'hi'), a(1, ['c1']), u(2, 'interrupt'), r(3, 'c1')];
    expect(refusal(f, h)).toMatchObject({ seq: '1', rule: 'tool-call-answered-next' });
    // Repaired: the call answered right after it, the late result left out.
    const out = renderHistory(f, h, { dropUnpaired: true });
    expect(providerProblems(f, out.map((x) => x.json))).toEqual([]);
    expect(out.flatMap((x) => x.seqs)).not.toContain(3);
  });

  it.each(['anthropic', 'gemini'] as const)('%s: tool arguments that are not a JSON object are refused (the API takes an object)', (f) => {
    const bad: HistoryEntry = { seq: 1, message: { id: 'a', role: 'assistant', content: [{ type: 'tool-call', id: 'k', name: 'n', arguments: '[1' }], source: { kind: 'model' } } };
    expect(refusal(f, [u(0, 'hi'), bad, r(2, 'k')])).toMatchObject({ seq: '1', rule: 'tool-arguments-json-object' });
    expect(() => renderHistory('openai-chat', [u(0, 'hi'), bad, r(2, 'k')])).not.toThrow();
  });

  it('parallel results in any order pair up; adjacent user messages merge for anthropic and gemini only', () => {
    const h = [u(0, 'a'), u(1, 'b'), a(2, ['x', 'y']), r(3, 'y'), r(4, 'x'), u(5, 'c')];
    for (const f of PROVIDER_FORMATS) expect(providerProblems(f, json(f, h))).toEqual([]);
    expect(json('openai-chat', h).map((m) => m['role'])).toEqual(['user', 'user', 'assistant', 'tool', 'tool', 'user']);
    expect(renderHistory('anthropic', h).map((m) => m.seqs)).toEqual([[0, 1], [2], [3, 4, 5]]);
  });
});

describe('images as each provider takes them', () => {
  const url: HistoryEntry = { seq: 0, message: { id: 'u', role: 'user', content: [{ type: 'image', attachment: { url: 'https://example.com/a.png', mimeType: 'image/png' } }, { type: 'image', attachment: { url: `data:image/jpeg;base64,${PNG}` } }], source: { kind: 'user' } } };
  const asstImage: HistoryEntry = { seq: 1, message: { id: 'a', role: 'assistant', content: [{ type: 'image', attachment: { mimeType: 'image/png', data: PNG, name: 'x.png' } }], source: { kind: 'model' } } };

  it('a URL stays a URL and a data: URL becomes base64 with its media type', () => {
    expect(json('openai-chat', [url])[0]!['content']).toEqual([{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }, { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${PNG}` } }]);
    expect(json('openai-responses', [url])[0]!['content']).toEqual([{ type: 'input_image', detail: 'auto', image_url: 'https://example.com/a.png' }, { type: 'input_image', detail: 'auto', image_url: `data:image/jpeg;base64,${PNG}` }]);
    expect(json('anthropic', [url])[0]!['content']).toEqual([{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }, { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: PNG } }]);
    expect(json('gemini', [url])[0]!['parts']).toEqual([{ fileData: { fileUri: 'https://example.com/a.png', mimeType: 'image/png' } }, { inlineData: { mimeType: 'image/jpeg', data: PNG } }]);
  });

  it('an image in an assistant message is a placeholder where the provider takes none there (Chat, Responses, Anthropic)', () => {
    const h = [u(0, 'hi'), asstImage];
    expect(json('openai-chat', h)[1]).toEqual({ role: 'assistant', content: '[image x.png]' });
    expect(json('openai-responses', h)[1]).toEqual({ type: 'message', role: 'assistant', content: '[image x.png]' });
    expect(json('anthropic', h)[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: '[image x.png]' }] });
    expect(json('gemini', h)[1]).toEqual({ role: 'model', parts: [{ inlineData: { mimeType: 'image/png', data: PNG } }] });
  });
});

describe('the committed typed fixture', () => {
  it('imports the SDK request types (so tsc checks every rendered message against them)', () => {
    const text = readFileSync(new URL('../fixtures/rendered/rich-session.ts', import.meta.url), 'utf8');
    for (const t of ['ChatCompletionMessageParam[]', 'ResponseInputItem[]', 'MessageParam[]', 'Content[]']) expect(text).toContain(t);
  });
});
