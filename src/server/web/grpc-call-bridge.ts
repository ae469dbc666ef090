/**
 * Serves a gRPC service's handler table over Connect and gRPC-Web.
 *
 * One implementation, two transports: the SessionService handlers of handlers.ts and
 * subscribe-handlers.ts (request checks, page tokens, encoding, backpressure, heartbeats, the
 * calls into src/app) are the only implementation of every RPC. A Connect call is presented to
 * them in the shape of a grpc-js call (request, metadata with the verified tenant, write / drain /
 * cancelled / end), and their results and errors are carried back:
 *
 * - messages cross as protobuf bytes: the protobuf-es request is encoded and decoded by the same
 *   ts-proto deserializer the gRPC port uses (so a request means exactly the same thing on both
 *   ports). A response (often already encoded by the handler, once for every subscriber) is
 *   decoded into the protobuf-es type Connect writes only for JSON clients; for binary clients
 *   (browsers, buf curl, gRPC-Web) the bytes pass through untouched (`passThrough`), which keeps
 *   a 10,000-message catch-up from being decoded and re-encoded on the way;
 * - errors keep their status: the handlers' ServiceError (status-map.ts) becomes a ConnectError
 *   with the same code, message and google.rpc details (ErrorInfo reason and metadata, BadRequest,
 *   PreconditionFailure, QuotaFailure), which Connect and gRPC-Web put on the wire in their own
 *   encodings (the Connect JSON error body, the grpc-status-details-bin trailer);
 * - bidi streams (server reflection) get the requests as grpc-js 'data' events, then 'end';
 * - server streams keep backpressure: `write()` returns false once HIGH_WATER messages are waiting
 *   for Connect to pull them, and `drain` is emitted when they have been taken, so a slow browser
 *   makes the subscription fall back to catch-up exactly as a slow gRPC client does; a client
 *   that goes away (the call's abort signal) is `cancelled`;
 * - telemetry is the gRPC port's (rpc-telemetry.ts), fed here as its interceptor feeds it there:
 *   the call starts, its span continues the `traceparent` header and is the handler's active
 *   context, the first decoded request names the session, the admitted metadata the tenant, and
 *   the call ends once, with the code sent or CANCELLED when the client goes away first.
 */
import { EventEmitter } from 'node:events';
import type { Metadata, ServiceError, UntypedHandleCall } from '@grpc/grpc-js';
import { create, fromBinary, toBinary, type DescMessage, type DescMethod, type DescService, type Message } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { DomainError } from '../../domain/errors.js';
import { Status } from '../../../gen/google/rpc/status.js';
import { refusalOf } from '../safe-decode.js';
import { rpcInfo, type HeaderCarrier, type RpcRecord, type RpcTelemetry, type WebProtocol } from '../rpc-telemetry.js';
import { refusalIn } from './malformed-guard.js';

/** The OK status code (Connect's Code has none). */
const OK = 0;

/** Messages a server stream may have waiting for Connect before `write()` returns false. */
export const HIGH_WATER = 16;

/** One method of a grpc-js service definition (ts-proto's `outputServices=grpc-js`). */
interface GrpcMethod {
  readonly path: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  readonly requestDeserialize: (b: Buffer) => unknown;
  readonly responseSerialize: (v: unknown) => Buffer;
}

/** Admission of one call: the metadata the handler sees, and what to run when it ends. */
export interface Admission {
  readonly metadata: Metadata;
  release(): void;
}

/** What the bridge needs. */
export interface BridgeOptions {
  /** The protobuf-es service (gen/es). */
  readonly service: DescService;
  /** The grpc-js definition of the same service, with safe request deserializers (safe-decode.ts). */
  readonly definition: Readonly<Record<string, GrpcMethod>>;
  /** The grpc-js handlers, keyed like the definition. */
  readonly handlers: Readonly<Record<string, UntypedHandleCall>>;
  /** Connection cap and authentication; throws a DomainError to refuse the call. */
  readonly admit: (ctx: HandlerContext, method: string) => Admission;
  /** Maps anything thrown to a ServiceError (status-map.ts toServiceError). */
  readonly fail: (err: unknown) => ServiceError;
  /** The gRPC port's per-RPC telemetry (rpc-telemetry.ts): metrics, log line, span. */
  readonly telemetry: RpcTelemetry;
}

function isServiceError(e: unknown): e is Pick<ServiceError, 'code' | 'details' | 'message'> & { metadata?: Metadata } {
  return typeof e === 'object' && e !== null && !(e instanceof DomainError) && typeof (e as { code?: unknown }).code === 'number';
}

/** A handler's ServiceError (or anything else, through `fail`) as the ConnectError of the same status. */
export function toConnectError(err: unknown, fail: (err: unknown) => ServiceError): ConnectError {
  if (err instanceof ConnectError) return err;
  const se = isServiceError(err) ? err : fail(err);
  const ce = new ConnectError(se.details || se.message, se.code as number as Code);
  const bin = se.metadata?.get('grpc-status-details-bin')[0];
  if (Buffer.isBuffer(bin)) {
    for (const any of Status.decode(bin).details) {
      ce.details.push({ type: any.typeUrl.slice(any.typeUrl.lastIndexOf('/') + 1), value: any.value });
    }
  }
  return ce;
}

function decodeRequest(method: GrpcMethod, name: string, input: DescMessage, msg: Parameters<typeof toBinary>[1], rec: RpcRecord): unknown {
  // Refused by the guard (malformed-guard.ts) on the bytes the client sent.
  const marked = refusalIn(msg);
  rec.request(marked);
  if (marked !== undefined) throw marked;
  // The gRPC port's deserializer (safe-decode.ts: request bounds too) on the same message.
  const decoded = method.requestDeserialize(Buffer.from(toBinary(input, msg)));
  // What the gRPC port's telemetry sees of the request (a refusal included).
  rec.request(decoded);
  const refused = refusalOf(decoded, name);
  if (refused) throw refused;
  return decoded;
}

/**
 * A message of type `schema` that protobuf-es's toBinary writes as exactly `bytes`: no known
 * field set, and the bytes as one unknown field (the first tag, then the rest verbatim; toBinary
 * writes an unknown field as its tag followed by its data). Only for binary codecs: JSON has no
 * unknown fields.
 */
export function passThrough(schema: DescMessage, bytes: Uint8Array): Message {
  const msg = create(schema) as Message & { $unknown?: { no: number; wireType: number; data: Uint8Array }[] };
  if (bytes.length === 0) return msg;
  let tag = 0;
  let i = 0;
  for (let mul = 1; ; mul *= 128) {
    const b = bytes[i++];
    if (b === undefined || i > 5) return fromBinary(schema, bytes);
    tag += (b & 0x7f) * mul;
    if (b < 0x80) break;
  }
  msg.$unknown = [{ no: Math.floor(tag / 8), wireType: tag % 8, data: bytes.subarray(i) }];
  return msg;
}

/** The web port's protocol of a call, from its content type. */
export function webProtocolOf(ctx: HandlerContext): WebProtocol {
  const type = (ctx.requestHeader.get('content-type') ?? '').toLowerCase();
  return type.startsWith('application/grpc-web') ? 'grpc-web' : type.startsWith('application/grpc') ? 'grpc' : 'connect';
}

function headerCarrier(h: Headers): HeaderCarrier {
  return { keys: () => [...h.keys()], get: (key) => h.get(key) ?? undefined };
}

/**
 * Starts the telemetry of a call, as the gRPC port's interceptor does: its span from the request
 * headers (`traceparent`), and CANCELLED when the client goes away (or the deadline passes)
 * before the call ends. `stop` once the call is over.
 */
function recordCall(telemetry: RpcTelemetry, def: GrpcMethod, ctx: HandlerContext): { rec: RpcRecord; stop(): void } {
  const rec = telemetry.start({ ...rpcInfo(def.path, def.requestStream, def.responseStream), webProtocol: webProtocolOf(ctx) });
  rec.begin(headerCarrier(ctx.requestHeader));
  const onAbort = (): void => rec.finish(Code.Canceled, 'cancelled by the client');
  if (ctx.signal.aborted) onAbort();
  else ctx.signal.addEventListener('abort', onAbort);
  return { rec, stop: () => ctx.signal.removeEventListener('abort', onAbort) };
}

/** A failure as the ConnectError sent, recorded with its code. */
function failed(rec: RpcRecord, ce: ConnectError): ConnectError {
  rec.finish(ce.code, ce.rawMessage);
  return ce;
}

/** Whether the call's codec is binary protobuf (Connect, gRPC-Web and gRPC without `json`). */
function binaryCodec(ctx: HandlerContext): boolean {
  return !/json/i.test(ctx.requestHeader.get('content-type') ?? '');
}

function responseBytes(method: GrpcMethod, value: unknown): Uint8Array {
  return Buffer.isBuffer(value) ? value : method.responseSerialize(value);
}

/** The grpc-js server-stream call shape the stream handlers write to. */
class BridgedWritable extends EventEmitter {
  cancelled = false;
  ended = false;
  error: unknown;
  readonly queue: Uint8Array[] = [];
  blocked = false;
  #wake: (() => void) | undefined;

  constructor(readonly request: unknown, readonly metadata: Metadata, readonly path: string, readonly method: GrpcMethod, readonly deadline: number) {
    super();
    // Handlers end a stream with an error by emitting it (grpc-js's ServerWritableStream).
    this.on('error', (e: unknown) => {
      if (this.ended) return;
      this.error = e;
      this.ended = true;
      this.wake();
    });
  }

  getPath(): string {
    return this.path;
  }

  /** The call's deadline (ms since the epoch; Infinity without one), as grpc-js's getDeadline. */
  getDeadline(): number {
    return this.deadline;
  }

  write(value: unknown): boolean {
    if (this.ended || this.cancelled) return false;
    this.queue.push(responseBytes(this.method, value));
    this.wake();
    if (this.queue.length >= HIGH_WATER) this.blocked = true;
    return !this.blocked;
  }

  end(): void {
    this.ended = true;
    this.wake();
  }

  wake(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }

  waitForWork(): Promise<void> {
    return new Promise((r) => {
      this.#wake = r;
    });
  }

  cancel(): void {
    if (this.cancelled || this.ended) return;
    this.cancelled = true;
    this.emit('cancelled');
    this.wake();
  }
}

/** The Connect implementation of `service` that runs the grpc-js handlers. */
export function bridgeService(o: BridgeOptions): ServiceImpl<DescService> {
  const impl: Record<string, unknown> = {};
  for (const m of o.service.methods as readonly DescMethod[]) {
    const def = o.definition[m.localName];
    const handler = o.handlers[m.localName] as unknown as ((...args: unknown[]) => void) | undefined;
    if (def === undefined || handler === undefined) continue;
    const fail = (e: unknown): ConnectError => toConnectError(e, o.fail);
    if (m.methodKind === 'unary') {
      impl[m.localName] = async (req: Parameters<typeof toBinary>[1], ctx: HandlerContext) => {
        const { rec, stop } = recordCall(o.telemetry, def, ctx);
        let admission: Admission | undefined;
        try {
          admission = o.admit(ctx, m.name);
          rec.caller(admission.metadata);
          const request = decodeRequest(def, m.name, m.input, req, rec);
          const metadata = admission.metadata;
          const res = await rec.run(() => new Promise<unknown>((resolve, reject) => {
            handler({ request, metadata, getPath: () => def.path, cancelled: false }, (err: unknown, value: unknown) => (err ? reject(err) : resolve(value)));
          }));
          const bytes = responseBytes(def, res);
          const out = binaryCodec(ctx) ? passThrough(m.output, bytes) : fromBinary(m.output, bytes);
          rec.finish(OK, '');
          return out;
        } catch (e) {
          throw failed(rec, fail(e));
        } finally {
          stop();
          admission?.release();
        }
      };
    } else if (m.methodKind === 'server_streaming' || m.methodKind === 'bidi_streaming') {
      const bidi = m.methodKind === 'bidi_streaming';
      impl[m.localName] = async function* (reqOrReqs: Parameters<typeof toBinary>[1] | AsyncIterable<Parameters<typeof toBinary>[1]>, ctx: HandlerContext) {
        const { rec, stop } = recordCall(o.telemetry, def, ctx);
        let admission: Admission | undefined;
        let call: BridgedWritable | undefined;
        const onAbort = (): void => call?.cancel();
        try {
          admission = o.admit(ctx, m.name);
          rec.caller(admission.metadata);
          const request = bidi ? undefined : decodeRequest(def, m.name, m.input, reqOrReqs as Parameters<typeof toBinary>[1], rec);
          const timeout = ctx.timeoutMs();
          const c = new BridgedWritable(request, admission.metadata, def.path, def, timeout === undefined ? Infinity : Date.now() + timeout);
          call = c;
          ctx.signal.addEventListener('abort', onAbort);
          const binary = binaryCodec(ctx);
          rec.run(() => handler(c));
          if (bidi) {
            // Requests are handed to the handler as grpc-js 'data' events, then 'end'.
            rec.run(() => void (async () => {
              try {
                for await (const r of reqOrReqs as AsyncIterable<Parameters<typeof toBinary>[1]>) c.emit('data', decodeRequest(def, m.name, m.input, r, rec));
                c.emit('end');
              } catch (e) {
                if (e instanceof DomainError) c.emit('error', e);
                else c.cancel();
              }
            })());
          }
          for (;;) {
            while (c.queue.length > 0) {
              const bytes = c.queue.shift() as Uint8Array;
              yield binary ? passThrough(m.output, bytes) : fromBinary(m.output, bytes);
              if (c.blocked && c.queue.length === 0) {
                c.blocked = false;
                c.emit('drain');
              }
            }
            if (c.error !== undefined) throw c.error;
            if (c.ended) rec.finish(OK, '');
            if (c.ended || c.cancelled) return;
            await c.waitForWork();
          }
        } catch (e) {
          throw failed(rec, fail(e));
        } finally {
          ctx.signal.removeEventListener('abort', onAbort);
          // A consumer that stops pulling (the client went away) cancels the handler's work.
          call?.cancel();
          // Not ended by the handler (nor failed): the client went away.
          rec.finish(Code.Canceled, 'cancelled by the client');
          stop();
          admission?.release();
        }
      };
    } else if (m.methodKind === 'client_streaming') {
      impl[m.localName] = async (reqs: AsyncIterable<Parameters<typeof toBinary>[1]>, ctx: HandlerContext) => {
        const { rec, stop } = recordCall(o.telemetry, def, ctx);
        let admission: Admission | undefined;
        const call = Object.assign(new EventEmitter(), { cancelled: false, metadata: undefined as Metadata | undefined, getPath: () => def.path });
        const onAbort = (): void => {
          if (call.cancelled) return;
          call.cancelled = true;
          call.emit('cancelled');
        };
        try {
          admission = o.admit(ctx, m.name);
          rec.caller(admission.metadata);
          call.metadata = admission.metadata;
          ctx.signal.addEventListener('abort', onAbort);
          const messages = async function* (): AsyncGenerator<unknown> {
            try {
              for await (const r of reqs) yield decodeRequest(def, m.name, m.input, r, rec);
            } catch (e) {
              if (e instanceof DomainError) throw e;
              onAbort();
              throw new DomainError('CANCELLED', 'the client stream ended abnormally; nothing was stored', {});
            }
          };
          const streamCall = Object.assign(call, { [Symbol.asyncIterator]: () => messages() });
          const res = await rec.run(() => new Promise<unknown>((resolve, reject) => {
            handler(streamCall, (err: unknown, value: unknown) => (err ? reject(err) : resolve(value)));
          }));
          const bytes = responseBytes(def, res);
          const out = binaryCodec(ctx) ? passThrough(m.output, bytes) : fromBinary(m.output, bytes);
          rec.finish(OK, '');
          return out;
        } catch (e) {
          throw failed(rec, fail(e));
        } finally {
          ctx.signal.removeEventListener('abort', onAbort);
          stop();
          admission?.release();
        }
      };
    }
  }
  return impl as ServiceImpl<DescService>;
}
