/**
 * Telemetry (issue #18): grpc_server_* metrics in the go-grpc-prometheus convention, Node's default
 * metrics under their stock names, imports/forks/repairs counted; one structured log line per
 * RPC (debug on success, info on failure; never event data); the log level validated.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials, Metadata } from '@grpc/grpc-js';
import { hashToken } from '../../src/server/auth.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { api, failure, fixture, until, type Api } from '../support/e2e.js';
import { input, userMessage } from '../support/events.js';
import { ensureBuilt, spawnServer } from '../support/server-process.js';
import { runCli } from '../support/cli.js';
import { call, startTestServer, type TestServer } from '../support/test-server.js';

const SVC = 'palimpsest.v1.SessionService';

/** The value of the sample of `name` whose labels include every pair of `labels`. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && want.every((w) => l.includes(w)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('grpc_server_* metrics', () => {
  let t: TestServer;
  let a: Api;
  const scrape = async (): Promise<string> => (await fetch(`http://127.0.0.1:${t.server.metricsPort}/metrics`)).text();
  beforeAll(async () => {
    t = await startTestServer({ metricsListen: '127.0.0.1:0' });
    a = api(t.client);
  });
  afterAll(async () => { await t?.stop(); });

  it('counts every RPC by method, type and code, with a handling-time histogram', async () => {
    await a.createSession({ sessionId: 'tm1' });
    await a.appendEvents({ sessionId: 'tm1', events: [userMessage('u1', 'hi')] });
    await failure(a.appendEvents({ sessionId: 'tm1', expectedLastSeq: 7, events: [input('x/y', {})] }));
    await failure(a.getSurface({ sessionId: 'nope' }));
    await a.importSession({ sessionId: 'tm-import' }, fixture('agent-instructions.jsonl'));
    await a.forkSession({ sessionId: 'tm1', childSessionId: 'tm-fork' });
    await a.repairSession({ sessionId: 'tm1' });
    // A server stream the client cancels.
    const stream = t.client.subscribeSurface({ sessionId: 'tm1', snapshot: true, includeMessages: false, heartbeatIntervalMs: 0, dataFormat: 0, waitForCreate: false, blobRefs: false });
    stream.on('error', () => {});
    await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    stream.cancel();
    const text = await until(async () => {
      const s = await scrape();
      return sample(s, 'grpc_server_handled_total', { grpc_method: 'SubscribeSurface' }) === 1 ? s : undefined;
    }, 'the cancelled stream to be counted');

    const unary = (m: string) => ({ grpc_service: SVC, grpc_method: m, grpc_type: 'unary' });
    expect(sample(text, 'grpc_server_started_total', unary('CreateSession'))).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { ...unary('CreateSession'), grpc_code: 'OK' })).toBe(1);
    expect(sample(text, 'grpc_server_started_total', unary('AppendEvents'))).toBe(2);
    expect(sample(text, 'grpc_server_handled_total', { ...unary('AppendEvents'), grpc_code: 'OK' })).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { ...unary('AppendEvents'), grpc_code: 'FailedPrecondition' })).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { ...unary('GetSurface'), grpc_code: 'NotFound' })).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { grpc_method: 'ImportSession', grpc_type: 'client_stream', grpc_code: 'OK' })).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { grpc_method: 'SubscribeSurface', grpc_type: 'server_stream', grpc_code: 'Canceled' })).toBe(1);
    expect(text).toContain('# TYPE grpc_server_handling_seconds histogram');
    expect(sample(text, 'grpc_server_handling_seconds_count', unary('AppendEvents'))).toBe(2);
    expect(sample(text, 'grpc_server_handling_seconds_bucket', { ...unary('AppendEvents'), le: '+Inf' })).toBe(2);
    expect(sample(text, 'grpc_server_handling_seconds_sum', unary('AppendEvents'))).toBeGreaterThan(0);
    expect(sample(text, 'palimpsest_imports_total')).toBe(1);
    expect(sample(text, 'palimpsest_forks_total')).toBe(1);
    expect(sample(text, 'palimpsest_repairs_total')).toBe(1);
  });

  it("exposes Node's default metrics under their stock names (no palimpsest_process_process_ prefix)", async () => {
    const text = await scrape();
    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_heap_size_total_bytes')).toBeGreaterThan(0);
    expect(text).not.toContain('palimpsest_process_');
  });
});

interface LogLine { level: number; rpc?: string; code?: string; ms?: number; session?: string; tenant?: string; msg: string }

describe('per-RPC log lines', () => {
  const lines = (stderr: string): LogLine[] => stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as LogLine);

  it('debug: one line per RPC with method, code, duration and session; failures at info; never event data', async () => {
    ensureBuilt();
    const srv = await spawnServer(['--db', ':memory:', '--log-level', 'debug']);
    const client = new SessionServiceClient(srv.address, credentials.createInsecure());
    try {
      const a = api(client);
      await a.createSession({ sessionId: 'log-1' });
      await a.appendEvents({ sessionId: 'log-1', events: [userMessage('u1', 'top-secret-event-text')] });
      await failure(a.appendEvents({ sessionId: 'log-1', expectedLastSeq: 9, events: [userMessage('u2', 'another-secret')] }));
      // Data that is not JSON: JSON.parse's own message quotes the text; the refusal must not.
      const notJson = await failure(a.appendEvents({ sessionId: 'log-1', events: [{ ...input('plugin/x', 0), data: { kind: { $case: 'json', value: 'secret-hunter2 x' } } }] }));
      expect(notJson.reason).toBe('NOT_JSON');
      expect(notJson.message).toContain('is not valid JSON');
      expect(notJson.message).not.toContain('hunter2');
      const rpcLines = await until(() => {
        const l = lines(srv.stderr()).filter((x) => x.rpc !== undefined);
        return l.length >= 4 ? l : undefined;
      }, 'four rpc log lines');
      expect(rpcLines.map((l) => [l.rpc, l.code, l.level, l.session])).toEqual([
        ['CreateSession', 'OK', 20, 'log-1'],
        ['AppendEvents', 'OK', 20, 'log-1'],
        ['AppendEvents', 'FAILED_PRECONDITION', 30, 'log-1'],
        ['AppendEvents', 'INVALID_ARGUMENT', 30, 'log-1'],
      ]);
      for (const l of rpcLines) expect(l.ms).toBeGreaterThanOrEqual(0);
      expect(rpcLines[2]!.msg).toContain('expected_last_seq');
      expect(srv.stderr()).not.toContain('secret');
    } finally {
      client.close();
      srv.proc.kill('SIGTERM');
      await srv.exited;
    }
  });

  it('with auth: the tenant of the token, and rejected calls (UNAUTHENTICATED) are logged too', async () => {
    ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'palimpsest-log-'));
    const tokens = join(dir, 'tokens.json');
    writeFileSync(tokens, JSON.stringify({ tokens: [{ name: 'agent', sha256: hashToken('tok-1'), tenant: 'acme', permissions: ['read', 'append'] }] }));
    const srv = await spawnServer(['--db', ':memory:', '--log-level', 'debug', '--auth-tokens', tokens]);
    const client = new SessionServiceClient(srv.address, credentials.createInsecure());
    try {
      const md = new Metadata();
      md.set('authorization', 'Bearer tok-1');
      await call(client.createSession.bind(client), { sessionId: 'log-t', labels: {}, strict: false }, md);
      await failure(api(client).getSurface({ sessionId: 'log-t' })); // no token
      const l = await until(() => {
        const x = lines(srv.stderr()).filter((y) => y.rpc !== undefined);
        return x.length >= 2 ? x : undefined;
      }, 'two rpc lines');
      expect(l[0]).toMatchObject({ rpc: 'CreateSession', code: 'OK', tenant: 'acme', session: 'log-t' });
      expect(l[1]).toMatchObject({ rpc: 'GetSurface', code: 'UNAUTHENTICATED', level: 30 });
      expect(l[1]!.tenant).toBeUndefined();
      expect(srv.stderr()).not.toContain('tok-1');
    } finally {
      client.close();
      srv.proc.kill('SIGTERM');
      await srv.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('info: successes are not logged, failures are', async () => {
    ensureBuilt();
    const srv = await spawnServer(['--db', ':memory:', '--log-level', 'info']);
    const client = new SessionServiceClient(srv.address, credentials.createInsecure());
    try {
      const a = api(client);
      await a.createSession({ sessionId: 'log-2' });
      await failure(a.getSurface({ sessionId: 'missing' }));
      const failed = await until(() => lines(srv.stderr()).find((l) => l.rpc === 'GetSurface'), 'the failure line');
      expect(failed).toMatchObject({ level: 30, code: 'NOT_FOUND', session: 'missing' });
      expect(lines(srv.stderr()).filter((l) => l.rpc === 'CreateSession')).toEqual([]);
    } finally {
      client.close();
      srv.proc.kill('SIGTERM');
      await srv.exited;
    }
  });
});

describe('log level validation', () => {
  it('an invalid --log-level or PALIMPSEST_LOG_LEVEL is a usage error naming where it came from', async () => {
    ensureBuilt();
    const flag = await runCli(['serve', '--db', ':memory:', '--listen', '127.0.0.1:0', '--log-level', 'verbose']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('--log-level must be one of trace, debug, info, warn, error, fatal, silent, got "verbose"');
    const env = await runCli(['serve', '--db', ':memory:', '--listen', '127.0.0.1:0'], { env: { PALIMPSEST_LOG_LEVEL: 'verbose' } });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('PALIMPSEST_LOG_LEVEL (the environment variable for --log-level) must be one of');
    expect(env.stderr.trim().split('\n')).toHaveLength(1);
  });
});
