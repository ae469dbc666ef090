/**
 * GetMessages in pages: pages concatenated equal the whole projection; a model-history token goes
 * stale after a replace (PAGE_TOKEN_STALE), never after an append; transcript pages survive both.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { call, callError, startTestServer, type TestServer } from '../support/test-server.js';
import { input, replaceOp, userMessage } from '../support/events.js';
import { MessageView, type GetMessagesRequest } from '../../gen/palimpsest/v1/service.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
  const c = t.client;
  await call(c.createSession.bind(c), { sessionId: 'pg', labels: {}, strict: false });
  const events = Array.from({ length: 25 }, (_, i) => userMessage(`m${i}`, `text ${i}`));
  await call(c.appendEvents.bind(c), { sessionId: 'pg', idempotencyKey: '', events });
});
afterAll(async () => { await t.stop(); });

const req = (view: MessageView, pageSize: number, pageToken = '', typed = false): GetMessagesRequest => ({ sessionId: 'pg', view, typed, pageSize, pageToken, format: 0, dropUnpaired: false, blobRefs: false });

async function allPages(view: MessageView, pageSize: number, typed = false): Promise<number[]> {
  const c = t.client;
  const seqs: number[] = [];
  let token = '';
  let pages = 0;
  do {
    const r = await call(c.getMessages.bind(c), req(view, pageSize, token, typed));
    expect(r.messages.length).toBeLessThanOrEqual(pageSize);
    seqs.push(...r.messages.map((m) => m.seq));
    token = r.nextPageToken;
    pages++;
  } while (token !== '');
  expect(pages).toBe(Math.max(1, Math.ceil(seqs.length / pageSize)));
  return seqs;
}

describe('GetMessages pagination', () => {
  it('pages concatenated equal the whole projection, for both views and data forms', async () => {
    const c = t.client;
    for (const view of [MessageView.MESSAGE_VIEW_MODEL_HISTORY, MessageView.MESSAGE_VIEW_TRANSCRIPT]) {
      const whole = (await call(c.getMessages.bind(c), req(view, 0))).messages.map((m) => m.seq);
      expect(whole).toHaveLength(25);
      for (const size of [1, 7, 25, 100]) {
        expect(await allPages(view, size)).toEqual(whole);
        expect(await allPages(view, size, true)).toEqual(whole);
      }
    }
  });

  it('keeps a model-history token across appends, and refuses it after a replace', async () => {
    const c = t.client;
    const first = await call(c.getMessages.bind(c), req(MessageView.MESSAGE_VIEW_MODEL_HISTORY, 10));
    await call(c.appendEvents.bind(c), { sessionId: 'pg', idempotencyKey: '', events: [userMessage('late', 'appended')] });
    const second = await call(c.getMessages.bind(c), req(MessageView.MESSAGE_VIEW_MODEL_HISTORY, 10, first.nextPageToken));
    expect(second.messages.map((m) => m.seq)).toEqual([10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
    const transcriptFirst = await call(c.getMessages.bind(c), req(MessageView.MESSAGE_VIEW_TRANSCRIPT, 10));
    await call(c.appendEvents.bind(c), { sessionId: 'pg', idempotencyKey: '', events: [
      input('user/message', { id: 'sum', role: 'user', content: [{ type: 'text', text: 'summary' }], source: { kind: 'plugin', plugin: 'compact' } },
        { surfaceOp: replaceOp(0, 4), sourceEventSeqs: { seqs: [0, 1, 2, 3, 4] } }),
    ] });
    const stale = await callError(c.getMessages.bind(c), req(MessageView.MESSAGE_VIEW_MODEL_HISTORY, 10, second.nextPageToken));
    expect(stale.code).toBe(status.FAILED_PRECONDITION);
    expect(stale.reason).toBe('PAGE_TOKEN_STALE');
    // The transcript is in log order: its cursor survives replaces.
    const transcriptSecond = await call(c.getMessages.bind(c), req(MessageView.MESSAGE_VIEW_TRANSCRIPT, 10, transcriptFirst.nextPageToken));
    expect(transcriptSecond.messages.map((m) => m.seq)).toEqual([10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
  });

  it('rejects foreign tokens and oversized pages with their reasons', async () => {
    const c = t.client;
    const model = await call(c.getMessages.bind(c), req(MessageView.MESSAGE_VIEW_MODEL_HISTORY, 5));
    const wrongView = await callError(c.getMessages.bind(c), req(MessageView.MESSAGE_VIEW_TRANSCRIPT, 5, model.nextPageToken));
    expect(wrongView).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_PAGE_TOKEN' });
    const garbage = await callError(c.getMessages.bind(c), req(MessageView.MESSAGE_VIEW_MODEL_HISTORY, 5, 'not-a-token'));
    expect(garbage).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_PAGE_TOKEN' });
    const big = await callError(c.getMessages.bind(c), req(MessageView.MESSAGE_VIEW_MODEL_HISTORY, 100_000));
    expect(big).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'PAGE_SIZE_TOO_LARGE' });
    expect(big.metadata.limit).toBe('1000');
  });
});
