/**
 * PalimpsestError: a failed call with its google.rpc.Status details decoded, the same shape as the
 * Python client's and the CLI's `--json` error (`code` is the gRPC status name).
 */
import { status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
import { decodeError, decodeStatus, type DecodedError } from './error-details.js';
import type { Status } from './gen/google/rpc/status.js';

/** One BadRequest, PreconditionFailure or QuotaFailure entry. */
export interface Violation {
  readonly kind: 'field' | 'precondition' | 'quota';
  readonly description: string;
  readonly field?: string;
  readonly type?: string;
  readonly subject?: string;
}

/** A failed RPC: `code` "FAILED_PRECONDITION", `reason` "HEAD_MISMATCH", `metadata` (e.g. `index`). */
export class PalimpsestError extends Error {
  override readonly name = 'PalimpsestError';
  constructor(
    /** The gRPC status name, e.g. "FAILED_PRECONDITION". */
    readonly code: string,
    message: string,
    /** The rule ID or documented reason ('' when the server sent none). */
    readonly reason: string = '',
    /** ErrorInfo metadata (`index` names the failing event of a rejected batch). */
    readonly metadata: Readonly<Record<string, string>> = {},
    readonly violations: readonly Violation[] = [],
    /** The numeric gRPC status. */
    readonly status: number = grpcStatus.UNKNOWN,
  ) {
    super(reason ? `${code} ${reason}: ${message}` : `${code}: ${message}`);
  }

  /** What the message says without the code and reason prefix. */
  get detail(): string {
    return this.message.replace(/^[A-Z_]+( [A-Z0-9_]+)?: /, '');
  }

  /** The CLI's `--json` shape. */
  toJSON(): Record<string, unknown> {
    return { code: this.code, reason: this.reason, message: this.detail, metadata: { ...this.metadata }, violations: this.violations };
  }
}

function isServiceError(e: unknown): e is ServiceError {
  return e instanceof Error && typeof (e as Partial<ServiceError>).code === 'number' && 'metadata' in e;
}

/** A ServiceError as a PalimpsestError (anything else is returned unchanged). */
export function toPalimpsestError(e: unknown): unknown {
  if (e instanceof PalimpsestError || !isServiceError(e)) return e;
  return fromDecoded(decodeError(e));
}

/** A refused AppendStream batch's BatchStatus (a google.rpc.Status) as a PalimpsestError. */
export function statusToPalimpsestError(s: Pick<Status, 'code' | 'message' | 'details'>): PalimpsestError {
  return fromDecoded(decodeStatus(s));
}

function fromDecoded(d: DecodedError): PalimpsestError {
  const violations: Violation[] = [
    ...(d.badRequest?.fieldViolations ?? []).map((v) => ({ kind: 'field' as const, field: v.field, description: v.description })),
    ...(d.preconditionFailure?.violations ?? []).map((v) => ({ kind: 'precondition' as const, type: v.type, subject: v.subject, description: v.description })),
    ...(d.quotaFailure?.violations ?? []).map((v) => ({ kind: 'quota' as const, subject: v.subject, description: v.description })),
  ];
  return new PalimpsestError(grpcStatus[d.code] ?? String(d.code), d.message, d.reason, d.metadata, violations, d.code);
}
