/**
 * Malformed request bytes must get INVALID_ARGUMENT with a clear message, not grpc-js's INTERNAL
 * "Error deserializing request". Service definitions are wrapped so that a failed decode yields a
 * MalformedRequest marker instead of throwing; the interceptor turns the marker into a status.
 */
import type { ServiceDefinition } from '@grpc/grpc-js';

/** What a request deserializer returns for bytes that are not a valid message. */
export class MalformedRequest {
  constructor(readonly method: string, readonly cause: string) {}
}

/** A copy of `def` whose request deserializers never throw. */
export function withSafeDeserializers<T extends ServiceDefinition>(def: T): T {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(def)) {
    const decode = method.requestDeserialize;
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return decode(bytes);
        } catch (e) {
          return new MalformedRequest(method.path, e instanceof Error ? e.message : String(e));
        }
      },
    };
  }
  return out as T;
}
