/**
 * A revoked token's open streams (issue #17, finding 3): a SubscribeEvents stream opened with a
 * token kept delivering new events after the token was removed and the file reloaded. On reload,
 * every stream whose token is gone ends with UNAUTHENTICATED, every stream whose token lost the
 * read permission (or now names another tenant) with PERMISSION_DENIED, and the others go on.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { decodeError } from '../../src/client/error-details.js';
import { ExportSessionRequest, SubscribeEventsRequest, SubscribeSurfaceRequest, type SubscribeEventsResponse, type SubscribeSurfaceResponse } from '../../gen/palimpsest/v1/service.js';
import { hashToken } from '../../src/server/auth.js';
import { call, startTestServer, type TestServer } from '../support/test-server.js';
import { Tail, eventually } from '../support/subscribe.js';
import { input } from '../support/events.js';

interface Token { readonly name: string; readonly token: string; readonly tenant: string; readonly permissions: string[] }

const dir = mkdtempSync(join(tmpdir(), 'palimpsest-revoke-'));
const tokensPath = join(dir, 'tokens.json');
function writeTokens(entries: readonly Token[]): void {
  writeFileSync(tokensPath, JSON.stringify({ tokens: entries.map((e) => ({ name: e.name, sha256: hashToken(e.token), tenant: e.tenant, permissions: e.permissions })) }));
}
function bearer(token: string): Metadata {
  const md = new Metadata();
  md.set('authorization', `Bearer ${token}`);
  return md;
}

const revoked: Token = { name: 'revoked', token: 'tok-revoked-0001', tenant: 'alice', permissions: ['read', 'append'] };
const kept: Token = { name: 'kept', token: 'tok-kept-0002', tenant: 'alice', permissions: ['read'] };
const demoted: Token = { name: 'demoted', token: 'tok-demoted-0003', tenant: 'alice', permissions: ['read'] };
const moved: Token = { name: 'moved', token: 'tok-moved-0004', tenant: 'alice', permissions: ['read'] };
const admin: Token = { name: 'admin', token: 'tok-admin-0005', tenant: 'alice', permissions: ['admin'] };

let t: TestServer;
beforeAll(async () => {
  writeTokens([revoked, kept, demoted, moved, admin]);
  t = await startTestServer({ authTokens: tokensPath });
});
afterAll(async () => {
  await t?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function events(token: Token, sessionId: string): Tail<SubscribeEventsResponse> {
  return new Tail(t.client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId }), bearer(token.token)));
}
function surface(token: Token, sessionId: string): Tail<SubscribeSurfaceResponse> {
  return new Tail(t.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial({ sessionId }), bearer(token.token)));
}
const caughtUp = (x: Tail<{ kind?: { $case: string } }>): boolean => x.msgs.some((m) => m.kind?.$case === 'caughtUp');
const eventSeqs = (x: Tail<SubscribeEventsResponse>): number[] => x.msgs.flatMap((m) => (m.kind?.$case === 'event' ? [m.kind.value.seq] : []));

async function append(token: Token, sessionId: string): Promise<number[]> {
  return (await call(t.client.appendEvents.bind(t.client), { sessionId, idempotencyKey: '', events: [input('x/y', { n: 1 })] }, bearer(token.token))).seqs;
}

describe('token file reload', () => {
  it('ends the streams of revoked, demoted and moved tokens; the others keep delivering', async () => {
    await call(t.client.createSession.bind(t.client), { sessionId: 'watched', labels: {}, strict: false }, bearer(revoked.token));
    expect(await append(revoked, 'watched')).toEqual([0]);
    const tails = {
      revoked: events(revoked, 'watched'),
      revokedSurface: surface(revoked, 'watched'),
      kept: events(kept, 'watched'),
      demoted: events(demoted, 'watched'),
      moved: events(moved, 'watched'),
      admin: events(admin, 'watched'),
    };
    for (const [name, tail] of Object.entries(tails)) await tail.until(caughtUp, 10_000, `${name} caught up`);
    expect(t.streams?.active.size).toBe(6);

    writeTokens([kept, { ...demoted, permissions: ['append'] }, { ...moved, tenant: 'bob' }, admin]);
    t.server.reloadTokens();
    for (const name of ['revoked', 'revokedSurface', 'demoted', 'moved'] as const) await tails[name].until((x) => x.ended, 10_000, `${name} ended`);
    expect(tails.revoked.decoded).toMatchObject({ code: status.UNAUTHENTICATED, reason: 'UNAUTHENTICATED' });
    expect(tails.revoked.decoded?.message).toMatch(/revoked/);
    expect(tails.revokedSurface.decoded).toMatchObject({ code: status.UNAUTHENTICATED, reason: 'UNAUTHENTICATED' });
    expect(tails.demoted.decoded).toMatchObject({ code: status.PERMISSION_DENIED, reason: 'PERMISSION_DENIED', metadata: { permission: 'read' } });
    expect(tails.moved.decoded).toMatchObject({ code: status.PERMISSION_DENIED, reason: 'PERMISSION_DENIED' });
    await eventually(() => t.streams?.active.size === 2, 10_000, 'two streams left');

    // New events reach the streams whose token is still good, and only those.
    expect(await append(admin, 'watched')).toEqual([1]);
    await tails.kept.until((x) => eventSeqs(x).includes(1), 10_000, 'kept got seq 1');
    await tails.admin.until((x) => eventSeqs(x).includes(1), 10_000, 'admin got seq 1');
    expect(eventSeqs(tails.revoked)).toEqual([0]);
    expect(eventSeqs(tails.demoted)).toEqual([0]);
    expect(tails.kept.ended).toBe(false);
    // The revoked token cannot open a new stream either.
    const again = events(revoked, 'watched');
    await again.until((x) => x.ended, 10_000, 'refused');
    expect(again.decoded?.code).toBe(status.UNAUTHENTICATED);
    tails.kept.cancel();
    tails.admin.cancel();
  });

  it('a reload that changes nothing ends nothing', async () => {
    const tail = events(kept, 'watched');
    await tail.until(caughtUp, 10_000, 'caught up');
    t.server.reloadTokens();
    expect(await append(admin, 'watched')).toEqual([2]);
    await tail.until((x) => eventSeqs(x).includes(2), 10_000, 'seq 2');
    expect(tail.ended).toBe(false);
    tail.cancel();
  });
});

describe('token file reload and ExportSession', () => {
  it('ends a running export of a revoked token with UNAUTHENTICATED before it completes', async () => {
    const reader: Token = { name: 'exporter', token: 'tok-exporter-0006', tenant: 'alice', permissions: ['read'] };
    writeTokens([kept, admin, reader]);
    t.server.reloadTokens();
    await call(t.client.createSession.bind(t.client), { sessionId: 'big', labels: {}, strict: false }, bearer(admin.token));
    for (let b = 0; b < 3; b++) {
      const events = Array.from({ length: 30 }, (_, i) => input('x/y', { i, pad: 'p'.repeat(100_000) }));
      await call(t.client.appendEvents.bind(t.client), { sessionId: 'big', idempotencyKey: '', events }, bearer(admin.token));
    }
    const stream = t.client.exportSession(ExportSessionRequest.fromPartial({ sessionId: 'big' }), bearer(reader.token));
    let bytes = 0;
    let error: ServiceError | undefined;
    let ended = false;
    stream.on('data', (m: { chunk: Uint8Array }) => {
      // Stop reading after the first chunk: the export stays open, waiting on flow control.
      if (bytes === 0) stream.pause();
      bytes += m.chunk.length;
    });
    stream.on('error', (e: ServiceError) => { error = e; ended = true; });
    stream.on('end', () => { ended = true; });
    await eventually(() => bytes > 0 || ended, 10_000, 'the first chunk');
    expect(error).toBeUndefined();
    writeTokens([kept, admin]);
    t.server.reloadTokens();
    stream.resume();
    await eventually(() => ended, 10_000, 'the export to end');
    expect(error && decodeError(error)).toMatchObject({ code: status.UNAUTHENTICATED, reason: 'UNAUTHENTICATED' });
    expect(bytes).toBeLessThan(90 * 100_000);
    // The same export with a valid token runs to its end.
    const full = await new Promise<number>((resolve, reject) => {
      let n = 0;
      const s = t.client.exportSession(ExportSessionRequest.fromPartial({ sessionId: 'big' }), bearer(admin.token));
      s.on('data', (m: { chunk: Uint8Array }) => { n += m.chunk.length; });
      s.on('error', reject);
      s.on('end', () => resolve(n));
    });
    expect(full).toBeGreaterThan(90 * 100_000);
  });
});
