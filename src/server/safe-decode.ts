/**
 * Malformed request bytes must get INVALID_ARGUMENT with a clear message, not grpc-js's INTERNAL
 * "Error deserializing request". Service definitions are wrapped so that a failed decode yields a
 * MalformedRequest marker instead of throwing; the interceptor turns the marker into a status.
 *
 * A request that decodes is checked at once (request-checks.ts: bounded ids, labels and other
 * echoed strings); a failed check yields a RejectedRequest marker with its DomainError, so
 * nothing after the deserializer ever sees the request.
 */
import type { ServiceDefinition } from '@grpc/grpc-js';
import type { DomainError } from '../domain/errors.js';
import { checkRequest } from './request-checks.js';

/** What a request deserializer returns for bytes that are not a valid message. */
export class MalformedRequest {
  constructor(readonly method: string, readonly cause: string) {}
}

/** What a request deserializer returns for a request that decodes but breaks a bound. */
export class RejectedRequest {
  constructor(readonly error: DomainError) {}
}

/** A copy of `def` whose request deserializers never throw. */
export function withSafeDeserializers<T extends ServiceDefinition>(def: T): T {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(def)) {
    const decode = method.requestDeserialize;
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        let request: unknown;
        try {
          request = decode(bytes);
        } catch (e) {
          return new MalformedRequest(method.path, e instanceof Error ? e.message : String(e));
        }
        const rejected = checkRequest(method.path, request);
        return rejected ? new RejectedRequest(rejected) : request;
      },
    };
  }
  return out as T;
}
