/**
 * AppendStream (issue #37): AppendEvents batches on one bidirectional stream. Each batch has the
 * unary call's atomicity, expected_last_seq, idempotency and limits; a refused batch fails alone
 * (its google.rpc.Status in the response, the log untouched) and the stream goes on; a session's
 * responses come in request order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { TEST_STORE, call, startTestServer, type TestServer } from '../support/test-server.js';
import { userMessage } from '../support/events.js';
import type { AppendEventsRequest, AppendStreamResponse } from '../../gen/palimpsest/v1/service.js';
import { ErrorInfo } from '../../gen/google/rpc/error_details.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
  for (const id of ['as-a', 'as-b', 'as-c']) await call(t.client.createSession.bind(t.client), { sessionId: id, labels: {} } as never);
});
afterAll(async () => t.stop());

/** Sends `batches` on one stream (of `server`), half-closes, and collects every response until the stream ends. */
function stream(batches: { correlationId: string; append: Partial<AppendEventsRequest> | undefined }[], server: TestServer = t): Promise<{ responses: AppendStreamResponse[]; code: number }> {
  return new Promise((resolve, reject) => {
    const s = server.client.appendStream();
    const responses: AppendStreamResponse[] = [];
    s.on('data', (r: AppendStreamResponse) => responses.push(r));
    s.on('error', (e: { code: number }) => resolve({ responses, code: e.code }));
    s.on('end', () => resolve({ responses, code: status.OK }));
    s.on('status', () => undefined);
    try {
      for (const b of batches) {
        s.write({ correlationId: b.correlationId, append: b.append === undefined ? undefined : { sessionId: '', events: [], idempotencyKey: '', ...b.append } });
      }
      s.end();
    } catch (e) {
      reject(e);
    }
  });
}

/** The session's event count (GetSession). */
const eventCount = async (session: string): Promise<number> => Number((await call(t.client.getSession.bind(t.client), { sessionId: session })).session?.eventCount);

describe('AppendStream', () => {
  it('appends batches for several sessions, answers each by its correlation id, a session in request order', async () => {
    const batches = Array.from({ length: 60 }, (_, i) => ({
      correlationId: `c${i}`,
      append: { sessionId: ['as-a', 'as-b', 'as-c'][i % 3]!, events: [userMessage(`u${i}`, `hello ${i}`), userMessage(`v${i}`, 'again')] },
    }));
    const { responses, code } = await stream(batches);
    expect(code).toBe(status.OK);
    expect(responses.map((r) => r.correlationId).sort()).toEqual(batches.map((b) => b.correlationId).sort());
    for (const session of ['as-a', 'as-b', 'as-c']) {
      const mine = responses.filter((r) => batches.find((b) => b.correlationId === r.correlationId)!.append.sessionId === session);
      // In request order, with contiguous seqs: batch k of the session got seqs 2k, 2k+1.
      expect(mine.map((r) => r.correlationId)).toEqual(batches.filter((b) => b.append.sessionId === session).map((b) => b.correlationId));
      expect(mine.map((r) => (r.result?.$case === 'appended' ? r.result.value.seqs : []))).toEqual(mine.map((_, k) => [2 * k, 2 * k + 1]));
      expect(await eventCount(session)).toBe(40);
    }
  });

  it('a refused batch fails alone with the unary call\'s status and details, leaving the log untouched; the stream goes on', async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'as-r', labels: {} } as never);
    const { responses, code } = await stream([
      { correlationId: 'ok-1', append: { sessionId: 'as-r', events: [userMessage('u1', 'one')], expectedLastSeq: -1 } },
      // Stale head: HEAD_MISMATCH, FAILED_PRECONDITION, nothing appended.
      { correlationId: 'stale', append: { sessionId: 'as-r', events: [userMessage('u2', 'two')], expectedLastSeq: -1 } },
      // A session that does not exist.
      { correlationId: 'missing', append: { sessionId: 'as-none', events: [userMessage('u3', 'three')] } },
      // No batch at all.
      { correlationId: 'empty', append: undefined },
      { correlationId: 'ok-2', append: { sessionId: 'as-r', events: [userMessage('u4', 'four')], expectedLastSeq: 0 } },
    ]);
    expect(code).toBe(status.OK);
    const by = new Map(responses.map((r) => [r.correlationId, r.result]));
    expect(by.get('ok-1')).toMatchObject({ $case: 'appended', value: { seqs: [0] } });
    expect(by.get('ok-2')).toMatchObject({ $case: 'appended', value: { seqs: [1] } });
    const reasonOf = (id: string): [number, string] => {
      const r = by.get(id);
      if (r?.$case !== 'error') throw new Error(`${id} was not refused`);
      const info = r.value.details.find((d) => d.typeUrl.endsWith('google.rpc.ErrorInfo'))!;
      return [r.value.code, ErrorInfo.decode(info.value).reason];
    };
    expect(reasonOf('stale')).toEqual([status.FAILED_PRECONDITION, 'HEAD_MISMATCH']);
    expect(reasonOf('missing')).toEqual([status.NOT_FOUND, 'SESSION_NOT_FOUND']);
    expect(reasonOf('empty')).toEqual([status.INVALID_ARGUMENT, 'INVALID_ARGUMENT']);
    // Only the two accepted batches are in the log.
    expect(await eventCount('as-r')).toBe(2);
  });

  it('idempotency keys replay their stored result, a reused key with other events is refused', async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'as-i', labels: {} } as never);
    const first = await stream([{ correlationId: 'k1', append: { sessionId: 'as-i', events: [userMessage('u1', 'x')], idempotencyKey: 'key-1' } }]);
    const again = await stream([
      { correlationId: 'k1-again', append: { sessionId: 'as-i', events: [userMessage('u1', 'x')], idempotencyKey: 'key-1' } },
      { correlationId: 'k1-other', append: { sessionId: 'as-i', events: [userMessage('u9', 'y')], idempotencyKey: 'key-1' } },
    ]);
    expect(first.responses[0]!.result).toMatchObject({ $case: 'appended', value: { seqs: [0], replayed: false } });
    expect(again.responses[0]!.result).toMatchObject({ $case: 'appended', value: { seqs: [0], replayed: true } });
    expect(again.responses[1]!.result).toMatchObject({ $case: 'error', value: { code: status.FAILED_PRECONDITION } });
    expect(await eventCount('as-i')).toBe(1);
  });

  it('request bounds are checked per batch: an over-long session id or correlation id refuses that batch only', async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'as-b2', labels: {} } as never);
    const { responses, code } = await stream([
      { correlationId: 'long-id', append: { sessionId: 'x'.repeat(60_000), events: [userMessage('u1', 'x')] } },
      { correlationId: 'y'.repeat(300), append: { sessionId: 'as-b2', events: [userMessage('u2', 'x')] } },
      { correlationId: 'fine', append: { sessionId: 'as-b2', events: [userMessage('u3', 'x')] } },
    ]);
    expect(code).toBe(status.OK);
    expect(responses.map((r) => [r.correlationId, r.result?.$case === 'error' ? r.result.value.code : 'ok'])).toEqual(expect.arrayContaining([
      ['long-id', status.INVALID_ARGUMENT], ['', status.INVALID_ARGUMENT], ['fine', 'ok'],
    ]));
    expect(await eventCount('as-b2')).toBe(1);
  });

  it('a session\'s batches apply in request order even when one waits for its idempotency lookup', async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'as-o', labels: {} } as never);
    const { responses } = await stream([
      { correlationId: 'keyed', append: { sessionId: 'as-o', events: [userMessage('k1', 'first')], idempotencyKey: 'ord-1' } },
      { correlationId: 'plain', append: { sessionId: 'as-o', events: [userMessage('p1', 'second')] } },
      { correlationId: 'keyed-2', append: { sessionId: 'as-o', events: [userMessage('k2', 'third')], idempotencyKey: 'ord-2' } },
    ]);
    expect(responses.map((r) => [r.correlationId, r.result?.$case === 'appended' ? r.result.value.seqs : []]))
      .toEqual([['keyed', [0]], ['plain', [1]], ['keyed-2', [2]]]);
  });

  it("a session's batches are written without waiting for the previous one's commit: they share group commits", async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'as-group', labels: {} } as never);
    // The SQLite store under the blobs layer (BlobbingStore.inner) counts its group commits.
    type Counts = { groupCommits: number; appends: number };
    const stats = (): Counts | undefined => (t.server.app.store as unknown as { inner: { stats?: () => Counts } }).inner.stats?.();
    const before = stats() ?? { groupCommits: 0, appends: 0 };
    const n = 64;
    const { responses } = await stream(Array.from({ length: n }, (_, i) => ({ correlationId: String(i), append: { sessionId: 'as-group', events: [userMessage(`g${i}`, 'x')] } })));
    expect(responses.every((r, i) => r.result?.$case === 'appended' && r.result.value.seqs[0] === i)).toBe(true);
    // One batch per commit when each waited for the one before (SQLite counts its group commits):
    // fewer commits than batches shows batches of the session shared commits. (How many share
    // one depends on how the requests arrive, which a loaded machine spreads out.)
    if (TEST_STORE === 'sqlite') {
      const after = stats()!;
      expect(after.appends - before.appends).toBe(n);
      expect(after.groupCommits - before.groupCommits).toBeLessThan(n);
    }
  });

  it('a batch planned on one the store refuses is re-planned after it settled: the order holds and the log has only the accepted ones', async () => {
    const q = await startTestServer({ limits: { tenantMaxBytes: 300 } as never });
    try {
      await call(q.client.createSession.bind(q.client), { sessionId: 'as-q', labels: {} } as never);
      const { responses } = await stream([
        { correlationId: 'big', append: { sessionId: 'as-q', events: [userMessage('b', 'x'.repeat(400))] } },
        { correlationId: 'one', append: { sessionId: 'as-q', events: [userMessage('o', 'first')] } },
        { correlationId: 'two', append: { sessionId: 'as-q', events: [userMessage('t', 'second')] } },
      ], q);
      expect(responses.map((r) => [r.correlationId, r.result?.$case === 'appended' ? r.result.value.seqs : r.result?.value.code])).toEqual([
        ['big', status.RESOURCE_EXHAUSTED], ['one', [0]], ['two', [1]],
      ]);
      expect(Number((await call(q.client.getSession.bind(q.client), { sessionId: 'as-q' })).session?.eventCount)).toBe(2);
    } finally {
      await q.stop();
    }
  });

  it('pipelined, a batch whose expected_last_seq counted on a refused batch gets HEAD_MISMATCH, and the one after it that did not is appended', async () => {
    const q = await startTestServer({ limits: { tenantMaxBytes: 300 } as never });
    try {
      await call(q.client.createSession.bind(q.client), { sessionId: 'as-e', labels: {} } as never);
      const { responses, code } = await stream([
        { correlationId: 'a', append: { sessionId: 'as-e', events: [userMessage('a', 'first')], expectedLastSeq: -1 } },
        // Refused (the tenant's byte quota): nothing of it is stored.
        { correlationId: 'big', append: { sessionId: 'as-e', events: [userMessage('b', 'x'.repeat(400))], expectedLastSeq: 0 } },
        // Sent as if `big` had landed (head 1): refused, the head is 0.
        { correlationId: 'after-big', append: { sessionId: 'as-e', events: [userMessage('c', 'third')], expectedLastSeq: 1 } },
        // Sent knowing `big` may fail (head 0): appended at seq 1.
        { correlationId: 'after-a', append: { sessionId: 'as-e', events: [userMessage('d', 'fourth')], expectedLastSeq: 0 } },
      ], q);
      expect(code).toBe(status.OK);
      expect(responses.map((r) => [r.correlationId, r.result?.$case === 'appended' ? r.result.value.seqs : r.result?.value.code])).toEqual([
        ['a', [0]], ['big', status.RESOURCE_EXHAUSTED], ['after-big', status.FAILED_PRECONDITION], ['after-a', [1]],
      ]);
      const info = responses[2]!.result?.$case === 'error' ? responses[2]!.result.value.details.find((d) => d.typeUrl.endsWith('google.rpc.ErrorInfo')) : undefined;
      expect(info && ErrorInfo.decode(info.value).reason).toBe('HEAD_MISMATCH');
      expect(Number((await call(q.client.getSession.bind(q.client), { sessionId: 'as-e' })).session?.eventCount)).toBe(2);
    } finally {
      await q.stop();
    }
  });

  it('pipelined, a key repeated behind its first use replays that result, with other events it is refused; the log holds one batch', async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'as-ip', labels: {} } as never);
    const { responses } = await stream([
      { correlationId: 'first', append: { sessionId: 'as-ip', events: [userMessage('u1', 'x')], idempotencyKey: 'pk' } },
      { correlationId: 'again', append: { sessionId: 'as-ip', events: [userMessage('u1', 'x')], idempotencyKey: 'pk' } },
      { correlationId: 'other', append: { sessionId: 'as-ip', events: [userMessage('u2', 'y')], idempotencyKey: 'pk' } },
      { correlationId: 'plain', append: { sessionId: 'as-ip', events: [userMessage('u3', 'z')] } },
    ]);
    expect(responses.map((r) => [r.correlationId, r.result?.$case === 'appended' ? [r.result.value.seqs, r.result.value.replayed] : r.result?.value.code])).toEqual([
      ['first', [[0], false]], ['again', [[0], true]], ['other', status.FAILED_PRECONDITION], ['plain', [[1], false]],
    ]);
    expect(await eventCount('as-ip')).toBe(2);
  });

  it('2,000 batches pipelined on one stream (more than the 256 in flight) all land, in order', async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'as-many', labels: {} } as never);
    const n = 2000;
    const { responses, code } = await stream(Array.from({ length: n }, (_, i) => ({ correlationId: String(i), append: { sessionId: 'as-many', events: [userMessage(`m${i}`, 'x')] } })));
    expect(code).toBe(status.OK);
    expect(responses.map((r) => Number(r.correlationId))).toEqual([...Array(n).keys()]);
    expect(responses.every((r, i) => r.result?.$case === 'appended' && r.result.value.seqs[0] === i)).toBe(true);
    expect(await eventCount('as-many')).toBe(n);
  });
});
