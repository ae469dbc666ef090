/**
 * Bounds on the strings a request carries, checked before anything else uses them: a session id
 * or a label is looked up, stored and echoed in error messages, so an unbounded one costs memory
 * on every path and could make an error's trailers larger than a client accepts (a 60,000
 * character id used to wedge the client connection that sent it). Every limit error names the
 * field, the limit and the actual size; a rejected value is echoed only as a short prefix.
 *
 * The transport runs these checks at the deserializer (src/server/request-checks.ts); the use
 * cases run the ones that also guard non-gRPC paths (JSONL import, the app API).
 */
import { DomainError } from '../domain/errors.js';

/** Session ids: 1-128 characters of [A-Za-z0-9._:-]. */
export const SESSION_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;
/** Max characters of a session id. */
export const MAX_SESSION_ID_CHARS = 128;
/** Max labels on a session (and terms in a label selector). */
export const MAX_LABELS = 64;
/** Max UTF-8 bytes of a label key. */
export const MAX_LABEL_KEY_BYTES = 128;
/** Max UTF-8 bytes of a label value. */
export const MAX_LABEL_VALUE_BYTES = 1024;
/** Max UTF-8 bytes of an event type. */
export const MAX_EVENT_TYPE_BYTES = 256;
/** Max UTF-8 bytes of an idempotency key. */
export const MAX_IDEMPOTENCY_KEY_BYTES = 256;
/** Max UTF-8 bytes of other short header strings (cwd is a path: PATH_MAX). */
export const MAX_CWD_BYTES = 4096;
export const MAX_AGENT_PRESET_BYTES = 256;
export const MAX_ORIGIN_BYTES = 64;
/** Max UTF-8 bytes of a page token (tokens this server issues are far shorter). */
export const MAX_PAGE_TOKEN_BYTES = 1024;
/** Max type filters of a ListEvents request. */
export const MAX_TYPE_FILTERS = 100;

/** Characters of a rejected value that an error message may quote. */
const PREFIX_CHARS = 32;

/** A short, safely quoted prefix of `s` for an error message (never the whole of a long value). */
export function quotePrefix(s: string): string {
  if (s.length <= PREFIX_CHARS) return JSON.stringify(s);
  // Cut at a code point boundary so the quote never holds half a surrogate pair.
  let end = PREFIX_CHARS;
  const c = s.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return `${JSON.stringify(s.slice(0, end))}… (${s.length} characters)`;
}

function tooLong(field: string, what: string, limitName: string, limit: number, actual: number, index?: number): DomainError {
  return new DomainError('FIELD_TOO_LONG', `${field} is ${actual} bytes; the limit for ${what} is ${limit} bytes; shorten it`, {
    field, limitName, limit: String(limit), actual: String(actual),
  }, index);
}

/** Throws FIELD_TOO_LONG when `value` has more than `limit` UTF-8 bytes. */
export function checkLength(value: string, field: string, what: string, limitName: string, limit: number, index?: number): void {
  // A string of n UTF-16 units has at most 3n UTF-8 bytes: most values need no count.
  if (value.length * 3 <= limit) return;
  const n = Buffer.byteLength(value, 'utf8');
  if (n > limit) throw tooLong(field, what, limitName, limit, n, index);
}

/** Throws INVALID_SESSION_ID unless `id` is 1-128 characters of [A-Za-z0-9._:-]. */
export function checkSessionId(id: string, field = 'session_id'): void {
  if (SESSION_ID_RE.test(id)) return;
  const metadata: Record<string, string> = { field };
  if (id.length > MAX_SESSION_ID_CHARS) Object.assign(metadata, { limit: String(MAX_SESSION_ID_CHARS), actual: String(id.length) });
  throw new DomainError('INVALID_SESSION_ID', `${field} ${quotePrefix(id)} must be 1-${MAX_SESSION_ID_CHARS} characters of [A-Za-z0-9._:-]`, metadata);
}

/** Label count and key/value sizes (labels of a session, or the terms of a label selector). */
export function checkLabels(labels: Readonly<Record<string, string>> | undefined, field = 'labels'): void {
  if (labels === undefined) return;
  const keys = Object.keys(labels);
  if (keys.length > MAX_LABELS) {
    throw new DomainError('TOO_MANY_LABELS', `${field} has ${keys.length} entries; the limit is ${MAX_LABELS}; drop some`, {
      field, limitName: 'max_labels', limit: String(MAX_LABELS), actual: String(keys.length),
    });
  }
  for (const k of keys) {
    checkLength(k, `${field} key ${quotePrefix(k)}`, 'a label key', 'max_label_key_bytes', MAX_LABEL_KEY_BYTES);
    checkLength(labels[k] ?? '', `${field}[${quotePrefix(k)}]`, 'a label value', 'max_label_value_bytes', MAX_LABEL_VALUE_BYTES);
  }
}

/** Event types of a batch: each at most MAX_EVENT_TYPE_BYTES (reported with the event's index). */
export function checkEventTypes(events: readonly { readonly type: unknown }[], fieldOf: (i: number) => string = (i) => `events[${i}].type`): void {
  for (let i = 0; i < events.length; i++) {
    const t = events[i]!.type;
    // The field name is built only for a type that may be too long (see checkLength).
    if (typeof t === 'string' && t.length * 3 > MAX_EVENT_TYPE_BYTES) checkLength(t, fieldOf(i), 'an event type', 'max_event_type_bytes', MAX_EVENT_TYPE_BYTES, i);
  }
}

/** An append's options: the idempotency key's size and a well-formed expected_last_seq. */
export function checkAppendOptions(opts: { readonly expectedLastSeq?: number; readonly idempotencyKey?: string }): void {
  if (opts.idempotencyKey) checkLength(opts.idempotencyKey, 'idempotency_key', 'an idempotency key', 'max_idempotency_key_bytes', MAX_IDEMPOTENCY_KEY_BYTES);
  const e = opts.expectedLastSeq;
  if (e !== undefined && (!Number.isSafeInteger(e) || e < -1)) {
    // -1 means "the session is empty"; anything below is a malformed request, not a head mismatch.
    throw new DomainError('INVALID_ARGUMENT', `expected_last_seq ${e} is not a seq: send -1 for an empty session, the last seq otherwise, or leave it unset`, {
      field: 'expected_last_seq', actual: String(e),
    });
  }
}
