/**
 * The TypeScript client propagates the caller's OpenTelemetry context (issue #41): inside an
 * active span of the agent, the server's AppendEvents span is in the same trace, child of the
 * agent's span. Without a registered propagator (no SDK configured) nothing is sent and the
 * server's span starts its own trace.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PalimpsestClient, events as ev } from '../../clients/typescript/src/index.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { until } from '../support/e2e.js';

const serverSpans = new InMemorySpanExporter();
const serverProvider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: serverSpans })] });
const agentProvider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: new InMemorySpanExporter() })] });
let t: TestServer;
let c: PalimpsestClient;

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  t = await startTestServer({}, { tracerProvider: serverProvider });
  c = new PalimpsestClient(t.server.address);
});
afterAll(async () => {
  propagation.disable();
  c.close();
  await t.stop();
  await serverProvider.shutdown();
  await agentProvider.shutdown();
});

async function appendSpan(): Promise<ReadableSpan> {
  return until(() => serverSpans.getFinishedSpans().find((s) => s.name === 'palimpsest.v1.SessionService/AppendEvents'), 'the AppendEvents span');
}

describe('TypeScript client: W3C traceparent from the active context', () => {
  it('joins the agent trace when an SDK propagator is registered, and sends nothing without one', async () => {
    await c.createSession('tp');
    const tracer = agentProvider.getTracer('agent');

    // No SDK configured: the API's propagator is a no-op.
    propagation.disable();
    serverSpans.reset();
    const lone = tracer.startSpan('agent step (no sdk)');
    await context.with(trace.setSpan(context.active(), lone), () => c.append('tp', [ev.userMessage('first')]));
    lone.end();
    const orphan = await appendSpan();
    expect(orphan.spanContext().traceId).not.toBe(lone.spanContext().traceId);
    expect(orphan.parentSpanContext).toBeUndefined();

    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    serverSpans.reset();
    const step = tracer.startSpan('agent step');
    await context.with(trace.setSpan(context.active(), step), () => c.append('tp', [ev.userMessage('second')]));
    step.end();
    const joined = await appendSpan();
    expect(joined.spanContext().traceId).toBe(step.spanContext().traceId);
    expect(joined.parentSpanContext?.spanId).toBe(step.spanContext().spanId);
  });
});
