/**
 * Framing errors grpc-js reports with its own codes, turned into INVALID_ARGUMENT where the
 * interceptor can see them (see the README, "Hostile input", for the ones it cannot):
 *
 * - A unary or server-streaming call whose request stream holds no complete message (a missing
 *   or truncated frame) or two messages: grpc-js answers UNIMPLEMENTED ("Received no request
 *   message ..."); that status passes through the interceptor, which rewrites it.
 * - A request stream that ends inside a frame (a length prefix promising more bytes than came):
 *   grpc-js drops the partial frame silently at END_STREAM, so a client-streaming import whose
 *   last frame was cut could have been published without it. The interceptor checks the call's
 *   frame decoder at half-close and refuses the call instead.
 */
import { status as Code, type Metadata, type StatusObject } from '@grpc/grpc-js';

/** grpc-js's status shape at sendStatus (metadata may be null). */
type PartialStatusObject = Pick<StatusObject, 'code' | 'details'> & { metadata?: Metadata | null };
import { DomainError } from '../domain/errors.js';
import { domainErrorToStatus } from './status-map.js';

const GRPC_JS_MESSAGE_COUNT = /^Received (no|a second) request message for .+ method (\S+)$/;

function hasDetails(md: Metadata | null | undefined): boolean {
  return md !== null && md !== undefined && md.get('grpc-status-details-bin').length > 0;
}

/** `st` unchanged, or grpc-js's own framing status as INVALID_ARGUMENT with details. */
export function rewriteFramingStatus(st: PartialStatusObject): PartialStatusObject {
  if (st.code !== Code.UNIMPLEMENTED || hasDetails(st.metadata)) return st;
  const m = GRPC_JS_MESSAGE_COUNT.exec(st.details);
  if (!m) return st;
  const err = new DomainError('INVALID_ARGUMENT', m[1] === 'no'
    ? `the request stream of ${m[2]} ended without a complete message (missing or truncated frame); send exactly one length-prefixed message`
    : `the request stream of ${m[2]} carried more than one message; send exactly one`, { field: 'request' });
  const se = domainErrorToStatus(err);
  return { code: se.code, details: se.details, metadata: se.metadata };
}

/**
 * Whether the request stream ended inside a frame. Reads grpc-js's frame decoder
 * (`decoder.readState`: 0 = between frames) on the base call; false when that internal shape is
 * not there (another grpc-js version), so the check never refuses a good call.
 */
export function truncatedFrame(call: unknown): boolean {
  // Interceptors listed before this one (telemetry) hand it their ServerInterceptingCall, which
  // keeps the call it wraps in `nextCall`: follow that chain down to the base call.
  type Link = { decoder?: { readState?: unknown }; nextCall?: unknown } | null | undefined;
  let c = call as Link;
  for (let i = 0; i < 8 && c && c.decoder === undefined && c.nextCall !== undefined; i++) c = c.nextCall as Link;
  const decoder = c?.decoder;
  return typeof decoder?.readState === 'number' && decoder.readState !== 0;
}

/** The status for a request stream that ended inside a frame. */
export function truncatedFrameStatus(method: string): DomainError {
  return new DomainError('INVALID_ARGUMENT', `the request stream of ${method} ended inside a message (its frame is truncated); nothing was stored; resend the whole request`, { field: 'request' });
}
