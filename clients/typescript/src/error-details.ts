/**
 * Client-side decoding of google.rpc.Status details from a gRPC error: what the CLI and the
 * tests use to read `ErrorInfo{reason, metadata}` and the other details.
 */
import type { Metadata, ServiceError } from '@grpc/grpc-js';
import { BadRequest, ErrorInfo, PreconditionFailure, QuotaFailure } from './gen/google/rpc/error_details.js';
import { Status } from './gen/google/rpc/status.js';

/** Decoded error details. */
export interface DecodedError {
  readonly code: number;
  readonly message: string;
  readonly reason: string;
  readonly domain: string;
  readonly metadata: Record<string, string>;
  readonly badRequest?: BadRequest;
  readonly preconditionFailure?: PreconditionFailure;
  readonly quotaFailure?: QuotaFailure;
}

/** Decodes `grpc-status-details-bin` of a ServiceError (reason '' when absent). */
export function decodeError(err: Pick<ServiceError, 'code' | 'details' | 'metadata'>): DecodedError {
  const md: Metadata | undefined = err.metadata;
  const raw = md?.get('grpc-status-details-bin')[0];
  const base = { code: err.code, message: err.details, reason: '', domain: '', metadata: {} as Record<string, string> };
  if (!raw || typeof raw === 'string') return base;
  const status = Status.decode(raw);
  return decodeStatus({ code: err.code, message: status.message || err.details, details: status.details });
}

/**
 * Decodes a google.rpc.Status (or an AppendStream BatchStatus, the same fields) into its
 * reason, metadata and details.
 */
export function decodeStatus(status: Pick<Status, 'code' | 'message' | 'details'>): DecodedError {
  let out: DecodedError = { code: status.code, message: status.message, reason: '', domain: '', metadata: {} };
  for (const any of status.details) {
    const name = any.typeUrl.slice(any.typeUrl.lastIndexOf('/') + 1);
    if (name === 'google.rpc.ErrorInfo') {
      const info = ErrorInfo.decode(any.value);
      out = { ...out, reason: info.reason, domain: info.domain, metadata: { ...info.metadata } };
    } else if (name === 'google.rpc.BadRequest') {
      out = { ...out, badRequest: BadRequest.decode(any.value) };
    } else if (name === 'google.rpc.PreconditionFailure') {
      out = { ...out, preconditionFailure: PreconditionFailure.decode(any.value) };
    } else if (name === 'google.rpc.QuotaFailure') {
      out = { ...out, quotaFailure: QuotaFailure.decode(any.value) };
    }
  }
  return out;
}
