/**
 * Issue #34 end to end (real server, generated client and the CLI): `palimpsest messages S
 * --format F --json` on the rich session (parallel calls, an image, reasoning, a compaction, a
 * pruned result) prints the array the provider takes, ids paired, for all four formats; paging
 * of rendered messages; HISTORY_NOT_RENDERABLE with its details and drop_unpaired; the pairing
 * guard's append refusals over gRPC; ImportMessages and `palimpsest import --from`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MessageFormat, MessageView } from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import type { CandidateEvent, Json } from '../../src/domain/event.js';
import { PROVIDER_FORMATS, renderedMessageTokens, type ProviderFormat } from '../../src/domain/render/index.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { cliFor, type CliResult } from '../support/cli.js';
import { input, userMessage, assistantMessage, toolResult } from '../support/events.js';
import { api, failure, type Api } from '../support/e2e.js';
import { richSessionBatches } from '../support/rich-session.js';
import { providerProblems, renderedCallIds } from '../support/provider-invariants.js';
import { tempDbDir } from '../support/temp-db.js';

let t: TestServer;
let a: Api;
let cli: (...args: string[]) => Promise<CliResult>;
beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
  a = api(t.client);
  cli = cliFor(t.server.address);
  await a.createSession({ sessionId: 'rich' });
  for (const b of richSessionBatches()) await a.appendEvents({ sessionId: 'rich', events: b.map(toInput) });
});
afterAll(async () => { await t.stop(); });

const FORMATS: Record<ProviderFormat, MessageFormat> = {
  'openai-chat': MessageFormat.MESSAGE_FORMAT_OPENAI_CHAT,
  'openai-responses': MessageFormat.MESSAGE_FORMAT_OPENAI_RESPONSES,
  anthropic: MessageFormat.MESSAGE_FORMAT_ANTHROPIC,
  gemini: MessageFormat.MESSAGE_FORMAT_GEMINI,
};
const messageFormatOf = (f: ProviderFormat): MessageFormat => FORMATS[f];

function toInput(c: CandidateEvent): EventInput {
  const op = c.surfaceOp;
  const surfaceOp: EventInput['surfaceOp'] = op === 'append' ? { $case: 'append', value: {} } : op === undefined ? undefined : { $case: 'replace', value: op as { start: number; end: number } };
  return input(c.type as string, c.data, { surfaceOp, sourceEventSeqs: c.sourceEventSeqs === undefined ? undefined : { seqs: c.sourceEventSeqs as number[] } });
}

describe('palimpsest messages --format', () => {
  it.each(PROVIDER_FORMATS)('%s --json prints the array the provider takes, tool ids paired', async (f) => {
    const r = await cli('messages', 'rich', '--format', f, '--json');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const msgs = JSON.parse(r.stdout) as unknown[];
    expect(providerProblems(f, msgs)).toEqual([]);
    expect(renderedCallIds(f, msgs)).toEqual(['toolu_01', 'toolu_02', 'toolu_03']);
  });

  it('--json --annotated prints {seqs, tokens, message} per message, the tokens as GetMessages gives them', async () => {
    const r = await cli('messages', 'rich', '--format', 'gemini', '--json', '--annotated');
    expect(r.stderr).toBe('');
    const xs = JSON.parse(r.stdout) as { seqs: number[]; tokens: number; message: unknown }[];
    const wire = await a.getMessages({ sessionId: 'rich', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format: MessageFormat.MESSAGE_FORMAT_GEMINI });
    expect(xs).toEqual(wire.rendered.map((m) => ({ seqs: m.seqs, tokens: m.tokens, message: JSON.parse(m.providerJson) as unknown })));
  });

  it('without --json prints each message with the seqs it came from and its tokens, then the total; an unknown format is a usage error', async () => {
    const r = await cli('messages', 'rich', '--format', 'anthropic');
    expect(r.stdout).toContain('# from seq 2, 12 · ≈');
    const wire = await a.getMessages({ sessionId: 'rich', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format: MessageFormat.MESSAGE_FORMAT_ANTHROPIC });
    expect(r.stdout).toContain(`# ${wire.rendered.length} messages · ≈${wire.rendered.reduce((s, m) => s + m.tokens, 0)} tokens`);
    const bad = await cli('messages', 'rich', '--format', 'cohere');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('openai-chat, openai-responses, anthropic, gemini');
  });
});

describe('GetMessages format over gRPC', () => {
  it.each(PROVIDER_FORMATS)('%s: every rendered message carries the estimator\'s count of what it carries', async (f) => {
    const res = await a.getMessages({ sessionId: 'rich', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format: messageFormatOf(f) });
    expect(res.rendered.length).toBeGreaterThan(0);
    for (const m of res.rendered) {
      expect(m.tokens).toBeGreaterThan(4);
      expect(m.tokens).toBe(renderedMessageTokens(f, JSON.parse(m.providerJson) as Json));
    }
  });

  it('pages count rendered messages; the pages concatenated equal the whole; the transcript view is refused', async () => {
    const whole = await a.getMessages({ sessionId: 'rich', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format: MessageFormat.MESSAGE_FORMAT_ANTHROPIC });
    expect(whole.messages).toEqual([]);
    expect(whole.rendered.map((m) => m.seqs)).toEqual([[2, 12], [3], [6, 7], [8], [14], [11], [15]]);
    const pages: string[] = [];
    let pageToken = '';
    do {
      const p = await a.getMessages({ sessionId: 'rich', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format: MessageFormat.MESSAGE_FORMAT_ANTHROPIC, pageSize: 3, pageToken });
      pages.push(...p.rendered.map((m) => m.providerJson));
      pageToken = p.nextPageToken;
    } while (pageToken !== '');
    expect(pages).toEqual(whole.rendered.map((m) => m.providerJson));
    const err = await failure(a.getMessages({ sessionId: 'rich', view: MessageView.MESSAGE_VIEW_TRANSCRIPT, format: MessageFormat.MESSAGE_FORMAT_GEMINI }));
    expect([err.code, err.reason]).toEqual([status.INVALID_ARGUMENT, 'FORMAT_NEEDS_MODEL_HISTORY']);
    // DSH is today's shape.
    const dsh = await a.getMessages({ sessionId: 'rich', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format: MessageFormat.MESSAGE_FORMAT_DSH });
    expect(dsh.messages.map((m) => m.seq)).toEqual([12, 2, 3, 6, 7, 8, 14, 11, 15]);
  });

  it('an old log with an orphan result (guard off) is HISTORY_NOT_RENDERABLE naming seq and rule; drop_unpaired renders it', async () => {
    await a.createSession({ sessionId: 'old', pairingGuard: false });
    await a.appendEvents({ sessionId: 'old', events: [userMessage('u', 'hi'), toolResult('r', 'ghost', 'lost'), userMessage('u2', 'next')] });
    const err = await failure(a.getMessages({ sessionId: 'old', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format: MessageFormat.MESSAGE_FORMAT_OPENAI_CHAT }));
    expect([err.code, err.reason]).toEqual([status.FAILED_PRECONDITION, 'HISTORY_NOT_RENDERABLE']);
    expect(err.metadata).toMatchObject({ seq: '1', rule: 'tool-result-follows-its-call', format: 'openai-chat' });
    const ok = await a.getMessages({ sessionId: 'old', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format: MessageFormat.MESSAGE_FORMAT_OPENAI_CHAT, dropUnpaired: true });
    expect(ok.rendered.map((m) => JSON.parse(m.providerJson) as unknown)).toEqual([{ role: 'user', content: 'hi' }, { role: 'user', content: 'next' }]);
  });
});

describe('the pairing guard on appends over gRPC', () => {
  it('an orphan result and a user message after an unanswered call are refused (FAILED_PRECONDITION, reasons, callId/callSeq, index), the log unchanged', async () => {
    await a.createSession({ sessionId: 'guard' });
    await a.appendEvents({ sessionId: 'guard', events: [userMessage('u0', 'hi'), assistantMessage('a1', 'calling', [], [{ id: 'k', name: 'read' }])] });
    const orphan = await failure(a.appendEvents({ sessionId: 'guard', events: [toolResult('r', 'ghost', 'x')] }));
    expect([orphan.code, orphan.reason, orphan.metadata['callId'], orphan.metadata['index']]).toEqual([status.FAILED_PRECONDITION, 'TOOL_RESULT_ORPHANED', 'ghost', '0']);
    const missing = await failure(a.appendEvents({ sessionId: 'guard', events: [userMessage('u2', 'next')] }));
    expect([missing.code, missing.reason, missing.metadata['callId'], missing.metadata['callSeq'], missing.metadata['index']]).toEqual([status.FAILED_PRECONDITION, 'TOOL_RESULT_MISSING', 'k', '1', '0']);
    expect((await a.getSession({ sessionId: 'guard' })).session?.headSeq).toBe(1);
  });
});

describe('ImportMessages and palimpsest import --from', () => {
  it('imports an Anthropic conversation that renders back to itself; a bad one is IMPORT_MESSAGES_INVALID with its index', async () => {
    const x = [
      { role: 'user', content: [{ type: 'text', text: 'list files' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'ok' }, { type: 'tool_use', id: 'toolu_9', name: 'bash', input: { cmd: 'ls' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_9', content: [{ type: 'text', text: 'a b' }] }, { type: 'text', text: 'thanks' }] },
    ];
    await a.createSession({ sessionId: 'imp' });
    const res = await a.importMessages({ sessionId: 'imp', format: MessageFormat.MESSAGE_FORMAT_ANTHROPIC, messagesJson: JSON.stringify(x) });
    expect(res.seqs).toEqual([0, 1, 2, 3, 4]);
    const back = await a.getMessages({ sessionId: 'imp', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, format: MessageFormat.MESSAGE_FORMAT_ANTHROPIC });
    expect(back.rendered.map((m) => JSON.parse(m.providerJson) as unknown)).toEqual(x);
    const bad = await failure(a.importMessages({ sessionId: 'imp', format: MessageFormat.MESSAGE_FORMAT_OPENAI_CHAT, messagesJson: JSON.stringify([{ role: 'system', content: 'x' }]) }));
    expect([bad.code, bad.reason, bad.metadata['index']]).toEqual([status.INVALID_ARGUMENT, 'IMPORT_MESSAGES_INVALID', '0']);
    const unspecified = await failure(a.importMessages({ sessionId: 'imp', messagesJson: '[]' }));
    expect(unspecified.reason).toBe('FORMAT_UNSPECIFIED');
  });

  it('palimpsest import --from openai-chat FILE creates a session whose history renders back to the file', async () => {
    const dir = tempDbDir('pal-import-from-').root;
    const file = join(dir, 'chat.json');
    const x = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"p":"a"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'A' },
      { role: 'assistant', content: 'done' },
    ];
    writeFileSync(file, JSON.stringify(x));
    const r = await cli('import', '--from', 'openai-chat', file, '--id', 'from-chat');
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('from-chat');
    const back = await cli('messages', 'from-chat', '--format', 'openai-chat', '--json');
    expect(JSON.parse(back.stdout)).toEqual(x);
    // A refused import leaves no session behind.
    writeFileSync(file, JSON.stringify([{ role: 'tool', tool_call_id: 'nope', content: 'x' }]));
    const refused = await cli('import', '--from', 'openai-chat', file, '--id', 'from-bad');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('IMPORT_MESSAGES_INVALID');
    expect((await failure(a.getSession({ sessionId: 'from-bad' }))).reason).toBe('SESSION_NOT_FOUND');
  });
});
