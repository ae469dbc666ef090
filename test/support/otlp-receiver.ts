/**
 * An OTLP/HTTP trace receiver for tests: a node:http server on 127.0.0.1 that accepts
 * `POST /v1/traces` with an OTLP/JSON `ExportTraceServiceRequest` (what
 * @opentelemetry/exporter-trace-otlp-http sends) and keeps every span it decoded. Protobuf bodies
 * are answered 415: the exporters under test send JSON, and a test would notice one that does not.
 */
import { createServer, type Server } from 'node:http';

/** An OTLP/JSON AnyValue as received. */
export type AnyValue = {
  stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number;
  arrayValue?: { values?: AnyValue[] }; kvlistValue?: { values?: { key: string; value: AnyValue }[] };
};

/** One received span with its attributes decoded to plain values. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: number;
  readonly startTimeUnixNano: bigint;
  readonly endTimeUnixNano: bigint;
  readonly attributes: Record<string, unknown>;
  readonly status: { code: number; message?: string };
  readonly scope: string;
  readonly schemaUrl: string | undefined;
  readonly resource: Record<string, unknown>;
}

/** Decodes an AnyValue to a plain value (ints as numbers, kvlists as objects). */
export function anyValue(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(anyValue);
  if (v.kvlistValue !== undefined) return Object.fromEntries((v.kvlistValue.values ?? []).map((kv) => [kv.key, anyValue(kv.value)]));
  return null;
}

const attrs = (list: { key: string; value: AnyValue }[] | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, anyValue(kv.value)]));

interface JsonSpan {
  traceId: string; spanId: string; parentSpanId?: string; name: string; kind?: number;
  startTimeUnixNano: string | number; endTimeUnixNano: string | number;
  attributes?: { key: string; value: AnyValue }[]; status?: { code?: number; message?: string };
}

interface JsonRequest {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: AnyValue }[] };
    scopeSpans?: { scope?: { name?: string }; schemaUrl?: string; spans?: JsonSpan[] }[];
  }[];
}

/** Flattens an ExportTraceServiceRequest (JSON) to spans. */
export function decodeTraceRequest(body: JsonRequest): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId === '' ? undefined : s.parentSpanId,
          name: s.name, kind: s.kind ?? 0,
          startTimeUnixNano: BigInt(s.startTimeUnixNano), endTimeUnixNano: BigInt(s.endTimeUnixNano),
          attributes: attrs(s.attributes), status: { code: s.status?.code ?? 0, ...(s.status?.message ? { message: s.status.message } : {}) },
          scope: ss.scope?.name ?? '', schemaUrl: ss.schemaUrl, resource,
        });
      }
    }
  }
  return out;
}

/** A running receiver. */
export interface OtlpReceiver {
  /** The OTLP/HTTP base endpoint (OTEL_EXPORTER_OTLP_ENDPOINT). */
  readonly endpoint: string;
  /** Every span received so far, in arrival order. */
  readonly spans: ReceivedSpan[];
  /** Number of export requests accepted. */
  requests(): number;
  /** Number of export requests answered 503 by {@link OtlpReceiver.failNext}. */
  refused(): number;
  /** Answer the next `n` requests with HTTP 503 (an unavailable collector). */
  failNext(n: number): void;
  close(): Promise<void>;
}

/** Starts a receiver on an ephemeral loopback port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  let requests = 0;
  let failing = 0;
  let refused = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
        res.writeHead(415).end();
        return;
      }
      if (failing > 0) {
        failing--;
        refused++;
        res.writeHead(503).end();
        return;
      }
      try {
        spans.push(...decodeTraceRequest(JSON.parse(Buffer.concat(chunks).toString('utf8')) as JsonRequest));
      } catch {
        res.writeHead(400).end();
        return;
      }
      requests++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    requests: () => requests,
    refused: () => refused,
    failNext: (n) => { failing = n; },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/** POSTs an OTLP/JSON body to a receiver as an OTLP/HTTP client does; resolves with the status. */
export async function postTraces(endpoint: string, body: string): Promise<number> {
  const res = await fetch(`${endpoint}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  await res.arrayBuffer();
  return res.status;
}
