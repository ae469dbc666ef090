/**
 * The one table from domain/app reasons to gRPC status codes, and the encoding of
 * google.rpc.Status details (ErrorInfo + BadRequest / PreconditionFailure / QuotaFailure)
 * into `grpc-status-details-bin`. Unexpected errors become INTERNAL with a fixed message.
 */
import { Metadata, status as Code, type ServiceError } from '@grpc/grpc-js';
import { DomainError } from '../domain/errors.js';
import { StoreClosedError, StoreUnavailableError } from '../store/store-errors.js';
import { DataCorruptedError, StorageError } from '../app/storage-error.js';
import { Any } from '../../gen/google/protobuf/any.js';
import { BadRequest, ErrorInfo, PreconditionFailure, QuotaFailure } from '../../gen/google/rpc/error_details.js';
import { Status } from '../../gen/google/rpc/status.js';

/** ErrorInfo.domain of every Palimpsest error. */
export const ERROR_DOMAIN = 'palimpsest.dev';

/** The fixed client-facing message of unexpected errors. */
export const INTERNAL_MESSAGE = 'internal error; the server logged the cause';

/**
 * Bounds on what an error sends back (defence in depth behind request-checks.ts): the message
 * goes out three times (grpc-message, Status.message, the detail's description) and the trailers
 * must stay well below the 8 KiB metadata limit of gRPC C-core clients and far below the 64 KiB
 * header list of Node's HTTP/2 (a trailer block over it wedged the client's connection).
 */
const MAX_MESSAGE_BYTES = 1024;
const MAX_METADATA_VALUE_BYTES = 256;

/** `s` cut to at most `max` UTF-8 bytes (at a character boundary, marked with "…"). */
export function clip(s: string, max: number): string {
  if (s.length * 3 <= max || Buffer.byteLength(s) <= max) return s;
  // Whole code points up to max - 3 bytes, then "…" (3 bytes).
  let bytes = 0;
  let end = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    const n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    if (bytes + n > max - 3) break;
    bytes += n;
    end += ch.length;
  }
  return `${s.slice(0, end)}…`;
}

function clipMetadata(md: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(md)) out[clip(k, 64)] = clip(v, MAX_METADATA_VALUE_BYTES);
  return out;
}

/** Which google.rpc detail accompanies the ErrorInfo. */
type Detail = 'bad-request' | 'precondition' | 'quota' | 'none';

interface Mapping {
  readonly code: Code;
  readonly detail: Detail;
}

const invalid: Mapping = { code: Code.INVALID_ARGUMENT, detail: 'bad-request' };
const precondition: Mapping = { code: Code.FAILED_PRECONDITION, detail: 'precondition' };
const exhausted: Mapping = { code: Code.RESOURCE_EXHAUSTED, detail: 'quota' };

/**
 * Reason -> status. Validation reasons are the rule IDs of dsh-semantics 0.2: malformed
 * envelopes, markers and citations are INVALID_ARGUMENT; rules that depend on the session's
 * state are FAILED_PRECONDITION (re-reading the session is the fix).
 */
const TABLE: Readonly<Record<string, Mapping>> = {
  // dsh-semantics 0.2, envelope and citations: the request is wrong whatever the state.
  ENVELOPE_INVALID: invalid,
  NOT_JSON: invalid,
  LEGACY_VOCABULARY: invalid,
  REQUEST_HEADER_SHAPE: invalid,
  MESSAGE_SHAPE: invalid,
  TURN_SHAPE: invalid,
  SURFACE_OP_FORBIDDEN: invalid,
  SOURCES_FORBIDDEN: invalid,
  SURFACE_OP_REQUIRED: invalid,
  SURFACE_OP_INVALID: invalid,
  REPLACE_OP_INVALID: invalid,
  SOURCES_NOT_ARRAY: invalid,
  SOURCES_EMPTY: invalid,
  SOURCES_NOT_SEQ: invalid,
  SOURCES_DUPLICATE: invalid,
  SOURCES_NOT_EARLIER: invalid,
  REPLACE_SOURCES_INCOMPLETE: invalid,
  TOOL_RESULT_REPLACE_NOT_SINGLE: invalid,
  TOOL_RESULT_REPLACE_NON_CONTENT: invalid,
  // dsh-semantics 0.2, state-dependent.
  SEQ_NOT_CONTIGUOUS: precondition,
  REPLACE_START_NOT_ON_SURFACE: precondition,
  REPLACE_END_NOT_ON_SURFACE: precondition,
  REPLACE_START_AFTER_END: precondition,
  TOOL_RESULT_REPLACE_WRONG_TARGET: precondition,
  // Issue #14: provider-safe surfaces.
  TOOL_PAIRING_BROKEN: precondition,
  TOOL_RESULT_ORPHANED: precondition,
  TOOL_RESULT_MISSING: precondition,
  HISTORY_NOT_RENDERABLE: precondition,
  FORMAT_NEEDS_MODEL_HISTORY: invalid,
  FORMAT_UNSPECIFIED: invalid,
  IMPORT_MESSAGES_INVALID: invalid,
  COMPACTION_BLOCKED: precondition,
  NOTHING_TO_COMPACT: precondition,
  COMPACTION_RANGE_INVALID: precondition,
  PRUNE_TARGET_INVALID: precondition,
  AS_OF_SEQ_AFTER_HEAD: { code: Code.OUT_OF_RANGE, detail: 'none' },
  // Service reasons.
  SESSION_NOT_FOUND: { code: Code.NOT_FOUND, detail: 'none' },
  // Issue #39: blobs. A missing blob (or another tenant's) is NOT_FOUND, like a missing session.
  BLOB_NOT_FOUND: { code: Code.NOT_FOUND, detail: 'none' },
  BLOB_REF_INVALID: invalid,
  BLOB_DIGEST_INVALID: invalid,
  BLOB_OFFSET_OUT_OF_RANGE: { code: Code.OUT_OF_RANGE, detail: 'none' },
  SESSION_ALREADY_EXISTS: { code: Code.ALREADY_EXISTS, detail: 'none' },
  INVALID_SESSION_ID: invalid,
  FIELD_TOO_LONG: invalid,
  INVALID_UTF8: invalid,
  TOO_MANY_LABELS: exhausted,
  HEADER_INVALID: invalid,
  INVALID_ARGUMENT: invalid,
  INVALID_PAGE_TOKEN: invalid,
  // SearchEvents (issue #40): a query the parser refuses (metadata position), a bad filter.
  SEARCH_QUERY_INVALID: invalid,
  SEARCH_REQUEST_INVALID: invalid,
  // A server started with --search-index off keeps no index.
  SEARCH_INDEX_OFF: precondition,
  // Its index could not be opened at start (no damage: a lock, a read-only directory, a full disk).
  SEARCH_INDEX_UNAVAILABLE: precondition,
  PAGE_TOKEN_STALE: precondition,
  PAGE_SIZE_TOO_LARGE: invalid,
  VIEW_UNSPECIFIED: invalid,
  BATCH_EMPTY: invalid,
  DATA_TOO_DEEP: invalid,
  HEAD_MISMATCH: precondition,
  IDEMPOTENCY_KEY_REUSED: precondition,
  INVALID_BOUNDARY: invalid,
  OPEN_TURN: precondition,
  JSONL_INVALID: invalid,
  JSONL_COMPRESSED_UNSUPPORTED: invalid,
  FORMAT_VERSION_UNSUPPORTED: precondition,
  BATCH_TOO_LARGE: exhausted,
  EVENT_TOO_LARGE: exhausted,
  MESSAGE_TOO_LARGE: exhausted,
  RESOURCE_LIMIT: exhausted,
  QUOTA_EXCEEDED: exhausted,
  TOO_MANY_STREAMS: exhausted,
  CURSOR_OUT_OF_RANGE: { code: Code.OUT_OF_RANGE, detail: 'none' },
  // SubscribeSessions after a position feed retention pruned (issue #35): relist, subscribe from_now.
  FEED_POSITION_EXPIRED: { code: Code.OUT_OF_RANGE, detail: 'none' },
  CONFLICT_RETRIES_EXHAUSTED: { code: Code.ABORTED, detail: 'none' },
  // UpdateSession with a stale expected_version (issue #35): read the session again and retry.
  METADATA_VERSION_MISMATCH: { code: Code.ABORTED, detail: 'none' },
  SERVER_SHUTDOWN: { code: Code.UNAVAILABLE, detail: 'none' },
  STORAGE_FULL: exhausted,
  STORAGE_UNAVAILABLE: { code: Code.UNAVAILABLE, detail: 'none' },
  // The database (PostgreSQL) cannot be reached: retry later or on another replica. Unlike
  // STORAGE_UNAVAILABLE, a write in flight may have committed (retry with the same key).
  STORE_UNAVAILABLE: { code: Code.UNAVAILABLE, detail: 'none' },
  DATA_CORRUPTED: { code: Code.DATA_LOSS, detail: 'none' },
  CANCELLED: { code: Code.CANCELLED, detail: 'none' },
  DEADLINE_EXCEEDED: { code: Code.DEADLINE_EXCEEDED, detail: 'none' },
  // grpc.health.v1 Check of a service this server does not know.
  SERVICE_UNKNOWN: { code: Code.NOT_FOUND, detail: 'none' },
  UNAUTHENTICATED: { code: Code.UNAUTHENTICATED, detail: 'none' },
  PERMISSION_DENIED: { code: Code.PERMISSION_DENIED, detail: 'none' },
};

/** The status code for a reason (strict-mode INV_* reasons are state-dependent). */
export function codeForReason(reason: string): Code {
  const m = TABLE[reason];
  if (m) return m.code;
  if (reason.startsWith('INV_')) return Code.FAILED_PRECONDITION;
  return Code.INVALID_ARGUMENT;
}

function mappingFor(reason: string): Mapping {
  return TABLE[reason] ?? (reason.startsWith('INV_') ? precondition : invalid);
}

function packAny(typeName: string, bytes: Uint8Array): Any {
  return { typeUrl: `type.googleapis.com/${typeName}`, value: Buffer.from(bytes) };
}

/** Builds a gRPC ServiceError with google.rpc.Status details for a domain/app error. */
export function domainErrorToStatus(err: DomainError): ServiceError {
  const mapping = mappingFor(err.reason);
  const metadata = clipMetadata(err.metadata);
  const message = clip(err.message, MAX_MESSAGE_BYTES);
  const details: Any[] = [
    packAny('google.rpc.ErrorInfo', ErrorInfo.encode({ reason: err.reason, domain: ERROR_DOMAIN, metadata }).finish()),
  ];
  const field = metadata.field ?? (err.index !== undefined ? `events[${err.index}]` : undefined);
  if (mapping.detail === 'bad-request') {
    details.push(packAny('google.rpc.BadRequest', BadRequest.encode({
      fieldViolations: [{ field: field ?? '', description: message }],
    }).finish()));
  } else if (mapping.detail === 'precondition') {
    details.push(packAny('google.rpc.PreconditionFailure', PreconditionFailure.encode({
      violations: [{ type: err.reason, subject: field ?? metadata.sessionId ?? '', description: message }],
    }).finish()));
  } else if (mapping.detail === 'quota') {
    details.push(packAny('google.rpc.QuotaFailure', QuotaFailure.encode({
      violations: [{ subject: metadata.limitName ?? err.reason, description: message }],
    }).finish()));
  }
  return makeServiceError(mapping.code, message, details);
}

/** A ServiceError carrying `grpc-status-details-bin`. */
export function makeServiceError(code: Code, message: string, details: Any[]): ServiceError {
  const metadata = new Metadata();
  const bin = Status.encode({ code, message, details }).finish();
  metadata.set('grpc-status-details-bin', Buffer.from(bin));
  const e = new Error(message) as ServiceError;
  e.code = code;
  e.details = message;
  e.metadata = metadata;
  return e;
}

/** What a client reads for a StorageError `unavailable`, by the engine's code. */
function unavailableMessage(code: string): string {
  if (code === 'WRITER_THREAD_FAILED') {
    return "the server's SQLite writer thread failed; an append in flight may have been stored; restart the server, then retry with the same idempotency key";
  }
  return "the server's storage failed (I/O error); nothing was stored; retry later or on another replica";
}

/** Anything thrown, as the google.rpc.Status a call would end with (AppendStream's per-batch errors). */
export function toRpcStatus(err: unknown, log: (err: unknown) => void): Status {
  const se = toServiceError(err, log);
  const bin = se.metadata.get('grpc-status-details-bin')[0];
  return Buffer.isBuffer(bin) ? Status.decode(bin) : { code: se.code, message: se.details, details: [] };
}

/** Maps anything thrown by a handler to a ServiceError; unexpected errors become INTERNAL. */
export function toServiceError(err: unknown, log: (err: unknown) => void): ServiceError {
  if (err instanceof DomainError) return domainErrorToStatus(err);
  if (err instanceof StoreClosedError) {
    // A call that raced the shutdown: the client should retry elsewhere or later.
    return domainErrorToStatus(new DomainError('SERVER_SHUTDOWN', 'the server is shutting down; retry on another replica or later', {}));
  }
  if (err instanceof StoreUnavailableError) {
    // Not logged per request (a database outage would flood the log): the store reports its
    // connection problems itself (pool and LISTEN connection errors, with reconnect backoff).
    return domainErrorToStatus(new DomainError('STORE_UNAVAILABLE', err.message, {}));
  }
  if (err instanceof StorageError) {
    // Logged once per episode by the store monitor (src/app/storage-monitor.ts), not per request.
    return domainErrorToStatus(err.kind === 'full'
      ? new DomainError('STORAGE_FULL', "the server's storage is full; nothing was stored; retry later (reads are still served)", { limitName: 'storage' })
      : new DomainError('STORAGE_UNAVAILABLE', unavailableMessage(err.code), {}));
  }
  if (err instanceof DataCorruptedError) {
    // Logged (loudly, every time) by the store monitor; the message names the session and seq.
    const metadata: Record<string, string> = { sessionId: err.sessionId };
    if (err.seq !== undefined) metadata.seq = String(err.seq);
    if (err.digest !== undefined) metadata.digest = err.digest;
    return domainErrorToStatus(new DomainError('DATA_CORRUPTED', err.message, metadata));
  }
  log(err);
  return makeServiceError(Code.INTERNAL, INTERNAL_MESSAGE, [
    packAny('google.rpc.ErrorInfo', ErrorInfo.encode({ reason: 'INTERNAL', domain: ERROR_DOMAIN, metadata: {} }).finish()),
  ]);
}
