/**
 * A Python agent's span and the server's AppendEvents span share a trace id (issue #41): the
 * Python client sends the agent's W3C traceparent (an explicit header, or a callable read at each
 * call; Debian has no OpenTelemetry Python package, so the API path is exercised only where it is
 * installed), and the server's SERVER span continues that trace as the agent span's child. A
 * client given none (and without the OpenTelemetry API) sends nothing: the server's span starts
 * its own trace.
 */
import { join } from 'node:path';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { missingPython, PYTHON, run, toolchainIt } from '../support/toolchains.js';
import { until } from '../support/e2e.js';

const SRC = join(import.meta.dirname, '..', '..', 'clients', 'python', 'src');
const spans = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] });
let t: TestServer;
beforeAll(async () => { t = await startTestServer({}, { tracerProvider: provider }); });
afterAll(async () => {
  await t?.stop();
  await provider.shutdown();
});

// The agent: its own span ids (as an agent's tracer would mint them), one append without a
// traceparent, one with the header, one with a callable.
const AGENT = `
import os, secrets
from palimpsest import events as ev
from palimpsest.client import Client

addr = os.environ["PALIMPSEST_ADDR"]
trace_id, span_a, span_b = secrets.token_hex(16), secrets.token_hex(8), secrets.token_hex(8)
with Client(addr) as plain:
    plain.create_session("py-tp")
    plain.append("py-tp", [ev.user_message("no trace context")])
with Client(addr, traceparent=f"00-{trace_id}-{span_a}-01") as c:
    c.append("py-tp", [ev.user_message("header")])
current = {"span": span_b}
with Client(addr, traceparent=lambda: f"00-{trace_id}-{current['span']}-01") as c:
    c.append("py-tp", [ev.user_message("callable")])
print(trace_id, span_a, span_b)
`;

describe('Python client: W3C traceparent', () => {
  toolchainIt('python', missingPython(['grpc', 'google.protobuf']), "the agent's trace and the server's AppendEvents span share a trace id", async () => {
    const r = await run(PYTHON, ['-c', AGENT], { env: { ...process.env, PYTHONPATH: SRC, PALIMPSEST_ADDR: t.server.address } });
    expect(r.code, r.stderr).toBe(0);
    const [traceId, spanA, spanB] = r.stdout.trim().split(' ');
    const appends = await until(() => {
      const s = spans.getFinishedSpans().filter((x) => x.name === 'palimpsest.v1.SessionService/AppendEvents');
      return s.length === 3 ? s : undefined;
    }, 'three AppendEvents spans');
    const [plain, header, callable] = appends as [ReadableSpan, ReadableSpan, ReadableSpan];
    expect(plain.parentSpanContext).toBeUndefined();
    expect(plain.spanContext().traceId).not.toBe(traceId);
    expect(header.spanContext().traceId).toBe(traceId);
    expect(header.parentSpanContext?.spanId).toBe(spanA);
    expect(callable.spanContext().traceId).toBe(traceId);
    expect(callable.parentSpanContext?.spanId).toBe(spanB);
  }, 60_000);
});
