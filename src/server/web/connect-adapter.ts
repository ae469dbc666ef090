/**
 * The web port's adapter: a handler table (src/server/rpc) as a Connect service implementation,
 * served over the Connect protocol, gRPC-Web and gRPC by connect-node. The handlers are the same
 * functions the gRPC port's adapter (src/server/grpc) runs: no second copy of any rule.
 *
 * - Requests are decoded once, by the gRPC port's ts-proto deserializer (safe-decode.ts: request
 *   bounds too) applied to the bytes protobuf-es received, so a request means exactly the same
 *   thing on both ports. A response (often already encoded by the handler, once for every
 *   subscriber) is decoded into the protobuf-es type only for JSON clients; for binary clients
 *   (browsers, buf curl, gRPC-Web, gRPC) the bytes pass through untouched (`passThrough`).
 * - Errors keep their status: the one reason -> status table (status-map.ts) gives the code,
 *   message and google.rpc details, which become the ConnectError Connect and gRPC-Web put on
 *   the wire in their own encodings.
 * - Server streams are a push sink over a bounded queue: `write()` returns false once HIGH_WATER
 *   messages wait for Connect to pull them, and the drain callback runs when they have been
 *   taken, so a slow browser makes a subscription fall back to catch-up exactly as a slow gRPC
 *   client does; the call's abort signal is the handler's cancellation.
 * - Admission and telemetry are the gRPC port's (auth.ts admitCall, rpc-telemetry.ts), entered
 *   once per call here as the interceptors enter them there.
 */
import type { Metadata, ServiceError } from '@grpc/grpc-js';
import { create, fromBinary, toBinary, type DescMessage, type DescMethod, type DescService, type Message } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { DomainError } from '../../domain/errors.js';
import { Status } from '../../../gen/google/rpc/status.js';
import { refusalOf } from '../safe-decode.js';
import { rpcInfo, type HeaderCarrier, type RpcRecord, type RpcTelemetry, type WebProtocol } from '../rpc-telemetry.js';
import { refusalIn } from './malformed-guard.js';
import { CREDENTIAL_KEY } from '../auth.js';
import type { ContextResolver } from '../permissions.js';
import type { HandlerTable, MethodImpl, RpcContext, ServerSink } from '../rpc/handler-table.js';

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

/** Admission of one call: the verified caller's headers, and what to run when it ends. */
export interface Admission {
  /** The tenant and token hash admission verified (auth.ts TENANT_KEY, CREDENTIAL_KEY), nothing client-sent. */
  readonly verified: ReadonlyMap<string, string>;
  release(): void;
}

/** What the adapter needs. */
export interface AdapterOptions {
  /** The protobuf-es service (gen/es). */
  readonly service: DescService;
  /** The grpc-js definition of the same service, with safe request deserializers (safe-decode.ts). */
  readonly definition: Readonly<Record<string, GrpcMethod>>;
  /** The service's handler table, keyed like the definition. */
  readonly handlers: HandlerTable;
  /** The caller resolver both ports use. */
  readonly resolve: ContextResolver;
  /** Connection cap and authentication; throws a DomainError to refuse the call. */
  readonly admit: (ctx: HandlerContext, method: string) => Admission;
  /** Maps anything thrown to a ServiceError (status-map.ts toServiceError). */
  readonly fail: (err: unknown) => ServiceError;
  /** The gRPC port's per-RPC telemetry (rpc-telemetry.ts): metrics, log line, span. */
  readonly telemetry: RpcTelemetry;
}

function isServiceError(e: unknown): e is Pick<ServiceError, 'code' | 'details' | 'message'> & { metadata?: Metadata } {
  return typeof e === 'object' && e !== null && !(e instanceof DomainError) && typeof (e as { code?: unknown }).code === 'number'
    && typeof (e as { details?: unknown }).details === 'string';
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

/** The RpcContext of a Connect call. */
class ConnectCallContext implements RpcContext {
  constructor(private readonly hctx: HandlerContext, readonly caller: RpcContext['caller'], readonly credential: string, readonly deadline: number) {}

  get cancelled(): boolean {
    return this.hctx.signal.aborted;
  }

  onCancel(fn: () => void): void {
    if (this.hctx.signal.aborted) fn();
    else this.hctx.signal.addEventListener('abort', fn, { once: true });
  }
}

/** The push sink of a Connect server stream: a bounded queue the response generator drains. */
class QueueSink implements ServerSink<unknown> {
  readonly queue: Uint8Array[] = [];
  ended = false;
  error: unknown;
  #blocked = false;
  #drain: Array<() => void> | undefined;
  #wake: (() => void) | undefined;

  constructor(private readonly method: GrpcMethod) {}

  write(message: unknown): boolean {
    if (this.ended) return false;
    this.queue.push(responseBytes(this.method, message));
    this.#wakeUp();
    if (this.queue.length >= HIGH_WATER) this.#blocked = true;
    return !this.#blocked;
  }

  onDrain(fn: () => void): void {
    (this.#drain ??= []).push(fn);
  }

  end(err?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.error = err;
    this.#wakeUp();
  }

  /** The generator took a message; past the high-water mark, a drained queue wakes the writer. */
  taken(): void {
    if (this.#blocked && this.queue.length === 0) {
      this.#blocked = false;
      const fns = this.#drain;
      this.#drain = undefined;
      if (fns) for (const fn of fns) fn();
    }
  }

  waitForWork(): Promise<void> {
    return new Promise((r) => {
      this.#wake = r;
    });
  }

  #wakeUp(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }
}

type Wire = Parameters<typeof toBinary>[1];

/** The Connect implementation of a service's handler table. */
export function connectService(o: AdapterOptions): ServiceImpl<DescService> {
  const impl: Record<string, unknown> = {};
  for (const m of o.service.methods as readonly DescMethod[]) {
    const def = o.definition[m.localName];
    const method: MethodImpl | undefined = o.handlers[m.localName];
    if (def === undefined || method === undefined) continue;
    const fail = (e: unknown): ConnectError => toConnectError(e, o.fail);
    /** The handler's context of an admitted call (its caller resolved as on the gRPC port). */
    const contextOf = (hctx: HandlerContext, admission: Admission, rec: RpcRecord): RpcContext => {
      const verified = admission.verified;
      // Only what admission verified answers for x-palimpsest-* (never a client-sent header).
      const header = (name: string): string | undefined => verified.get(name) ?? (name.startsWith('x-palimpsest-') ? undefined : hctx.requestHeader.get(name) ?? undefined);
      rec.caller({ keys: () => [...verified.keys()], get: (k) => verified.get(k) });
      const caller = o.resolve({ path: def.path, header }, method.access);
      const timeout = hctx.timeoutMs();
      return new ConnectCallContext(hctx, caller, verified.get(CREDENTIAL_KEY) ?? '', timeout === undefined ? Infinity : Date.now() + timeout);
    };
    const respond = (hctx: HandlerContext, res: unknown): Message => {
      const bytes = responseBytes(def, res);
      return binaryCodec(hctx) ? passThrough(m.output, bytes) : fromBinary(m.output, bytes);
    };
    if (method.shape === 'unary' || method.shape === 'client-stream') {
      impl[m.localName] = async (reqOrReqs: Wire | AsyncIterable<Wire>, hctx: HandlerContext) => {
        const { rec, stop } = recordCall(o.telemetry, def, hctx);
        let admission: Admission | undefined;
        try {
          admission = o.admit(hctx, m.name);
          const ctx = contextOf(hctx, admission, rec);
          let res: unknown;
          if (method.shape === 'unary') {
            const request = decodeRequest(def, m.name, m.input, reqOrReqs as Wire, rec);
            res = await rec.run(() => method.handle(ctx, request));
          } else {
            const requests = async function* (): AsyncGenerator<unknown> {
              try {
                for await (const r of reqOrReqs as AsyncIterable<Wire>) yield decodeRequest(def, m.name, m.input, r, rec);
              } catch (e) {
                // A refusal (ours, or Connect's: a message over the size limit) keeps its status.
                if (e instanceof DomainError || e instanceof ConnectError) throw e;
                throw new DomainError('CANCELLED', 'the client stream ended abnormally; nothing was stored', {});
              }
              if (hctx.signal.aborted) throw new DomainError('CANCELLED', 'the client cancelled the upload; nothing was stored', {});
            };
            res = await rec.run(() => method.handle(ctx, requests()));
          }
          const out = respond(hctx, res);
          rec.finish(OK, '');
          return out;
        } catch (e) {
          throw failed(rec, fail(e));
        } finally {
          stop();
          admission?.release();
        }
      };
    } else {
      impl[m.localName] = async function* (reqOrReqs: Wire | AsyncIterable<Wire>, hctx: HandlerContext) {
        const { rec, stop } = recordCall(o.telemetry, def, hctx);
        let admission: Admission | undefined;
        const sink = new QueueSink(def);
        // The client went away or the deadline passed: Connect's reason (DEADLINE_EXCEEDED or
        // CANCELED) is the stream's status, never OK.
        const onAbort = (): void => sink.end(hctx.signal.reason ?? new DomainError('CANCELLED', 'cancelled by the client', {}));
        try {
          admission = o.admit(hctx, m.name);
          const ctx = contextOf(hctx, admission, rec);
          if (hctx.signal.aborted) onAbort();
          else hctx.signal.addEventListener('abort', onAbort);
          if (method.shape === 'server-stream') {
            const request = decodeRequest(def, m.name, m.input, reqOrReqs as Wire, rec);
            rec.run(() => method.handle(ctx, request, sink));
          } else {
            const requests = async function* (): AsyncGenerator<unknown> {
              for await (const r of reqOrReqs as AsyncIterable<Wire>) yield decodeRequest(def, m.name, m.input, r, rec);
            };
            rec.run(() => method.handle(ctx, requests(), sink));
          }
          const binary = binaryCodec(hctx);
          for (;;) {
            while (sink.queue.length > 0) {
              const bytes = sink.queue.shift() as Uint8Array;
              yield binary ? passThrough(m.output, bytes) : fromBinary(m.output, bytes);
              sink.taken();
            }
            if (sink.ended) {
              if (sink.error !== undefined) throw sink.error;
              if (!hctx.signal.aborted) rec.finish(OK, '');
              return;
            }
            await sink.waitForWork();
          }
        } catch (e) {
          throw failed(rec, fail(e));
        } finally {
          hctx.signal.removeEventListener('abort', onAbort);
          // A consumer that stops pulling (the client went away) ends the handler's stream.
          sink.end();
          // Not ended by the handler (nor failed): the client went away.
          rec.finish(Code.Canceled, 'cancelled by the client');
          stop();
          admission?.release();
        }
      };
    }
  }
  return impl as ServiceImpl<DescService>;
}
