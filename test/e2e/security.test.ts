/**
 * Issue 9: transport security, authentication, permissions, tenant isolation, limits.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import { call, callError, startTestServer, type TestServer } from '../support/test-server.js';
import { input, userMessage } from '../support/events.js';
import { generatePki, type TestPki } from '../support/certs.js';
import { hashToken, StreamLimiter, tooManyStreams } from '../../src/server/auth.js';
import { domainErrorToStatus } from '../../src/server/status-map.js';
import { connect as connectH2 } from 'node:http2';
import { startServer } from '../../src/main.js';
import { SessionServiceClient, MessageView, Direction, DataFormat } from '../../gen/palimpsest/v1/service.js';
import { decodeError } from '../../src/client/error-details.js';
import type { ServiceError } from '@grpc/grpc-js';

const TOKENS = {
  aliceAll: 'tok-alice-all-0123456789',
  aliceRead: 'tok-alice-read-0123456789',
  bobAll: 'tok-bob-all-0123456789',
  admin: 'tok-ops-admin-0123456789',
};

function tokenFile(path: string, entries: { token: string; tenant: string; permissions: string[]; name: string }[]): void {
  writeFileSync(path, JSON.stringify({ tokens: entries.map((e) => ({ name: e.name, sha256: hashToken(e.token), tenant: e.tenant, permissions: e.permissions })) }));
}

function bearer(token: string): Metadata {
  const md = new Metadata();
  md.set('authorization', `Bearer ${token}`);
  return md;
}

describe('authentication and tenant isolation', () => {
  let t: TestServer;
  let tokensPath: string;
  beforeAll(async () => {
    const dir = (await import('node:fs')).mkdtempSync(join((await import('node:os')).tmpdir(), 'palimpsest-auth-'));
    tokensPath = join(dir, 'tokens.json');
    tokenFile(tokensPath, [
      { name: 'alice-all', token: TOKENS.aliceAll, tenant: 'alice', permissions: ['read', 'append'] },
      { name: 'alice-read', token: TOKENS.aliceRead, tenant: 'alice', permissions: ['read'] },
      { name: 'bob-all', token: TOKENS.bobAll, tenant: 'bob', permissions: ['read', 'append', 'admin'] },
      { name: 'alice-admin', token: TOKENS.admin, tenant: 'alice', permissions: ['admin'] },
    ]);
    t = await startTestServer({ authTokens: tokensPath });
    const c = t.client;
    await call(c.createSession.bind(c), { sessionId: 'alice-1', labels: {}, strict: false }, bearer(TOKENS.aliceAll));
    await call(c.appendEvents.bind(c), { sessionId: 'alice-1', idempotencyKey: '', events: [userMessage('m1', 'secret')] }, bearer(TOKENS.aliceAll));
  });
  afterAll(async () => { await t.stop(); });

  it('rejects a call without a token as UNAUTHENTICATED, with ErrorInfo', async () => {
    const c = t.client;
    const e = await callError(c.getSession.bind(c), { sessionId: 'alice-1' });
    expect(e.code).toBe(status.UNAUTHENTICATED);
    expect(e.reason).toBe('UNAUTHENTICATED');
  });

  it('rejects an unknown token as UNAUTHENTICATED', async () => {
    const c = t.client;
    const e = await callError(c.getSession.bind(c), { sessionId: 'alice-1' }, bearer('not-a-token'));
    expect(e.code).toBe(status.UNAUTHENTICATED);
  });

  it('rejects a valid token without the permission as PERMISSION_DENIED, per RPC family', async () => {
    const c = t.client;
    const md = bearer(TOKENS.aliceRead);
    // read works
    await expect(call(c.getSession.bind(c), { sessionId: 'alice-1' }, md)).resolves.toBeTruthy();
    // append family denied
    const e1 = await callError(c.appendEvents.bind(c), { sessionId: 'alice-1', idempotencyKey: '', events: [userMessage('m2', 'x')] }, md);
    expect(e1.code).toBe(status.PERMISSION_DENIED);
    expect(e1.metadata.permission).toBe('append');
    const e2 = await callError(c.createSession.bind(c), { sessionId: '', labels: {}, strict: false }, md);
    expect(e2.code).toBe(status.PERMISSION_DENIED);
    // admin family denied for an append token
    const e3 = await callError(c.deleteSession.bind(c), { sessionId: 'alice-1' }, bearer(TOKENS.aliceAll));
    expect(e3.code).toBe(status.PERMISSION_DENIED);
    expect(e3.metadata.permission).toBe('admin');
    // the log is untouched
    const s = await call(c.getSurface.bind(c), { sessionId: 'alice-1' }, md);
    expect(s.seqs).toEqual([0]);
  });

  it('PlanCompaction is a read; Compact and PruneToolResults need append (log untouched)', async () => {
    const c = t.client;
    const md = bearer(TOKENS.aliceRead);
    const plan = await call(c.planCompaction.bind(c), { sessionId: 'alice-1', budget: { $case: 'upToSeq', value: 0 }, tokenCounts: {}, omitMessages: false }, md);
    expect(plan.shadowedSeqs).toEqual([0]);
    const e1 = await callError(c.compact.bind(c), { sessionId: 'alice-1', start: 0, end: 0, expectedLastSeq: 0, summary: { $case: 'summaryText', value: 's' }, provider: 'p', model: 'm', usage: undefined, maxTokens: undefined, shadowedTokenCount: undefined, idempotencyKey: '', rawOutputJson: '', llmStreamCall: false, sourceCommandId: '' }, md);
    expect([e1.code, e1.metadata.permission]).toEqual([status.PERMISSION_DENIED, 'append']);
    const e2 = await callError(c.pruneToolResults.bind(c), { sessionId: 'alice-1', seqs: [0], minBytes: 0, keepRecent: 0, excludeTools: [], headChars: undefined, tailChars: undefined, expectedLastSeq: undefined, idempotencyKey: '', minChars: 0, marker: 0, minSavingChars: undefined }, md);
    expect([e2.code, e2.metadata.permission]).toEqual([status.PERMISSION_DENIED, 'append']);
    expect((await call(c.getSurface.bind(c), { sessionId: 'alice-1' }, md)).seqs).toEqual([0]);
  });

  it('hides another tenant\'s session on every RPC (NOT_FOUND, never a hint)', async () => {
    const c = t.client;
    const bob = bearer(TOKENS.bobAll);
    const id = 'alice-1';
    const attempts: Promise<{ code: number; reason: string }>[] = [
      callError(c.getSession.bind(c), { sessionId: id }, bob),
      callError(c.appendEvents.bind(c), { sessionId: id, idempotencyKey: '', events: [userMessage('evil', 'x')] }, bob),
      callError(c.listEvents.bind(c), { sessionId: id, direction: Direction.DIRECTION_FORWARD, pageSize: 0, pageToken: '', types: [], dataFormat: DataFormat.DATA_FORMAT_JSON, blobRefs: false }, bob),
      callError(c.getSurface.bind(c), { sessionId: id }, bob),
      callError(c.getMessages.bind(c), { sessionId: id, view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, typed: false, pageSize: 0, pageToken: '', format: 0, dropUnpaired: false, blobRefs: false }, bob),
      callError(c.getMessages.bind(c), { sessionId: id, view: MessageView.MESSAGE_VIEW_TRANSCRIPT, typed: false, pageSize: 0, pageToken: '', format: 0, dropUnpaired: false, blobRefs: false }, bob),
      callError(c.forkSession.bind(c), { sessionId: id, childSessionId: 'stolen', labels: {} }, bob),
      callError(c.repairSession.bind(c), { sessionId: id }, bob),
      callError(c.deleteSession.bind(c), { sessionId: id }, bob),
    ];
    for (const e of await Promise.all(attempts)) {
      expect(e.code).toBe(status.NOT_FOUND);
      expect(e.reason).toBe('SESSION_NOT_FOUND');
    }
    const nonexistent = await callError(c.getSession.bind(c), { sessionId: 'no-such-session' }, bob);
    expect(nonexistent).toMatchObject({ code: status.NOT_FOUND, reason: 'SESSION_NOT_FOUND' });
    // Export (server stream) too.
    const exportErr = await new Promise<ServiceError>((resolve) => {
      const s = c.exportSession({ sessionId: id, unpacked: false, blobRefs: false }, bob);
      s.on('data', () => undefined);
      s.on('error', resolve);
      s.on('end', () => resolve(Object.assign(new Error('ended'), { code: -1 }) as ServiceError));
    });
    expect(exportErr.code).toBe(status.NOT_FOUND);
    const list = await call(c.listSessions.bind(c), { pageSize: 0, pageToken: '', labelSelector: {} }, bob);
    expect(list.sessions.map((s) => s.id)).not.toContain(id);
    // Alice still sees exactly her one event.
    const mine = await call(c.getSession.bind(c), { sessionId: id }, bearer(TOKENS.aliceRead));
    expect(mine.session?.eventCount).toBe(1);
  });

  it('scopes session ids per tenant: the same id in two tenants never collides or hints', async () => {
    const c = t.client;
    const alice = bearer(TOKENS.aliceAll);
    const bob = bearer(TOKENS.bobAll);
    // Bob takes an id Alice already uses: no ALREADY_EXISTS, no hint.
    const created = await call(c.createSession.bind(c), { sessionId: 'alice-1', labels: {}, strict: false }, bob);
    expect(created.session?.id).toBe('alice-1');
    expect(created.session?.eventCount).toBe(0);
    await call(c.appendEvents.bind(c), { sessionId: 'alice-1', idempotencyKey: '', events: [userMessage('b1', 'bob-data'), userMessage('b2', 'more')] }, bob);
    // Each tenant sees only its own log under the same id.
    expect((await call(c.getSession.bind(c), { sessionId: 'alice-1' }, alice)).session?.eventCount).toBe(1);
    expect((await call(c.getSession.bind(c), { sessionId: 'alice-1' }, bob)).session?.eventCount).toBe(2);
    // Exports carry the plain id in the header and only the tenant's own events.
    const exportText = (md: Metadata) => new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const s = c.exportSession({ sessionId: 'alice-1', unpacked: false, blobRefs: false }, md);
      s.on('data', (m: { chunk: Buffer }) => chunks.push(m.chunk));
      s.on('error', reject);
      s.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
    const [ea, eb] = [await exportText(alice), await exportText(bob)];
    expect(JSON.parse(ea.split('\n')[0]!).id).toBe('alice-1');
    expect(JSON.parse(eb.split('\n')[0]!).id).toBe('alice-1');
    expect(ea).toContain('secret');
    expect(ea).not.toContain('bob-data');
    expect(eb).not.toContain('secret');
    // Subscriptions follow the tenant's own session only.
    const firstDeltas = (md: Metadata) => new Promise<number[]>((resolve, reject) => {
      const seqs: number[] = [];
      const s = c.subscribeSurface({ sessionId: 'alice-1', snapshot: false, includeMessages: false, heartbeatIntervalMs: 0, dataFormat: DataFormat.DATA_FORMAT_JSON, waitForCreate: false, blobRefs: false }, md);
      s.on('data', (m: { kind?: { $case: string; value: { seq?: number } } }) => {
        if (m.kind?.$case === 'append') seqs.push(m.kind.value.seq!);
        if (m.kind?.$case === 'caughtUp') { s.cancel(); resolve(seqs); }
      });
      s.on('error', (e: ServiceError) => { if (e.code !== status.CANCELLED) reject(e); });
    });
    expect(await firstDeltas(alice)).toEqual([0]);
    expect(await firstDeltas(bob)).toEqual([0, 1]);
    // Deleting Bob's session leaves Alice's untouched.
    await call(c.deleteSession.bind(c), { sessionId: 'alice-1' }, bob);
    expect((await call(c.getSession.bind(c), { sessionId: 'alice-1' }, alice)).session?.eventCount).toBe(1);
  });

  it('ends another tenant\'s subscription attempt with NOT_FOUND', async () => {
    const c = t.client;
    const err = await new Promise<ServiceError>((resolve) => {
      const s = c.subscribeSurface({ sessionId: 'alice-1', snapshot: false, includeMessages: false, heartbeatIntervalMs: 0, dataFormat: DataFormat.DATA_FORMAT_JSON, waitForCreate: false, blobRefs: false }, bearer(TOKENS.bobAll));
      s.on('data', () => undefined);
      s.on('error', resolve);
    });
    expect(err.code).toBe(status.NOT_FOUND);
    expect(decodeError(err).reason).toBe('SESSION_NOT_FOUND');
  });

  it('reloads the token file without dropping connections', async () => {
    const c = t.client;
    const original = readFileSync(tokensPath, 'utf8');
    const rotated = 'tok-alice-rotated-0123456789';
    tokenFile(tokensPath, [{ name: 'alice-rotated', token: rotated, tenant: 'alice', permissions: ['read'] }]);
    t.server.reloadTokens();
    const e = await callError(c.getSession.bind(c), { sessionId: 'alice-1' }, bearer(TOKENS.aliceRead));
    expect(e.code).toBe(status.UNAUTHENTICATED);
    const ok = await call(c.getSession.bind(c), { sessionId: 'alice-1' }, bearer(rotated));
    expect(ok.session?.id).toBe('alice-1');
    // A broken file keeps the previous tokens.
    writeFileSync(tokensPath, '{not json');
    expect(() => t.server.reloadTokens()).toThrow(/not JSON/);
    await expect(call(c.getSession.bind(c), { sessionId: 'alice-1' }, bearer(rotated))).resolves.toBeTruthy();
    writeFileSync(tokensPath, original);
    t.server.reloadTokens();
  });

  it('health stays reachable without a token', async () => {
    const { HealthClient } = await import('../../gen/grpc/health/v1/health.js');
    const h = new HealthClient(t.server.address, credentials.createInsecure());
    const res = await call(h.check.bind(h), { service: '' });
    expect(res.status).toBe(1);
    h.close();
  });
});

describe('limits', () => {
  it('enforces the per-tenant session quota with its limit', async () => {
    const t = await startTestServer({ limits: { tenantMaxSessions: 2 } as never });
    try {
      const c = t.client;
      await call(c.createSession.bind(c), { sessionId: 'q1', labels: {}, strict: false });
      await call(c.createSession.bind(c), { sessionId: 'q2', labels: {}, strict: false });
      const e = await callError(c.createSession.bind(c), { sessionId: 'q3', labels: {}, strict: false });
      expect(e.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(e.reason).toBe('QUOTA_EXCEEDED');
      expect(e.metadata.limit).toBe('2');
      expect(e.quotaFailure?.violations[0]?.subject).toBe('tenant_max_sessions');
    } finally {
      await t.stop();
    }
  });

  it('enforces the per-tenant byte quota with its limit', async () => {
    const t = await startTestServer({ limits: { tenantMaxBytes: 300 } as never });
    try {
      const c = t.client;
      await call(c.createSession.bind(c), { sessionId: 'b1', labels: {}, strict: false });
      await call(c.appendEvents.bind(c), { sessionId: 'b1', idempotencyKey: '', events: [input('note', { text: 'x'.repeat(100) })] });
      const e = await callError(c.appendEvents.bind(c), { sessionId: 'b1', idempotencyKey: '', events: [input('note', { text: 'y'.repeat(250) })] });
      expect(e.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(e.reason).toBe('QUOTA_EXCEEDED');
      expect(e.metadata.limit).toBe('300');
      const s = await call(c.getSession.bind(c), { sessionId: 'b1' });
      expect(s.session?.eventCount).toBe(1);
    } finally {
      await t.stop();
    }
  });

  it('advertises the per-connection call cap as SETTINGS_MAX_CONCURRENT_STREAMS, so a client that honours it waits instead of failing', async () => {
    const t = await startTestServer({ maxConcurrentStreams: 2 });
    const session = connectH2(`http://${t.server.address}`);
    try {
      const settings = await new Promise<{ maxConcurrentStreams?: number }>((resolve) => session.once('remoteSettings', resolve));
      expect(settings.maxConcurrentStreams).toBe(2);
      const c = t.client;
      // Two import streams that stay open hold both call slots of this connection.
      const open = [0, 1].map(() => c.importSession((_e, _r) => undefined));
      for (const s of open) s.write({ part: { $case: 'options', value: { sessionId: '', labels: {}, strict: false, allowSeqGaps: false, pairingGuard: false } } });
      let done = false;
      const third = call(c.listSessions.bind(c), { pageSize: 0, pageToken: '', labelSelector: {} }).then((r) => { done = true; return r; });
      // The third call waits for a slot (grpc-js queues it: HTTP/2 says no more streams)...
      await new Promise((r) => setTimeout(r, 200));
      expect(done).toBe(false);
      // ...and is served, not refused, once one ends.
      open[0]!.cancel();
      await expect(third).resolves.toMatchObject({ sessions: [] });
      open[1]!.cancel();
    } finally {
      session.close();
      await t.stop();
    }
  });

  it('the cap itself (on the web port, or for a client that ignores SETTINGS): refused with the limit in the error', () => {
    {
      const a = new StreamLimiter(2);
      expect(a.enter('c')).toBe(true);
      expect(a.enter('c')).toBe(true);
      expect(a.enter('c')).toBe(false);
      const e = domainErrorToStatus(tooManyStreams(2));
      const d = decodeError(e as ServiceError);
      expect(d.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(d.reason).toBe('TOO_MANY_STREAMS');
      expect(d.metadata.limit).toBe('2');
    }
  });
});

describe('transport', () => {
  let pki: TestPki;
  beforeAll(() => { pki = generatePki(); });
  afterAll(() => { rmSync(pki.dir, { recursive: true, force: true }); });

  it('refuses plaintext on a non-loopback address unless --insecure, saying why', async () => {
    await expect(startServer({ listen: '0.0.0.0:0', db: ':memory:', logLevel: 'silent' })).rejects.toThrow(/refusing to serve plaintext.*--insecure/s);
    const s = await startServer({ listen: '0.0.0.0:0', db: ':memory:', logLevel: 'silent', insecure: true });
    await s.shutdown();
  });

  it('serves TLS: a client trusting the CA connects, one that does not is refused', async () => {
    const s = await startServer({ listen: '127.0.0.1:0', db: ':memory:', logLevel: 'silent', tlsCert: pki.serverCert, tlsKey: pki.serverKey });
    try {
      expect(s.security).toMatchObject({ tls: true, mtls: false });
      const good = new SessionServiceClient(`localhost:${s.port}`, credentials.createSsl(readFileSync(pki.caCert)));
      const r = await call(good.listSessions.bind(good), { pageSize: 0, pageToken: '', labelSelector: {} });
      expect(r.sessions).toEqual([]);
      good.close();
      const bad = new SessionServiceClient(`localhost:${s.port}`, credentials.createSsl(readFileSync(pki.otherCaCert)));
      const e = await callError(bad.listSessions.bind(bad), { pageSize: 0, pageToken: '', labelSelector: {} });
      expect(e.code).toBe(status.UNAVAILABLE);
      bad.close();
    } finally {
      await s.shutdown();
    }
  });

  it('serves mutual TLS: only clients with a certificate from the client CA get in', async () => {
    const s = await startServer({ listen: '127.0.0.1:0', db: ':memory:', logLevel: 'silent', tlsCert: pki.serverCert, tlsKey: pki.serverKey, tlsClientCa: pki.caCert });
    try {
      expect(s.security).toMatchObject({ tls: true, mtls: true });
      const ca = readFileSync(pki.caCert);
      const good = new SessionServiceClient(`localhost:${s.port}`, credentials.createSsl(ca, readFileSync(pki.clientKey), readFileSync(pki.clientCert)));
      await expect(call(good.listSessions.bind(good), { pageSize: 0, pageToken: '', labelSelector: {} })).resolves.toBeTruthy();
      good.close();
      const noCert = new SessionServiceClient(`localhost:${s.port}`, credentials.createSsl(ca));
      expect((await callError(noCert.listSessions.bind(noCert), { pageSize: 0, pageToken: '', labelSelector: {} })).code).toBe(status.UNAVAILABLE);
      noCert.close();
      const wrongCa = new SessionServiceClient(`localhost:${s.port}`, credentials.createSsl(ca, readFileSync(pki.otherClientKey), readFileSync(pki.otherClientCert)));
      expect((await callError(wrongCa.listSessions.bind(wrongCa), { pageSize: 0, pageToken: '', labelSelector: {} })).code).toBe(status.UNAVAILABLE);
      wrongCa.close();
    } finally {
      await s.shutdown();
    }
  });
});
