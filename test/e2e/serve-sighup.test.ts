/**
 * `palimpsest serve --auth-tokens FILE` re-reads the token file on SIGHUP without dropping the
 * connection; a broken file keeps the previous tokens; an open stream of a removed token ends
 * with UNAUTHENTICATED.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { SessionServiceClient, SubscribeEventsRequest, type SubscribeEventsResponse } from '../../gen/palimpsest/v1/service.js';
import { Tail } from '../support/subscribe.js';
import { input } from '../support/events.js';
import { hashToken } from '../../src/server/auth.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';
import { call } from '../support/test-server.js';

function writeTokens(path: string, tokens: string[]): void {
  writeFileSync(path, JSON.stringify({ tokens: tokens.map((t, i) => ({ name: `t${i}`, sha256: hashToken(t), tenant: 'acme', permissions: ['read', 'append'] })) }));
}
const bearer = (t: string): Metadata => {
  const md = new Metadata();
  md.set('authorization', `Bearer ${t}`);
  return md;
};

async function codeOf(client: SessionServiceClient, token: string): Promise<number> {
  try {
    await call(client.listSessions.bind(client), { pageSize: 0, pageToken: '', labelSelector: {} }, bearer(token));
    return status.OK;
  } catch (e) {
    return (e as ServiceError).code;
  }
}

async function until(fn: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('condition not reached in time');
}

describe('serve: SIGHUP token reload', () => {
  let dir: string;
  let server: ServerProcess;
  let client: SessionServiceClient;
  const tokens = join(mkdtempSync(join(tmpdir(), 'palimpsest-hup-')), 'tokens.json');
  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'palimpsest-hup-db-'));
    writeTokens(tokens, ['old-token-000000']);
    server = await spawnServer(['--db', join(dir, 'db.sqlite'), '--auth-tokens', tokens, '--log-level', 'error']);
    client = new SessionServiceClient(server.address, credentials.createInsecure());
  }, 60_000);
  afterAll(async () => {
    client.close();
    server.proc.kill('SIGTERM');
    await server.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  it('rotates tokens on SIGHUP over the same connection, and keeps them on a broken file', async () => {
    expect(await codeOf(client, 'old-token-000000')).toBe(status.OK);
    expect(await codeOf(client, 'new-token-111111')).toBe(status.UNAUTHENTICATED);
    writeTokens(tokens, ['new-token-111111']);
    server.proc.kill('SIGHUP');
    await until(async () => (await codeOf(client, 'new-token-111111')) === status.OK);
    expect(await codeOf(client, 'old-token-000000')).toBe(status.UNAUTHENTICATED);
    writeFileSync(tokens, '{broken');
    server.proc.kill('SIGHUP');
    await until(async () => server.stderr().includes('token file reload failed'));
    expect(await codeOf(client, 'new-token-111111')).toBe(status.OK);
    expect(server.proc.exitCode).toBeNull();
  });

  it('ends an open stream of a token removed by SIGHUP with UNAUTHENTICATED; it gets no later event', async () => {
    writeTokens(tokens, ['stream-token-2222', 'writer-token-3333']);
    server.proc.kill('SIGHUP');
    await until(async () => (await codeOf(client, 'stream-token-2222')) === status.OK);
    await call(client.createSession.bind(client), { sessionId: 'hup', labels: {}, strict: false }, bearer('writer-token-3333'));
    const tail = new Tail<SubscribeEventsResponse>(client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: 'hup' }), bearer('stream-token-2222')));
    await tail.until((x) => x.msgs.some((m) => m.kind?.$case === 'caughtUp'), 10_000, 'caught up');
    writeTokens(tokens, ['writer-token-3333']);
    server.proc.kill('SIGHUP');
    await tail.until((x) => x.ended, 10_000, 'stream ended');
    expect(tail.decoded).toMatchObject({ code: status.UNAUTHENTICATED, reason: 'UNAUTHENTICATED' });
    await call(client.appendEvents.bind(client), { sessionId: 'hup', idempotencyKey: '', events: [input('x/y', 1)] }, bearer('writer-token-3333'));
    expect(tail.msgs.filter((m) => m.kind?.$case === 'event')).toEqual([]);
  });
});
