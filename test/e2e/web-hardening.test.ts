/**
 * Issue #17's request hardening on the web port, which runs the gRPC port's handler table: the
 * request bounds and strict UTF-8 of the gRPC port's deserializer (safe-decode.ts,
 * request-checks.ts) judge web requests too (with the same reasons and details, and nothing
 * stored), and a token file reload ends the web port's open streams of a revoked token.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { hashToken } from '../../src/server/auth.js';
import { Status } from '../../gen/google/rpc/status.js';
import { ErrorInfoSchema } from '../../gen/es/google/rpc/error_details_pb.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { eventually } from '../support/subscribe.js';
import { userMessage } from '../support/events.js';
import { esEvent, webClient, webFailure, WEB_PROTOCOLS } from '../support/web-client.js';

const OWNER = 'web-hardening-owner-0001';
const REVOKED = 'web-hardening-revoked-0002';
const KEPT = 'web-hardening-kept-0003';

let dir: string;
let tokensPath: string;
let t: TestServer;
let base: string;
function writeTokens(tokens: readonly { name: string; token: string }[]): void {
  writeFileSync(tokensPath, JSON.stringify({
    tokens: tokens.map((x) => ({ name: x.name, sha256: hashToken(x.token), tenant: 'alice', permissions: ['read', 'append', 'admin'] })),
  }));
}
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'palimpsest-web-hardening-'));
  tokensPath = join(dir, 'tokens.json');
  writeTokens([{ name: 'owner', token: OWNER }, { name: 'revoked', token: REVOKED }, { name: 'kept', token: KEPT }]);
  t = await startTestServer({ webListen: '127.0.0.1:0', authTokens: tokensPath });
  base = `http://127.0.0.1:${t.server.webPort}`;
});
afterAll(async () => {
  await t.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** CreateSessionRequest bytes: session_id (1) = `id`, cwd (3) = `cwd` (raw bytes). */
function createSessionBytes(id: string, cwd: Uint8Array): Uint8Array {
  const idBytes = Buffer.from(id);
  return Uint8Array.from([0x0a, idBytes.length, ...idBytes, 0x1a, cwd.length, ...cwd]);
}

describe.each(WEB_PROTOCOLS)('request bounds on the web port over $protocol (json: $json)', ({ protocol, httpVersion, json }) => {
  const c = () => webClient(base, protocol, httpVersion, OWNER, undefined, json);

  it('refuses a 60,000-character session id with INVALID_SESSION_ID (limit, actual), as the gRPC port does', async () => {
    const e = await webFailure(c().getSession({ sessionId: 'a'.repeat(60_000) }));
    expect(e).toMatchObject({ code: Code.InvalidArgument, reason: 'INVALID_SESSION_ID', metadata: { limit: '128', actual: '60000' } });
    expect(e.message.length).toBeLessThan(2048);
  });

  it('refuses 65 labels with TOO_MANY_LABELS and stores nothing; 64 labels are accepted', async () => {
    const labels = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));
    const id = `labels-${protocol}-${json ? 'json' : 'bin'}`;
    const e = await webFailure(c().createSession({ sessionId: id, labels: labels(65) }));
    expect(e).toMatchObject({ code: Code.ResourceExhausted, reason: 'TOO_MANY_LABELS', metadata: { limit: '64', actual: '65' } });
    expect(await webFailure(c().getSession({ sessionId: id }))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
    expect(Object.keys((await c().createSession({ sessionId: id, labels: labels(64) })).session?.labels ?? {})).toHaveLength(64);
  });
});

describe('strict UTF-8 on the web port (Connect would replace invalid bytes with U+FFFD)', () => {
  const url = () => `${base}/palimpsest.v1.SessionService/CreateSession`;
  const headers = (type: string) => ({ 'content-type': type, authorization: `Bearer ${OWNER}` });

  it('Connect unary: invalid UTF-8 in cwd is INVALID_UTF8 naming the field; nothing is stored; valid bytes create the session', async () => {
    const r = await fetch(url(), { method: 'POST', headers: headers('application/proto'), body: createSessionBytes('utf8-connect', Uint8Array.from([0x61, 0xff, 0x62])) });
    expect(r.status).toBe(400);
    const body = await r.json() as { code: string; message: string; details: { type: string; value: string }[] };
    expect(body.code).toBe('invalid_argument');
    expect(body.message).toMatch(/cwd is not valid UTF-8/);
    const info = body.details.find((d) => d.type === 'google.rpc.ErrorInfo');
    expect(fromBinary(ErrorInfoSchema, Buffer.from(info!.value, 'base64'))).toMatchObject({ reason: 'INVALID_UTF8', metadata: { field: 'cwd' } });
    const c = webClient(base, 'connect', '1.1', OWNER);
    expect(await webFailure(c.getSession({ sessionId: 'utf8-connect' }))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
    const ok = await fetch(url(), { method: 'POST', headers: headers('application/proto'), body: createSessionBytes('utf8-connect', Buffer.from('/home/é')) });
    expect(ok.status, await ok.clone().text()).toBe(200);
    expect((await c.getSession({ sessionId: 'utf8-connect' })).session?.cwd).toBe('/home/é');
  });

  it('gRPC-Web: the same refusal in the trailers', async () => {
    const msg = createSessionBytes('utf8-grpcweb', Uint8Array.from([0xc3, 0x28]));
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, msg.length]), msg]);
    const r = await fetch(url(), { method: 'POST', headers: headers('application/grpc-web+proto'), body: frame });
    const out = Buffer.from(await r.arrayBuffer());
    // The trailer frame (flag 0x80): "grpc-status: 3", "grpc-status-details-bin: <base64 Status>".
    const trailers = out.subarray(out.indexOf(0x80) + 5).toString('latin1');
    expect(trailers).toMatch(/grpc-status: ?3/);
    const bin = /grpc-status-details-bin: ?(\S+)/.exec(trailers)?.[1] ?? '';
    const st = Status.decode(Buffer.from(bin, 'base64'));
    const info = st.details.find((d) => d.typeUrl.endsWith('google.rpc.ErrorInfo'));
    expect(fromBinary(ErrorInfoSchema, info!.value)).toMatchObject({ reason: 'INVALID_UTF8', metadata: { field: 'cwd' } });
    expect(await webFailure(webClient(base, 'connect', '1.1', OWNER).getSession({ sessionId: 'utf8-grpcweb' }))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
  });
});

describe('token file reload on the web port', () => {
  it('ends the web subscriptions of a revoked token with UNAUTHENTICATED; another token\'s stream keeps delivering', async () => {
    const owner = webClient(base, 'connect', '1.1', OWNER);
    await owner.createSession({ sessionId: 'watched' });
    await owner.appendEvents({ sessionId: 'watched', events: [esEvent(userMessage('m0', 'hello'))] });
    const follow = (token: string) => {
      const ac = new AbortController();
      const state = { seqs: [] as number[], caughtUp: false, error: undefined as ConnectError | undefined, ended: false };
      void (async () => {
        try {
          for await (const r of webClient(base, 'connect', '1.1', token).subscribeEvents({ sessionId: 'watched' }, { signal: ac.signal })) {
            if (r.kind.case === 'event') state.seqs.push(Number(r.kind.value.seq));
            if (r.kind.case === 'caughtUp') state.caughtUp = true;
          }
        } catch (e) {
          if (e instanceof ConnectError) state.error = e;
        } finally {
          state.ended = true;
        }
      })();
      return { state, stop: () => ac.abort() };
    };
    const revoked = follow(REVOKED);
    const kept = follow(KEPT);
    try {
      await eventually(() => revoked.state.caughtUp && kept.state.caughtUp, 10_000, 'both caught up');
      writeTokens([{ name: 'owner', token: OWNER }, { name: 'kept', token: KEPT }]);
      t.server.reloadTokens();
      await eventually(() => revoked.state.ended, 10_000, 'the revoked stream ended');
      expect(revoked.state.error?.code).toBe(Code.Unauthenticated);
      expect(revoked.state.error?.rawMessage).toMatch(/revoked/);
      await owner.appendEvents({ sessionId: 'watched', events: [esEvent(userMessage('m1', 'again'))] });
      await eventually(() => kept.state.seqs.includes(1), 10_000, 'the kept stream got seq 1');
      expect(kept.state.ended).toBe(false);
      expect(revoked.state.seqs).toEqual([0]);
      // The revoked token is refused for new calls too.
      expect(await webFailure(webClient(base, 'connect', '1.1', REVOKED).getSession({ sessionId: 'watched' }))).toMatchObject({ code: Code.Unauthenticated });
    } finally {
      revoked.stop();
      kept.stop();
    }
  });
});
