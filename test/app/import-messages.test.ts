/**
 * ImportMessages through the app (memory store, pairing guard on): a conversation saved in parts
 * (the call in one import, its output in the next, as an agent saving turn by turn does) cites the
 * tool/call of the earlier part; a result for a call the session never had is refused with
 * IMPORT_MESSAGES_INVALID and nothing is written; an unanswered call is caught by the guard.
 */
import { describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';

const ctx = ANONYMOUS;
const fc = (id: string): unknown => ({ type: 'function_call', call_id: id, name: 'read', arguments: '{}' });
const out = (id: string): unknown => ({ type: 'function_call_output', call_id: id, output: 'ok' });
const msg = (role: string, text: string): unknown => ({ type: 'message', role, content: text });

describe('ImportMessages in parts', () => {
  it('a result answering a call of an earlier import cites its tool/call; the history renders whole', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    await app.createSession(ctx, { id: 's' });
    expect((await app.importMessages(ctx, 's', { format: 'openai-responses', messagesJson: JSON.stringify([msg('user', 'hi'), fc('k')]) })).seqs).toEqual([0, 1, 2]);
    expect((await app.importMessages(ctx, 's', { format: 'openai-responses', messagesJson: JSON.stringify([out('k'), msg('assistant', 'done')]) })).seqs).toEqual([3, 4]);
    const [result] = await app.store.getEvents('s', [3]);
    expect(result?.sourceEventSeqs).toEqual([2]);
    const page = await app.getRenderedMessagesPage(ctx, 's', { format: 'openai-responses', pageSize: 0, pageToken: '' });
    expect(page.messages.map((m) => m.json)).toEqual([{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }, fc('k'), out('k'), msg('assistant', 'done')]);
  });

  it('a result for a call the session never had is IMPORT_MESSAGES_INVALID, nothing written; a message after an open call is TOOL_RESULT_MISSING', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    await app.createSession(ctx, { id: 's' });
    await app.importMessages(ctx, 's', { format: 'openai-responses', messagesJson: JSON.stringify([msg('user', 'hi'), fc('k')]) });
    await expect(app.importMessages(ctx, 's', { format: 'openai-responses', messagesJson: JSON.stringify([out('ghost')]) })).rejects.toMatchObject({ reason: 'IMPORT_MESSAGES_INVALID', metadata: { index: '0' } });
    await expect(app.importMessages(ctx, 's', { format: 'openai-responses', messagesJson: JSON.stringify([msg('user', 'again')]) })).rejects.toMatchObject({ reason: 'TOOL_RESULT_MISSING', metadata: { callId: 'k', callSeq: '1' } });
    expect((await app.getSession(ctx, 's')).headSeq).toBe(2);
  });
});

describe('the last rendering is reused while the history is unchanged', () => {
  it('a second read (or another page) answers the same objects; an append renders from the cut; as_of reads are not cached', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    await app.createSession(ctx, { id: 'c' });
    await app.importMessages(ctx, 'c', { format: 'openai-chat', messagesJson: JSON.stringify([{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }]) });
    const read = async (pageToken = '', pageSize = 0): Promise<{ messages: { json: unknown }[]; nextPageToken: string }> => app.getRenderedMessagesPage(ctx, 'c', { format: 'anthropic', pageSize, pageToken });
    const first = await read();
    const second = await read();
    expect(second.messages[0]).toBe(first.messages[0]);
    const p1 = await read('', 1);
    expect(p1.messages[0]).toBe(first.messages[0]);
    expect((await read(p1.nextPageToken, 1)).messages[0]).toBe(first.messages[1]);
    await app.importMessages(ctx, 'c', { format: 'openai-chat', messagesJson: JSON.stringify([{ role: 'user', content: 'c' }]) });
    const third = await read();
    expect(third.messages.map((m) => m.json)).toEqual([{ role: 'user', content: [{ type: 'text', text: 'a' }] }, { role: 'assistant', content: [{ type: 'text', text: 'b' }] }, { role: 'user', content: [{ type: 'text', text: 'c' }] }]);
    // Grown by appends: the messages before the cut (the assistant message) are reused, the rest rendered again.
    expect(third.messages[0]).toBe(first.messages[0]);
    expect(third.messages[1]).not.toBe(first.messages[1]);
    const asOf = await app.getRenderedMessagesPage(ctx, 'c', { format: 'anthropic', pageSize: 0, pageToken: '', asOfSeq: 1 });
    expect(asOf.messages.map((m) => m.json)).toEqual(first.messages.map((m) => m.json));
  });
});
