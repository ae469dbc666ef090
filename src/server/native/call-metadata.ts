/**
 * Request headers as the grpc-js `Metadata` the handlers read, and a status's metadata as
 * trailers, with grpc-js's own conversions (Metadata.fromHttp2Headers / toHttp2Headers: `-bin`
 * values base64, custom `-bin` values split at commas), so a handler sees exactly what it sees on
 * the grpc-js transport. Built only when something reads it (call.metadata): an unauthenticated
 * AppendEvents never does.
 */
import type { IncomingHttpHeaders } from 'node:http2';
import { Metadata } from '@grpc/grpc-js';
import { setCaller, type TokenEntry } from '../auth.js';
import type { HeaderCarrier } from '../rpc-telemetry.js';

/** Headers of the transport, never metadata (grpc-js removes the same ones). */
const TRANSPORT_HEADERS = new Set(['grpc-timeout', 'grpc-encoding', 'grpc-accept-encoding', 'accept-encoding', 'te', 'content-type', 'connection', 'host', 'http2-settings', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/**
 * The metadata of a call's request headers: pseudo-headers and transport headers left out, every
 * client-sent `x-palimpsest-*` key dropped (only the verified caller is put there, as the grpc-js
 * interceptor does), then the caller (tenant and token hash) when one was verified.
 */
export function requestMetadata(headers: IncomingHttpHeaders, caller: TokenEntry | undefined): Metadata {
  const picked: IncomingHttpHeaders = {};
  for (const key of Object.keys(headers)) {
    if (key.charCodeAt(0) === 0x3a || TRANSPORT_HEADERS.has(key) || key.startsWith('x-palimpsest-')) continue;
    picked[key] = headers[key];
  }
  const md = Metadata.fromHttp2Headers(picked);
  if (caller) setCaller(md, caller);
  return md;
}

/** The request headers as the trace propagator reads them (`traceparent`, `tracestate`). */
export class HeadersCarrier implements HeaderCarrier {
  constructor(private readonly headers: IncomingHttpHeaders) {}

  keys(): string[] {
    return Object.keys(this.headers);
  }

  get(key: string): string | string[] | undefined {
    return this.headers[key];
  }
}
