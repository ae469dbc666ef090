/**
 * The gRPC port's one server interceptor: per-RPC telemetry (rpc-telemetry.ts) around admission
 * (auth.ts: the per-connection call cap, the bearer token and the method's permission, stripping
 * client-sent `x-palimpsest-*` metadata, INVALID_ARGUMENT for request bytes that do not decode and
 * for a request stream that ends inside a frame).
 *
 * Both used to be two grpc-js `ServerInterceptingCall`s. Each such layer allocates per call a
 * responder and a listener wrapper, a closure per event and a fresh Metadata before the first
 * response message, and queues events for listeners that may answer later: about 4 us of the
 * event loop per unary call for each layer, a quarter of what a single-event AppendEvents costs
 * beyond a bare grpc-js echo (bench/server/percall.ts). Our steps are synchronous, so one object
 * implementing grpc-js's `ServerInterceptingCallInterface` (its public interceptor contract) does
 * both in the same order: telemetry sees every event first and every status last (after the
 * framing rewrite), so admission's refusals are counted and logged as before.
 */
import { ServerInterceptingCall, status as Code, type Metadata, type ServerInterceptingCallInterface, type ServerInterceptor } from '@grpc/grpc-js';
import type { DomainError } from '../../domain/errors.js';
import { admitCall, isPublicPath, setCaller, type StreamLimiter, type TokenRegistry } from '../auth.js';
import { rewriteFramingStatus, truncatedFrame, truncatedFrameStatus } from '../framing.js';
import { refusalOf } from '../safe-decode.js';
import { domainErrorToStatus } from '../status-map.js';
import { metadataHeaders, rpcInfo, type RpcRecord, type RpcTelemetry } from '../rpc-telemetry.js';

type Call = ServerInterceptingCallInterface;
/** grpc-js's listener of a call's inbound events (not exported by name). */
type InterceptingServerListener = Parameters<Call['start']>[0];
type PartialStatusObject = Parameters<Call['sendStatus']>[0];

/** What every call of one server shares. */
interface AdmissionConfig {
  readonly telemetry: RpcTelemetry;
  readonly registry: TokenRegistry | undefined;
  readonly limiter: StreamLimiter;
}

/**
 * One call: the listener of the call it wraps (grpc-js's base call) and the call the handler sees.
 * Events after a refusal or a cancel do not reach the handler. A ServerInterceptingCall (what
 * grpc-js's interceptor type returns) whose four steps are overridden: its getters (deadline,
 * peer, connection info) pass to the wrapped call, which it keeps as `nextCall` (framing.ts's
 * truncatedFrame follows that field down to the base call's frame decoder).
 */
class AdmissionCall extends ServerInterceptingCall implements InterceptingServerListener {
  #listener: InterceptingServerListener | undefined;
  #release: (() => void) | undefined;
  /** Admission refused the call (its status is sent): nothing more reaches the handler. */
  #refused = false;
  #cancelled = false;

  readonly #next: Call;

  constructor(
    next: Call,
    private readonly config: AdmissionConfig,
    private readonly rec: RpcRecord,
    private readonly name: string,
    private readonly isPublic: boolean,
  ) {
    super(next);
    this.#next = next;
  }

  // ------------------------------------------------------------------ inbound (grpc-js -> handler)

  override start(listener: InterceptingServerListener): void {
    this.#listener = listener;
    this.#next.start(this);
  }

  onReceiveMetadata(md: Metadata): void {
    if (this.#cancelled) return;
    const headers = metadataHeaders(md);
    this.rec.caller(headers);
    this.rec.begin(headers);
    this.rec.run(() => this.#admit(md));
  }

  #admit(md: Metadata): void {
    for (const key of Object.keys(md.getMap())) if (key.startsWith('x-palimpsest-')) md.remove(key);
    const header = md.get('authorization')[0];
    const info = this.#next.getConnectionInfo();
    const connection = `${info.remoteAddress ?? '?'}:${info.remotePort ?? '?'}`;
    try {
      const admitted = admitCall(this.config.limiter, this.config.registry, connection, this.name, this.isPublic, typeof header === 'string' ? header : undefined);
      this.#release = admitted.release;
      if (admitted.caller) setCaller(md, admitted.caller);
    } catch (e) {
      this.#refuse(e as DomainError);
      return;
    }
    this.#listener!.onReceiveMetadata(md);
  }

  onReceiveMessage(msg: unknown): void {
    if (this.#cancelled) return;
    this.rec.request(msg);
    if (this.#refused) return;
    this.rec.run(() => {
      const refused = refusalOf(msg, this.name);
      if (refused) this.#refuse(refused);
      else this.#listener!.onReceiveMessage(msg);
    });
  }

  onReceiveHalfClose(): void {
    if (this.#cancelled || this.#refused) return;
    this.rec.run(() => {
      // grpc-js drops a partial last frame silently: refuse the call instead (framing.ts).
      if (truncatedFrame(this.#next)) this.#refuse(truncatedFrameStatus(this.name));
      else this.#listener!.onReceiveHalfClose();
    });
  }

  onCancel(): void {
    if (this.#cancelled) return;
    this.#cancelled = true;
    this.rec.finish(Code.CANCELLED, 'cancelled by the client');
    this.#release?.();
    this.#listener?.onCancel();
  }

  #refuse(err: DomainError): void {
    this.#refused = true;
    const se = domainErrorToStatus(err);
    this.sendStatus({ code: se.code, details: se.details, metadata: se.metadata });
  }

  // ------------------------------------------------------------------ outbound (handler -> grpc-js)

  override sendMetadata(metadata: Metadata): void {
    this.#next.sendMetadata(metadata);
  }

  override sendMessage(message: unknown, callback: () => void): void {
    this.#next.sendMessage(message, callback);
  }

  override sendStatus(status: PartialStatusObject): void {
    this.#release?.();
    const st = rewriteFramingStatus(status);
    this.rec.finish(st.code, st.details ?? '');
    this.#next.sendStatus(st);
  }
}

/**
 * The server's interceptor (the only one: pass it alone in the Server's `interceptors`): telemetry
 * around admission, per call. Without `registry` every call is admitted anonymously (auth off);
 * health and reflection are public either way.
 */
export function makeServerInterceptor(telemetry: RpcTelemetry, registry: TokenRegistry | undefined, limiter: StreamLimiter): ServerInterceptor {
  const config: AdmissionConfig = { telemetry, registry, limiter };
  return (method, call) => {
    const path = method.path;
    const rec = telemetry.start(rpcInfo(path, method.requestStream, method.responseStream));
    return new AdmissionCall(call, config, rec, path.slice(path.lastIndexOf('/') + 1), isPublicPath(path));
  };
}
