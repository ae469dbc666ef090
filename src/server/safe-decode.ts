/**
 * Malformed request bytes must get INVALID_ARGUMENT with a clear message, not grpc-js's INTERNAL
 * "Error deserializing request". Service definitions are wrapped so that a failed decode yields a
 * MalformedRequest marker instead of throwing; the interceptor turns the marker into a status.
 *
 * A request that decodes is checked at once (request-checks.ts: bounded ids, labels and other
 * echoed strings); a failed check yields a RejectedRequest marker with its DomainError, so
 * nothing after the deserializer ever sees the request.
 *
 * Proto3 string fields must be valid UTF-8, but the generated decoders replace invalid bytes with
 * U+FFFD silently, so a client's bytes could be stored changed. The decoders are therefore given
 * a reader whose UTF-8 decoding is strict: an invalid string is recorded (and decoded to a marker
 * that no valid input can contain), and the request is refused with INVALID_UTF8 naming the first
 * such field (`events[0].data.json`, `labels`). ASCII strings never reach the decoder (the
 * reader's fast path), so valid requests pay nothing for it.
 */
import { randomBytes } from 'node:crypto';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import type { ServiceDefinition } from '@grpc/grpc-js';
import { DomainError } from '../domain/errors.js';
import { checkRequest } from './request-checks.js';

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
/** Stands for an invalid string in the decoded request: U+FDD0 (a noncharacter) + a random tag. */
const MARK = `﷐${randomBytes(6).toString('hex')}`;
/** Invalid strings seen by the decode in progress (decoding is synchronous). */
let invalidStrings = 0;

function decodeUtf8Strictly(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    invalidStrings++;
    return MARK;
  }
}

const snake = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The proto path (snake_case, oneof members by their case) of the first marked string in `v`. */
function markedField(v: unknown, path: string): string | undefined {
  if (typeof v === 'string') return v.includes(MARK) ? path : undefined;
  if (typeof v !== 'object' || v === null || v instanceof Uint8Array) return undefined;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const f = markedField(v[i], `${path}[${i}]`);
      if (f) return f;
    }
    return undefined;
  }
  const o = v as Record<string, unknown>;
  for (const [k, x] of Object.entries(o)) {
    if (k.includes(MARK)) return path;
    let p = path ? `${path}.${snake(k)}` : snake(k);
    let value = x;
    // A oneof ({$case, value}) is named by its member, as in the .proto file.
    if (typeof x === 'object' && x !== null && typeof (x as { $case?: unknown }).$case === 'string') {
      const c = x as { $case: string; value: unknown };
      p = path ? `${path}.${snake(c.$case)}` : snake(c.$case);
      value = c.value;
    }
    const f = markedField(value, p);
    if (f) return f;
  }
  return undefined;
}

/** What a request deserializer returns for bytes that are not a valid message. */
export class MalformedRequest {
  constructor(readonly method: string, readonly cause: string) {}
}

/** What a request deserializer returns for a request that decodes but breaks a bound. */
export class RejectedRequest {
  constructor(readonly error: DomainError) {}
}

/** The INVALID_ARGUMENT of request bytes that do not decode as a message of method `path` (short name `name`). */
export function malformedRequestError(path: string, cause: string, name: string): DomainError {
  return new DomainError('INVALID_ARGUMENT', `the request is not a valid protobuf message for ${path}: ${cause}`, { field: 'request', method: name });
}

/**
 * The error a safe deserializer's result stands for (MalformedRequest, RejectedRequest), or
 * undefined for a request: what both ports (the interceptor, the web port's adapter) refuse the call with.
 */
export function refusalOf(decoded: unknown, name: string): DomainError | undefined {
  if (decoded instanceof MalformedRequest) return malformedRequestError(decoded.method, decoded.cause, name);
  if (decoded instanceof RejectedRequest) return decoded.error;
  return undefined;
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
        invalidStrings = 0;
        try {
          // The generated decoders take a reader as well as bytes (ts-proto's `decode(input)`).
          request = decode(new BinaryReader(bytes, decodeUtf8Strictly) as unknown as Buffer);
        } catch (e) {
          return new MalformedRequest(method.path, e instanceof Error ? e.message : String(e));
        }
        if (invalidStrings > 0) {
          const field = markedField(request, '') ?? 'request';
          return new RejectedRequest(new DomainError('INVALID_UTF8',
            `${field} is not valid UTF-8 (proto3 string fields must be); the request was refused and nothing was stored; send the text as UTF-8 (or binary data base64-encoded)`,
            { field }));
        }
        const rejected = checkRequest(method.path, request);
        return rejected ? new RejectedRequest(rejected) : request;
      },
    };
  }
  return out as T;
}
