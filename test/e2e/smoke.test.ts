import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { call, callError, startTestServer, type TestServer } from '../support/test-server.js';
import { input, userMessage, assistantMessage, replaceOp } from '../support/events.js';
import { MessageView } from '../../gen/palimpsest/v1/service.js';

let t: TestServer;
beforeAll(async () => { t = await startTestServer(); });
afterAll(async () => { await t.stop(); });

describe('smoke', () => {
  it('creates, appends, compacts and derives', async () => {
    const c = t.client;
    const { session } = await call(c.createSession.bind(c), { sessionId: 's1', labels: { a: 'b' }, strict: false });
    expect(session?.id).toBe('s1');
    const r1 = await call(c.appendEvents.bind(c), {
      sessionId: 's1', idempotencyKey: '', events: [
        input('turn/start', { turn: 1 }),
        userMessage('u1', 'hello'),
        input('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'hi' } }),
        assistantMessage('a1', 'hi', [2]),
      ],
    });
    expect(r1.seqs).toEqual([0, 1, 2, 3]);
    const r2 = await call(c.appendEvents.bind(c), {
      sessionId: 's1', idempotencyKey: '', events: [
        input('user/message', { id: 'sum', role: 'user', content: [{ type: 'text', text: 'summary' }], source: { kind: 'plugin', plugin: 'compact' } },
          { surfaceOp: replaceOp(1, 3), sourceEventSeqs: { seqs: [1, 3] } }),
      ],
    });
    expect(r2.seqs).toEqual([4]);
    const surf = await call(c.getSurface.bind(c), { sessionId: 's1' });
    expect(surf.seqs).toEqual([4]);
    const msgs = await call(c.getMessages.bind(c), { sessionId: 's1', view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, typed: true, pageSize: 0, pageToken: '', format: 0, dropUnpaired: false, blobRefs: false });
    expect(msgs.messages.map((m) => m.seq)).toEqual([4]);
    const tr = await call(c.getMessages.bind(c), { sessionId: 's1', view: MessageView.MESSAGE_VIEW_TRANSCRIPT, typed: false, pageSize: 0, pageToken: '', format: 0, dropUnpaired: false, blobRefs: false });
    expect(tr.messages.map((m) => m.seq)).toEqual([1, 3]);
    const err = await callError(c.appendEvents.bind(c), { sessionId: 's1', idempotencyKey: '', events: [userMessage('x', 'y'), input('user/message', {}, {})] });
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.metadata.index).toBe('1');
    const after = await call(c.getSurface.bind(c), { sessionId: 's1' });
    expect(after.seqs).toEqual([4]);
  });
});
