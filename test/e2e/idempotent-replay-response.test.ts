/**
 * Reported bug (store port + app, owner: store): an idempotent replay must return the original
 * response, but `surface_length` is recomputed from the current surface, because the store keeps
 * only the seqs and the request hash (IdempotentResult). Fix: store the original surface length
 * with the key (same transaction) and return it from SessionService.#replayed.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { api } from '../support/e2e.js';
import { userMessage } from '../support/events.js';

let t: TestServer;
beforeAll(async () => { t = await startTestServer(); });
afterAll(async () => { await t.stop(); });

it('a replayed AppendEvents returns the original response even after the surface grew', async () => {
  const a = api(t.client);
  await a.createSession({ sessionId: 'replay-resp' });
  const req = { sessionId: 'replay-resp', idempotencyKey: 'k', events: [userMessage('u', 'x')] };
  const first = await a.appendEvents(req);
  await a.appendEvents({ sessionId: 'replay-resp', events: [userMessage('v', 'y')] });
  expect(await a.appendEvents(req)).toEqual({ ...first, replayed: true });
});
