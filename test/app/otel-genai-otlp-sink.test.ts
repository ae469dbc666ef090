/**
 * The live export's sink (the SDK's OTLP/HTTP exporter fed ReadableSpans built from the log) and
 * the file export's encoder (otlp-json.ts) put the same spans on the wire: for a reference session
 * with tool calls, content included (structured kvlists), an OTLP/HTTP receiver decodes the same
 * ids, names, kinds, times, statuses and attributes from both.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJsonl } from '../../src/domain/jsonl-reader.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { sessionToGenAiSpans } from '../../src/app/otel-genai.js';
import { GENAI_SCHEMA_URL } from '../../src/app/otel-genai-conventions.js';
import { otlpTraceRequest } from '../../src/app/otlp-json.js';
import { otlpSpanSink } from '../../src/app/otel-genai-otlp-sink.js';
import { postTraces, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';

let receiver: OtlpReceiver;
beforeAll(async () => { receiver = await startOtlpReceiver(); });
afterAll(async () => { await receiver.close(); });

const comparable = (s: ReceivedSpan): unknown => ({
  traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId, name: s.name, kind: s.kind,
  start: s.startTimeUnixNano, end: s.endTimeUnixNano, attributes: s.attributes, status: s.status, scope: s.scope, schemaUrl: s.schemaUrl,
});

describe('OTLP sink of the live export', () => {
  it('sends what the file export writes', async () => {
    const file = new URL('../fixtures/reference-sessions/cordis-tool-round.jsonl', import.meta.url);
    const { header, events } = decodeJsonl(readFileSync(file, 'utf8'));
    const spans = sessionToGenAiSpans(header.id, events as unknown as SessionEvent[], { content: true });

    expect(await postTraces(receiver.endpoint, JSON.stringify(otlpTraceRequest(spans, { scopeVersion: 'test' })))).toBe(200);
    const viaFile = receiver.spans.splice(0);

    const saved = process.env['OTEL_EXPORTER_OTLP_ENDPOINT'];
    process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = receiver.endpoint;
    try {
      const sink = await otlpSpanSink({}, 'test');
      await sink.export(spans);
      await sink.shutdown();
    } finally {
      if (saved === undefined) delete process.env['OTEL_EXPORTER_OTLP_ENDPOINT'];
      else process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = saved;
    }
    const viaSink = receiver.spans.splice(0);
    expect(viaSink.length).toBe(spans.length);
    expect(viaSink[0]?.schemaUrl).toBe(GENAI_SCHEMA_URL);
    expect(viaSink.map(comparable)).toEqual(viaFile.map(comparable));
    expect(viaSink.some((s) => Array.isArray(s.attributes['gen_ai.output.messages']))).toBe(true);
  });
});
