/**
 * Feed retention over gRPC on the test store (SQLite; PostgreSQL in project e2e-postgres), issue
 * #35 item 3: after the store pruned old feed records, SubscribeSessions after a pruned position
 * ends with OUT_OF_RANGE / FEED_POSITION_EXPIRED (the message says to relist and subscribe
 * from_now), while a subscription after the oldest kept position, or from_now, is served.
 */
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SubscribeSessionsRequest, type SubscribeSessionsResponse } from '../../gen/palimpsest/v1/service.js';
import { api, type Api } from '../support/e2e.js';
import { userMessage } from '../support/events.js';
import { Tail } from '../support/subscribe.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

let ts: TestServer;
let a: Api;

beforeAll(async () => {
  ts = await startTestServer();
  a = api(ts.client);
});
afterAll(async () => {
  await ts.stop();
});

const subscribe = (req: Partial<SubscribeSessionsRequest>): Tail<SubscribeSessionsResponse> =>
  new Tail<SubscribeSessionsResponse>(ts.client.subscribeSessions(SubscribeSessionsRequest.fromPartial(req)));

describe('SubscribeSessions after feed retention pruned', () => {
  it('after a pruned position is OUT_OF_RANGE / FEED_POSITION_EXPIRED; after the oldest kept position and from_now are served', async () => {
    const store = ts.server.app.store;
    await a.createSession({ sessionId: 'old' });
    for (let i = 0; i < 3; i++) await a.appendEvents({ sessionId: 'old', events: [userMessage(`u${i}`, `m${i}`)] });
    const records = await store.readFeed({ tenant: '', after: 0, limit: 100 });
    expect(records).toHaveLength(4);
    // A retention sweep a day from now: everything but the last record is older.
    expect(await store.pruneFeed(Date.now() + 86_400_000)).toBe(3);
    const kept = records[3]!.position;
    expect(await store.feedPrunedUpTo('')).toBe(records[2]!.position);

    const refused = subscribe({ after: records[0]!.position });
    await refused.until((t) => t.ended, 10_000, 'the refused stream to end');
    expect(refused.error?.code).toBe(status.OUT_OF_RANGE);
    expect(refused.decoded?.reason).toBe('FEED_POSITION_EXPIRED');
    expect(refused.error?.details).toMatch(/ListSessions.*from_now/);

    // Resuming at the oldest kept position is exact: its successors, then caught_up.
    const resumed = subscribe({ after: kept });
    await resumed.until((t) => t.msgs.some((m) => m.kind?.$case === 'caughtUp'), 10_000, 'caught up');
    await a.appendEvents({ sessionId: 'old', events: [userMessage('u3', 'm3')] });
    await resumed.until((t) => t.msgs.some((m) => m.kind?.$case === 'change'), 10_000, 'the next change');
    const change = resumed.msgs.find((m) => m.kind?.$case === 'change')!;
    expect(change.position).toBeGreaterThan(kept);
    expect(change.kind).toMatchObject({ $case: 'change', value: { sessionId: 'old', headSeq: 3 } });
    resumed.cancel();

    const fresh = subscribe({ fromNow: true });
    await fresh.until((t) => t.msgs.some((m) => m.kind?.$case === 'caughtUp'), 10_000, 'from_now caught up');
    expect(fresh.error).toBeUndefined();
    fresh.cancel();
  });
});
