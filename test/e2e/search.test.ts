/**
 * SearchEvents end to end (issue #40): a real server and the generated client; the happy path
 * with snippets, pages and tenants (two tokens), and the refusals with their code and details.
 * Runs on SQLite and, in the e2e-postgres project, on PostgreSQL.
 */
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Metadata, status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/server/auth.js';
import { SearchOrder, type SearchEventsRequest } from '../../gen/palimpsest/v1/service.js';
import { userMessage } from '../support/events.js';
import { call, callError, startTestServer, type TestServer } from '../support/test-server.js';

const A = 'token-tenant-a';
const B = 'token-tenant-b';
const bearer = (token: string): Metadata => {
  const md = new Metadata();
  md.set('authorization', `Bearer ${token}`);
  return md;
};
const req = (r: Partial<SearchEventsRequest>): SearchEventsRequest => ({
  query: '', pageSize: 0, pageToken: '', labelSelector: {}, sessionIds: [], eventTypes: [], startTime: undefined, endTime: undefined,
  toolName: '', surfaceOnly: false, includeShadowed: false, order: SearchOrder.SEARCH_ORDER_UNSPECIFIED, ...r,
});

describe('SearchEvents', () => {
  let t: TestServer;
  beforeAll(async () => {
    const tokens = join(mkdtempSync(join(tmpdir(), 'palimpsest-search-auth-')), 'tokens.json');
    writeFileSync(tokens, JSON.stringify({ tokens: [
      { name: 'a', sha256: hashToken(A), tenant: 'a', permissions: ['read', 'append'] },
      { name: 'b', sha256: hashToken(B), tenant: 'b', permissions: ['read', 'append'] },
    ] }));
    t = await startTestServer({ authTokens: tokens });
    const c = t.client;
    for (const token of [A, B]) {
      await call(c.createSession.bind(c), { sessionId: 'main', labels: { team: 'x' }, strict: false }, bearer(token));
      await call(c.appendEvents.bind(c), { sessionId: 'main', idempotencyKey: '', events: [
        userMessage('u1', 'Which session ran rm -rf in /tmp?'), userMessage('u2', 'invoice 4711 is late'), userMessage('u3', 'invoice 4712 too'),
      ] }, bearer(token));
    }
  });
  afterAll(async () => {
    await t.stop();
  });

  it('answers hits newest first with marked snippets and pages; the other tenant\'s twin is never counted', async () => {
    const c = t.client;
    const first = await call(c.searchEvents.bind(c), req({ query: 'invoice', pageSize: 1 }), bearer(A));
    expect(first.hits.map((h) => [h.sessionId, h.seq, h.type])).toEqual([['main', 2, 'user/message']]);
    expect(first.hits[0]!.snippet).toBe('invoice 4712 too');
    expect(first.hits[0]!.matches).toEqual([{ start: 0, end: 7 }]);
    expect(first.nextPageToken).not.toBe('');
    const second = await call(c.searchEvents.bind(c), req({ query: 'invoice', pageSize: 1, pageToken: first.nextPageToken }), bearer(A));
    expect(second.hits.map((h) => h.seq)).toEqual([1]);
    expect(second.nextPageToken).toBe('');
    const phrase = await call(c.searchEvents.bind(c), req({ query: '"rm -rf"', order: SearchOrder.SEARCH_ORDER_SCORE }), bearer(B));
    expect(phrase.hits.map((h) => [h.sessionId, h.seq])).toEqual([['main', 0]]);
    expect(phrase.hits[0]!.score).toBeGreaterThan(0);
  });

  it('refuses a malformed query as INVALID_ARGUMENT naming the position, and conflicting filters', async () => {
    const c = t.client;
    const e = await callError(c.searchEvents.bind(c), req({ query: 'invoice "late' }), bearer(A));
    expect(e.code).toBe(status.INVALID_ARGUMENT);
    expect(e.reason).toBe('SEARCH_QUERY_INVALID');
    expect(e.metadata.position).toBe('8');
    expect(e.message).toContain('unterminated quote');
    const f = await callError(c.searchEvents.bind(c), req({ query: 'x', surfaceOnly: true, includeShadowed: true }), bearer(A));
    expect([f.code, f.reason]).toEqual([status.INVALID_ARGUMENT, 'SEARCH_REQUEST_INVALID']);
    const g = await callError(c.searchEvents.bind(c), req({ query: 'x', pageToken: 'garbage' }), bearer(A));
    expect([g.code, g.reason]).toEqual([status.INVALID_ARGUMENT, 'INVALID_PAGE_TOKEN']);
    const h = await callError(c.searchEvents.bind(c), req({ query: 'x' }));
    expect(h.code).toBe(status.UNAUTHENTICATED);
  });
});
