/**
 * OpenTelemetry traces (issue #18): off by default, on with the standard OTEL_* variables; with
 * an in-memory exporter an append gives a span tree (the RPC's SERVER span, child of the
 * client's traceparent, with a child span per store call), and an OTLP endpoint receives spans
 * from a real server process.
 */
import { createServer } from 'node:http';
import { credentials, Metadata } from '@grpc/grpc-js';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { tracesRequested } from '../../src/server/tracing.js';
import { api, failure, until } from '../support/e2e.js';
import { userMessage } from '../support/events.js';
import { ensureBuilt, spawnServer } from '../support/server-process.js';
import { call, startTestServer, type TestServer } from '../support/test-server.js';
import { expectStoreSpansUnder } from '../support/spans.js';

describe('tracesRequested', () => {
  it('is off by default and on with the standard variables', () => {
    expect(tracesRequested({})).toBe(false);
    expect(tracesRequested({ OTEL_SERVICE_NAME: 'x' })).toBe(false);
    expect(tracesRequested({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(tracesRequested({ OTEL_TRACES_EXPORTER: 'console,otlp' })).toBe(true);
    expect(tracesRequested({ OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
    expect(tracesRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracesRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(tracesRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
  });
});

describe('span tree of an append (in-memory exporter)', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  let t: TestServer;
  beforeAll(async () => { t = await startTestServer({}, { tracerProvider: provider }); });
  afterAll(async () => { await t?.stop(); await provider.shutdown(); });

  const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
  const PARENT = '00f067aa0ba902b7';

  it('the SERVER span continues the client trace and parents a span per store call', async () => {
    const a = api(t.client);
    await a.createSession({ sessionId: 'tr1' });
    exporter.reset();
    const md = new Metadata();
    md.set('traceparent', `00-${TRACE}-${PARENT}-01`);
    await call(t.client.appendEvents.bind(t.client), { sessionId: 'tr1', events: [userMessage('u1', 'hi')], idempotencyKey: '' }, md);
    const spans = await until(() => {
      const s = exporter.getFinishedSpans();
      return s.some((x) => x.name === 'palimpsest.v1.SessionService/AppendEvents') ? s : undefined;
    }, 'the append span');
    const rpc = spans.find((s) => s.name === 'palimpsest.v1.SessionService/AppendEvents')!;
    expect(rpc.kind).toBe(SpanKind.SERVER);
    expect(rpc.spanContext().traceId).toBe(TRACE);
    expect(rpc.parentSpanContext?.spanId).toBe(PARENT);
    expect(rpc.attributes).toMatchObject({ 'rpc.system': 'grpc', 'rpc.service': 'palimpsest.v1.SessionService', 'rpc.method': 'AppendEvents', 'rpc.grpc.status_code': 0 });
    // The span names the session it served (no tenant without auth).
    expect(rpc.attributes['palimpsest.session.id']).toBe('tr1');
    expect(rpc.attributes['palimpsest.tenant']).toBeUndefined();
    // Store spans are the RPC's children, in its trace; none lies outside it.
    expectStoreSpansUnder(spans, rpc, TRACE);
  });

  it('a failed RPC is an ERROR span with its status code', async () => {
    exporter.reset();
    await failure(api(t.client).getSurface({ sessionId: 'missing' }));
    const span = await until(() => exporter.getFinishedSpans().find((s) => s.name.endsWith('/GetSurface')), 'the GetSurface span');
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes['rpc.grpc.status_code']).toBe(5);
    expect(span.attributes['palimpsest.session.id']).toBe('missing');
    expect(span.parentSpanContext).toBeUndefined(); // no traceparent: a new trace
  });
});

describe('OTEL_* environment (a real server process)', () => {
  it('OTEL_EXPORTER_OTLP_ENDPOINT sends the spans to the collector over OTLP/HTTP', async () => {
    ensureBuilt();
    const received: { url: string; body: Buffer }[] = [];
    const collector = createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (d: Buffer) => parts.push(d));
      req.on('end', () => { received.push({ url: req.url ?? '', body: Buffer.concat(parts) }); res.writeHead(200).end(); });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    const port = (collector.address() as { port: number }).port;
    const srv = await spawnServer(['--db', ':memory:'], 15_000, {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_SERVICE_NAME: 'palimpsest-test',
    });
    const client = new SessionServiceClient(srv.address, credentials.createInsecure());
    try {
      await api(client).createSession({ sessionId: 'otlp' });
      await api(client).appendEvents({ sessionId: 'otlp', events: [userMessage('u1', 'hi')] });
      await until(() => received.some((r) => r.body.includes('AppendEvents')), 'spans at the collector', 15_000);
      const r = received.find((x) => x.body.includes('AppendEvents'))!;
      expect(r.url).toBe('/v1/traces');
      expect(r.body.includes('palimpsest-test')).toBe(true);
      expect(r.body.includes('store.')).toBe(true);
    } finally {
      client.close();
      srv.proc.kill('SIGTERM');
      await srv.exited;
      await new Promise<void>((resolve) => collector.close(() => resolve()));
    }
  });
});
