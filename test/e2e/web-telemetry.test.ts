/**
 * Per-RPC telemetry of the web port (Connect, gRPC-Web, gRPC over --web-listen): the same
 * grpc_server_* series as the gRPC port (one series per method and code, whichever port served
 * the call), the same log line (plus `web_protocol`), and the same SERVER span per RPC
 * (continuing the caller's `traceparent`, with a child span per store call).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import { Code, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { SessionService } from '../../gen/es/palimpsest/v1/service_pb.js';
import { hashToken } from '../../src/server/auth.js';
import { api, fixture, until } from '../support/e2e.js';
import { userMessage } from '../support/events.js';
import { ensureBuilt, spawnServer } from '../support/server-process.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { esEvent, webClient, webFailure } from '../support/web-client.js';
import { expectStoreSpansUnder } from '../support/spans.js';

const SVC = 'palimpsest.v1.SessionService';

/** The sample lines of `name` whose labels include every pair of `labels`. */
function samples(text: string, name: string, labels: Record<string, string> = {}): string[] {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return text.split('\n').filter((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && want.every((w) => l.includes(w)));
}

function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const line = samples(text, name, labels)[0];
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('web port: grpc_server_* metrics', () => {
  let t: TestServer;
  let base: string;
  const scrape = async (): Promise<string> => (await fetch(`http://127.0.0.1:${t.server.metricsPort}/metrics`)).text();
  beforeAll(async () => {
    t = await startTestServer({ metricsListen: '127.0.0.1:0', webListen: '127.0.0.1:0' });
    base = `http://127.0.0.1:${t.server.webPort}`;
  });
  afterAll(async () => { await t?.stop(); });

  it('counts web calls in the gRPC port series (same names and labels), by type and code', async () => {
    await api(t.client).createSession({ sessionId: 'wm-grpc' });
    const connect = webClient(base, 'connect', '1.1');
    const grpcWeb = webClient(base, 'grpcweb', '2');
    await connect.createSession({ sessionId: 'wm1' });
    await grpcWeb.appendEvents({ sessionId: 'wm1', events: [esEvent(userMessage('u1', 'hi'))] });
    expect((await webFailure(connect.getSurface({ sessionId: 'nope' }))).code).toBe(Code.NotFound);
    expect((await webFailure(grpcWeb.appendEvents({ sessionId: 'wm1', expectedLastSeq: 7n, events: [esEvent(userMessage('u2', 'x'))] }))).code).toBe(Code.FailedPrecondition);
    // A server stream that ends, a client stream (HTTP/2), and a server stream the client cancels.
    for await (const _ of connect.exportSession({ sessionId: 'wm1' }));
    const bytes = fixture('agent-instructions.jsonl');
    async function* parts() {
      yield { part: { case: 'options' as const, value: { sessionId: 'wm-import' } } };
      yield { part: { case: 'chunk' as const, value: bytes } };
    }
    await webClient(base, 'connect', '2').importSession(parts());
    const ac = new AbortController();
    for await (const _ of connect.subscribeSurface({ sessionId: 'wm1', snapshot: true }, { signal: ac.signal })) {
      ac.abort();
      break;
    }
    const text = await until(async () => {
      const s = await scrape();
      return sample(s, 'grpc_server_handled_total', { grpc_method: 'SubscribeSurface' }) === 1 ? s : undefined;
    }, 'the cancelled web stream to be counted');

    // One series for both ports, labelled exactly as before (no extra label on the gRPC port's series).
    expect(samples(text, 'grpc_server_handled_total', { grpc_method: 'CreateSession' }))
      .toEqual([`grpc_server_handled_total{grpc_service="${SVC}",grpc_method="CreateSession",grpc_type="unary",grpc_code="OK"} 2`]);
    expect(samples(text, 'grpc_server_started_total', { grpc_method: 'CreateSession' }))
      .toEqual([`grpc_server_started_total{grpc_service="${SVC}",grpc_method="CreateSession",grpc_type="unary"} 2`]);
    const unary = (m: string) => ({ grpc_service: SVC, grpc_method: m, grpc_type: 'unary' });
    expect(sample(text, 'grpc_server_started_total', unary('AppendEvents'))).toBe(2);
    expect(sample(text, 'grpc_server_handled_total', { ...unary('AppendEvents'), grpc_code: 'OK' })).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { ...unary('AppendEvents'), grpc_code: 'FailedPrecondition' })).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { ...unary('GetSurface'), grpc_code: 'NotFound' })).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { grpc_method: 'ExportSession', grpc_type: 'server_stream', grpc_code: 'OK' })).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { grpc_method: 'ImportSession', grpc_type: 'client_stream', grpc_code: 'OK' })).toBe(1);
    expect(sample(text, 'grpc_server_handled_total', { grpc_method: 'SubscribeSurface', grpc_type: 'server_stream', grpc_code: 'Canceled' })).toBe(1);
    expect(sample(text, 'grpc_server_handling_seconds_count', unary('AppendEvents'))).toBe(2);
    expect(sample(text, 'palimpsest_imports_total')).toBe(1);
  });
});

interface LogLine { level: number; rpc?: string; rpc_service?: string; code?: string; ms?: number; session?: string; tenant?: string; web_protocol?: string; msg: string }

describe('web port: per-RPC log lines', () => {
  const lines = (stderr: string): LogLine[] => stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as LogLine);

  it('one line per web RPC with the gRPC port fields (tenant, session, code), plus web_protocol; never event data', async () => {
    ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'palimpsest-weblog-'));
    const tokens = join(dir, 'tokens.json');
    writeFileSync(tokens, JSON.stringify({ tokens: [{ name: 'agent', sha256: hashToken('tok-w'), tenant: 'acme', permissions: ['read', 'append'] }] }));
    const srv = await spawnServer(['--db', ':memory:', '--log-level', 'debug', '--auth-tokens', tokens, '--web-listen', '127.0.0.1:0']);
    const grpc = new SessionServiceClient(srv.address, credentials.createInsecure());
    try {
      const web = (await until(() => /web port \(Connect, gRPC-Web, viewer\) on (\S+)/.exec(srv.stdout()), 'the web port line'))[1]!;
      const base = `http://${web}`;
      const { Metadata } = await import('@grpc/grpc-js');
      const md = new Metadata();
      md.set('authorization', 'Bearer tok-w');
      await new Promise<void>((resolve, reject) => grpc.createSession({ sessionId: 'log-g', labels: {}, strict: false }, md, (e) => (e ? reject(e) : resolve())));
      const c = webClient(base, 'connect', '1.1', 'tok-w');
      await c.createSession({ sessionId: 'log-w' });
      await c.appendEvents({ sessionId: 'log-w', events: [esEvent(userMessage('u1', 'top-secret-web-text'))] });
      await webFailure(webClient(base, 'grpcweb', '2', 'tok-w').getSurface({ sessionId: 'log-missing' }));
      await webFailure(webClient(base, 'connect', '1.1').getSurface({ sessionId: 'log-w' })); // no token
      const rpc = await until(() => {
        const l = lines(srv.stderr()).filter((x) => x.rpc !== undefined);
        return l.length >= 5 ? l : undefined;
      }, 'five rpc log lines');
      expect(rpc.map((l) => [l.rpc, l.code, l.level, l.session, l.tenant, l.web_protocol])).toEqual([
        ['CreateSession', 'OK', 20, 'log-g', 'acme', undefined],
        ['CreateSession', 'OK', 20, 'log-w', 'acme', 'connect'],
        ['AppendEvents', 'OK', 20, 'log-w', 'acme', 'connect'],
        ['GetSurface', 'NOT_FOUND', 30, 'log-missing', 'acme', 'grpc-web'],
        ['GetSurface', 'UNAUTHENTICATED', 30, undefined, undefined, 'connect'],
      ]);
      // The web line is the gRPC port's line plus web_protocol.
      expect(Object.keys(rpc[1]!).sort()).toEqual([...Object.keys(rpc[0]!), 'web_protocol'].sort());
      expect(rpc[1]).toMatchObject({ rpc_service: SVC, msg: 'rpc' });
      for (const l of rpc) expect(l.ms).toBeGreaterThanOrEqual(0);
      expect(rpc[3]!.msg).toMatch(/^rpc failed: /);
      expect(srv.stderr()).not.toContain('top-secret');
      expect(srv.stderr()).not.toContain('tok-w');
    } finally {
      grpc.close();
      srv.proc.kill('SIGTERM');
      await srv.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('web port: a span per RPC (in-memory exporter)', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  let t: TestServer;
  let base: string;
  beforeAll(async () => {
    t = await startTestServer({ webListen: '127.0.0.1:0' }, { tracerProvider: provider });
    base = `http://127.0.0.1:${t.server.webPort}`;
  });
  afterAll(async () => { await t?.stop(); await provider.shutdown(); });

  const TRACE = '0af7651916cd43dd8448eb211c80319c';
  const PARENT = 'b7ad6b7169203331';

  it('the SERVER span continues the traceparent header and parents a span per store call, as on the gRPC port', async () => {
    await webClient(base, 'connect', '1.1').createSession({ sessionId: 'wt1' });
    exporter.reset();
    const traced = createClient(SessionService, createConnectTransport({
      baseUrl: base, httpVersion: '1.1',
      interceptors: [(next) => (req) => {
        req.header.set('traceparent', `00-${TRACE}-${PARENT}-01`);
        return next(req);
      }],
    }));
    await traced.appendEvents({ sessionId: 'wt1', events: [esEvent(userMessage('u1', 'hi'))] });
    const spans = await until(() => {
      const s = exporter.getFinishedSpans();
      return s.some((x) => x.name === `${SVC}/AppendEvents`) ? s : undefined;
    }, 'the append span');
    const rpc = spans.find((s) => s.name === `${SVC}/AppendEvents`)!;
    expect(rpc.kind).toBe(SpanKind.SERVER);
    expect(rpc.spanContext().traceId).toBe(TRACE);
    expect(rpc.parentSpanContext?.spanId).toBe(PARENT);
    expect(rpc.attributes).toEqual({
      'rpc.system': 'grpc', 'rpc.service': SVC, 'rpc.method': 'AppendEvents', 'rpc.grpc.type': 'unary', 'rpc.grpc.status_code': 0,
      'palimpsest.web_protocol': 'connect', 'palimpsest.session.id': 'wt1', 'gen_ai.conversation.id': 'wt1',
    });
    // Store spans are the RPC's children, in its trace; none lies outside it.
    expectStoreSpansUnder(spans, rpc, TRACE);
  });

  it('a failed web RPC is an ERROR span with its status code; a server stream gets its span too', async () => {
    exporter.reset();
    await webFailure(webClient(base, 'grpcweb', '2').getSurface({ sessionId: 'missing' }));
    const span = await until(() => exporter.getFinishedSpans().find((s) => s.name === `${SVC}/GetSurface`), 'the GetSurface span');
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes).toMatchObject({ 'rpc.grpc.status_code': 5, 'palimpsest.web_protocol': 'grpc-web' });
    expect(span.parentSpanContext).toBeUndefined();
    for await (const _ of webClient(base, 'connect', '1.1').exportSession({ sessionId: 'wt1' }));
    const exp = await until(() => exporter.getFinishedSpans().find((s) => s.name === `${SVC}/ExportSession`), 'the ExportSession span');
    expect(exp.attributes).toMatchObject({ 'rpc.grpc.type': 'server_stream', 'rpc.grpc.status_code': 0 });
    expect(exporter.getFinishedSpans().some((s) => s.name.startsWith('store.') && s.parentSpanContext?.spanId === exp.spanContext().spanId)).toBe(true);
  });
});
