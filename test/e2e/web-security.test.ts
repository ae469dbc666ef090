/**
 * The web port's security is the gRPC port's: bearer tokens and permissions, tenant isolation,
 * TLS (and mutual TLS) from the same flags, CORS off unless origins are allowed; and `buf curl`
 * speaks Connect and gRPC-Web to it.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Code } from '@connectrpc/connect';
import { hashToken } from '../../src/server/auth.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { userMessage } from '../support/events.js';
import { generatePki, type TestPki } from '../support/certs.js';
import { esEvent, webClient, webFailure, WEB_PROTOCOLS } from '../support/web-client.js';
import { MessageView } from '../../gen/es/palimpsest/v1/service_pb.js';

const run = promisify(execFile);
const ALICE = 'web-alice-token-0123456789';
const ALICE_READ = 'web-alice-read-0123456789';
const BOB = 'web-bob-token-0123456789';

let dir: string;
let t: TestServer;
let base: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'palimpsest-web-auth-'));
  const tokens = join(dir, 'tokens.json');
  writeFileSync(tokens, JSON.stringify({
    tokens: [
      { name: 'alice', sha256: hashToken(ALICE), tenant: 'alice', permissions: ['read', 'append', 'admin'] },
      { name: 'alice-read', sha256: hashToken(ALICE_READ), tenant: 'alice', permissions: ['read'] },
      { name: 'bob', sha256: hashToken(BOB), tenant: 'bob', permissions: ['read', 'append', 'admin'] },
    ],
  }));
  t = await startTestServer({ webListen: '127.0.0.1:0', authTokens: tokens, webCorsOrigins: ['http://viewer.example'] });
  base = `http://127.0.0.1:${t.server.webPort}`;
  const a = webClient(base, 'connect', '1.1', ALICE);
  await a.createSession({ sessionId: 'main' });
  await a.appendEvents({ sessionId: 'main', events: [esEvent(userMessage('m1', 'alice secret'))] });
});
afterAll(async () => {
  await t.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe.each(WEB_PROTOCOLS.filter((p) => !p.json))('web port auth over $protocol', ({ protocol, httpVersion }) => {
  it('refuses a missing or unknown token (UNAUTHENTICATED) and a missing permission (PERMISSION_DENIED), leaving the log untouched', async () => {
    const none = await webFailure(webClient(base, protocol, httpVersion).getSession({ sessionId: 'main' }));
    expect(none).toMatchObject({ code: Code.Unauthenticated, reason: 'UNAUTHENTICATED' });
    expect(none.message).toMatch(/missing bearer token/);
    const bad = await webFailure(webClient(base, protocol, httpVersion, 'nope').getSession({ sessionId: 'main' }));
    expect(bad).toMatchObject({ code: Code.Unauthenticated, reason: 'UNAUTHENTICATED' });
    const ro = webClient(base, protocol, httpVersion, ALICE_READ);
    const denied = await webFailure(ro.appendEvents({ sessionId: 'main', events: [esEvent(userMessage('x', 'x'))] }));
    expect(denied).toMatchObject({ code: Code.PermissionDenied, reason: 'PERMISSION_DENIED', metadata: { permission: 'append', method: 'AppendEvents' } });
    const streamDenied = await webFailure(webClient(base, protocol, httpVersion).subscribeSurface({ sessionId: 'main' }));
    expect(streamDenied.code).toBe(Code.Unauthenticated);
    expect((await ro.getSurface({ sessionId: 'main' })).seqs).toEqual([0n]);
  });

  it('isolates tenants: another tenant\'s session is NOT_FOUND on every RPC and invisible in lists', async () => {
    const bob = webClient(base, protocol, httpVersion, BOB);
    const attempts = [
      bob.getSession({ sessionId: 'main' }),
      bob.getSurface({ sessionId: 'main' }),
      bob.getMessages({ sessionId: 'main', view: MessageView.MODEL_HISTORY }),
      bob.listEvents({ sessionId: 'main' }),
      bob.appendEvents({ sessionId: 'main', events: [esEvent(userMessage('evil', 'x'))] }),
      bob.forkSession({ sessionId: 'main', childSessionId: 'stolen' }),
      bob.deleteSession({ sessionId: 'main' }),
    ];
    for (const p of attempts) expect(await webFailure(p)).toMatchObject({ code: Code.NotFound, reason: 'SESSION_NOT_FOUND' });
    expect(await webFailure(bob.exportSession({ sessionId: 'main' }))).toMatchObject({ code: Code.NotFound });
    expect(await webFailure(bob.subscribeSurface({ sessionId: 'main' }))).toMatchObject({ code: Code.NotFound });
    expect((await bob.listSessions({})).sessions.map((s) => s.id)).not.toContain('main');
    // A client-sent tenant header is ignored: only the token's tenant counts.
    const forged = webClient(base, protocol, httpVersion, BOB);
    const spoof = await webFailure(forged.getSession({ sessionId: 'main' }, { headers: { 'x-palimpsest-tenant': 'alice' } }));
    expect(spoof).toMatchObject({ code: Code.NotFound, reason: 'SESSION_NOT_FOUND' });
    // Bob may have his own "main"; Alice's is unchanged.
    await bob.createSession({ sessionId: `main-${protocol}` });
    const alice = webClient(base, protocol, httpVersion, ALICE);
    expect((await alice.getSession({ sessionId: 'main' })).session?.eventCount).toBe(1n);
    expect(await webFailure(alice.getSession({ sessionId: `main-${protocol}` }))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
  });
});

describe('CORS', () => {
  const preflight = (origin: string) => fetch(`${base}/palimpsest.v1.SessionService/GetSession`, {
    method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,authorization' },
  });

  it('allows a configured origin and refuses others', async () => {
    const ok = await preflight('http://viewer.example');
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-origin')).toBe('http://viewer.example');
    expect(ok.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    const no = await preflight('http://evil.example');
    expect(no.status).toBe(403);
    expect(no.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('is off by default: no CORS headers at all', async () => {
    const plain = await startTestServer({ webListen: '127.0.0.1:0' });
    try {
      const r = await fetch(`http://127.0.0.1:${plain.server.webPort}/palimpsest.v1.SessionService/GetSession`, {
        method: 'POST', headers: { origin: 'http://viewer.example', 'content-type': 'application/json' }, body: '{"sessionId":"x"}',
      });
      expect(r.headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      await plain.stop();
    }
  });
});

describe('buf curl', () => {
  const buf = 'node_modules/.bin/buf';
  it('speaks Connect and gRPC-Web to the web port (schema from gen/descriptor.binpb, or from reflection over HTTP/2)', async () => {
    const auth = ['-H', `authorization: Bearer ${ALICE}`, '--schema', 'gen/descriptor.binpb'];
    const c = await run(buf, ['curl', '--protocol', 'connect', ...auth, '-d', '{"sessionId":"main"}', `${base}/palimpsest.v1.SessionService/GetSurface`]);
    expect(JSON.parse(c.stdout)).toMatchObject({ seqs: ['0'] });
    const w = await run(buf, ['curl', '--protocol', 'grpcweb', ...auth, '-d', '{"sessionId":"main","view":"MESSAGE_VIEW_MODEL_HISTORY"}', `${base}/palimpsest.v1.SessionService/GetMessages`]);
    expect(JSON.parse(JSON.parse(w.stdout).messages[0].messageJson).id).toBe('m1');
    const err = await run(buf, ['curl', '--protocol', 'connect', ...auth, '-d', '{"sessionId":"nope"}', `${base}/palimpsest.v1.SessionService/GetSession`]).catch((e: { stderr: string }) => e);
    expect((err as { stderr: string }).stderr).toMatch(/not_found/);
    expect((err as { stderr: string }).stderr).toMatch(/google\.rpc\.ErrorInfo/);
    // Server reflection is served on the web port too (a bidi stream: HTTP/2), so no schema is needed.
    const list = await run(buf, ['curl', '--protocol', 'connect', '--http2-prior-knowledge', '--list-services', base]);
    expect(list.stdout.split('\n')).toContain('palimpsest.v1.SessionService');
    const r = await run(buf, ['curl', '--protocol', 'grpcweb', '--http2-prior-knowledge', '-H', `authorization: Bearer ${ALICE}`, '-d', '{"sessionId":"main"}', `${base}/palimpsest.v1.SessionService/GetSession`]);
    expect(JSON.parse(r.stdout).session.id).toBe('main');
  }, 30_000);
});

describe('TLS on the web port (the same certificate flags)', () => {
  let pki: TestPki;
  beforeAll(() => {
    pki = generatePki();
  });
  afterAll(() => rmSync(pki.dir, { recursive: true, force: true }));

  it('serves Connect over TLS (HTTP/1.1 and HTTP/2 by ALPN), and mutual TLS refuses a client without a certificate', async () => {
    const s = await startTestServer({ webListen: '127.0.0.1:0', tlsCert: pki.serverCert, tlsKey: pki.serverKey });
    try {
      const url = `https://127.0.0.1:${s.server.webPort}`;
      for (const httpVersion of ['1.1', '2'] as const) {
        const c = webClient(url, 'connect', httpVersion, undefined, { ca: readFileSync(pki.caCert) });
        expect((await c.createSession({ sessionId: `tls-${httpVersion.replace('.', '')}` })).session?.id).toBe(`tls-${httpVersion.replace('.', '')}`);
      }
    } finally {
      await s.stop();
    }
    const m = await startTestServer({ webListen: '127.0.0.1:0', tlsCert: pki.serverCert, tlsKey: pki.serverKey, tlsClientCa: pki.caCert });
    try {
      const url = `https://127.0.0.1:${m.server.webPort}`;
      const anon = webClient(url, 'connect', '1.1', undefined, { ca: readFileSync(pki.caCert) });
      await expect(anon.listSessions({})).rejects.toThrow();
      const withCert = webClient(url, 'connect', '1.1', undefined, { ca: readFileSync(pki.caCert), cert: readFileSync(pki.clientCert), key: readFileSync(pki.clientKey) });
      expect((await withCert.listSessions({})).sessions).toEqual([]);
    } finally {
      await m.stop();
    }
  }, 30_000);
});
