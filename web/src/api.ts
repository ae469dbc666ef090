/**
 * The viewer's client of the web port: Connect protocol (binary) over fetch, same origin, with
 * the tab's bearer token (sessionStorage: never persisted beyond the tab) when one is set.
 */
import { Code, ConnectError, createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-web';
import { SessionService } from '../../gen/es/palimpsest/v1/service_pb.js';
import { ErrorInfoSchema } from '../../gen/es/google/rpc/error_details_pb.js';

const TOKEN_KEY = 'palimpsest.token';

/** The tab's token ('' = none). */
export function token(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? '';
}

/** Sets (or with '' forgets) the tab's token. */
export function setToken(t: string): void {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

const auth: Interceptor = (next) => (req) => {
  const t = token();
  if (t) req.header.set('authorization', `Bearer ${t}`);
  return next(req);
};

/** The SessionService client. */
export const api: Client<typeof SessionService> = createClient(SessionService, createConnectTransport({
  baseUrl: location.origin,
  useBinaryFormat: true,
  interceptors: [auth],
}));

/** A failure as shown to people: code name, reason and the server's message. */
export interface Failure {
  readonly code: string;
  readonly reason: string;
  readonly message: string;
  readonly metadata: Record<string, string>;
}

/** Decodes any error (the ErrorInfo reason of a ConnectError, or what a network error says). */
export function failure(e: unknown): Failure {
  const ce = ConnectError.from(e);
  const info = ce.findDetails(ErrorInfoSchema)[0];
  return {
    code: Code[ce.code] ?? String(ce.code),
    reason: info?.reason ?? '',
    message: ce.rawMessage,
    metadata: { ...(info?.metadata ?? {}) },
  };
}

/** True for errors that a retry cannot fix (the stream should not resume). */
export function isPermanent(e: unknown): boolean {
  const c = ConnectError.from(e).code;
  return c === Code.NotFound || c === Code.Unauthenticated || c === Code.PermissionDenied || c === Code.InvalidArgument || c === Code.OutOfRange;
}

/** True when the call was cancelled by us. */
export function isCancel(e: unknown): boolean {
  return ConnectError.from(e).code === Code.Canceled;
}
