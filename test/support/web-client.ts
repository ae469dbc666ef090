/**
 * Connect / gRPC-Web clients of the web port (@connectrpc/connect with the Node transports),
 * and decoding of their errors' google.rpc details.
 */
import { fromBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { SessionService } from '../../gen/es/palimpsest/v1/service_pb.js';
import { EventInputSchema, type EventInput as EsEventInput } from '../../gen/es/palimpsest/v1/event_pb.js';
import { BadRequestSchema, ErrorInfoSchema, PreconditionFailureSchema, QuotaFailureSchema } from '../../gen/es/google/rpc/error_details_pb.js';
import { EventInput, type EventInput as PbEventInput } from '../../gen/palimpsest/v1/event.js';

/** The two browser protocols, each over the HTTP version a browser would use for it. */
export const WEB_PROTOCOLS = [
  { protocol: 'connect', httpVersion: '1.1', json: false },
  { protocol: 'connect', httpVersion: '1.1', json: true },
  { protocol: 'grpcweb', httpVersion: '2', json: false },
] as const;

export type WebProtocol = (typeof WEB_PROTOCOLS)[number]['protocol'];

/** A transport to `baseUrl` speaking `protocol`, optionally sending a bearer token. */
export function webTransport(baseUrl: string, protocol: WebProtocol, httpVersion: '1.1' | '2', token?: string, nodeOptions?: object, json = false): Transport {
  const interceptors: Interceptor[] = token === undefined ? [] : [(next) => (req) => {
    req.header.set('authorization', `Bearer ${token}`);
    return next(req);
  }];
  const opts = { baseUrl, httpVersion, interceptors, useBinaryFormat: !json, ...(nodeOptions ? { nodeOptions } : {}) };
  return protocol === 'connect' ? createConnectTransport(opts) : createGrpcWebTransport(opts);
}

/** A SessionService client of the web port. */
export function webClient(baseUrl: string, protocol: WebProtocol, httpVersion: '1.1' | '2', token?: string, nodeOptions?: object, json = false): Client<typeof SessionService> {
  return createClient(SessionService, webTransport(baseUrl, protocol, httpVersion, token, nodeOptions, json));
}

/** A test EventInput (ts-proto builders in events.ts) as the protobuf-es message. */
export function esEvent(e: PbEventInput): EsEventInput {
  return fromBinary(EventInputSchema, EventInput.encode(e).finish());
}

/** What a failed web call carried. */
export interface WebError {
  readonly code: Code;
  readonly message: string;
  readonly reason: string;
  readonly domain: string;
  readonly metadata: Record<string, string>;
  readonly badRequest: number;
  readonly preconditionFailure: number;
  readonly quotaFailure: number;
}

/** Awaits a call that must fail with a ConnectError and decodes its details. */
export async function webFailure(p: Promise<unknown> | AsyncIterable<unknown>): Promise<WebError> {
  try {
    if (Symbol.asyncIterator in p) for await (const _ of p);
    else await p;
  } catch (e) {
    if (!(e instanceof ConnectError)) throw e;
    const info = e.findDetails(ErrorInfoSchema)[0];
    return {
      code: e.code, message: e.rawMessage,
      reason: info?.reason ?? '', domain: info?.domain ?? '', metadata: { ...(info?.metadata ?? {}) },
      badRequest: e.findDetails(BadRequestSchema).length,
      preconditionFailure: e.findDetails(PreconditionFailureSchema).length,
      quotaFailure: e.findDetails(QuotaFailureSchema).length,
    };
  }
  throw new Error('expected the call to fail');
}
