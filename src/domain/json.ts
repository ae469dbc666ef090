/**
 * Lossless JSON (dsh-semantics 1.1): the only values a session log may hold are null, booleans,
 * finite numbers other than -0, strings, dense arrays and plain objects. Everything else
 * (BigInt, functions, symbols, undefined, NaN, Infinity, -0, cycles, sparse arrays, Map/Set/Date
 * and other class instances, symbol keys, non-enumerable keys) is refused
 * with `NOT_JSON`, because it would not survive a JSON round trip unchanged.
 *
 * The check, the defensive copy and the deep freeze are one pass (`toFrozenJson`), so accepting
 * an event walks its data once.
 */
import { DomainError } from './errors.js';
import type { Json } from './event.js';
import { Reason } from './reasons.js';

const objectProto = Object.prototype;
const arrayProto = Array.prototype;

function notJson(path: string, what: string): DomainError {
  return new DomainError(
    Reason.NOT_JSON,
    `${path} is not losslessly JSON-serializable: ${what}; send only null, booleans, finite numbers (not -0), strings, dense arrays and plain objects`,
    { path },
  );
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (typeof value === 'bigint') return 'a BigInt';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  const proto: unknown = Object.getPrototypeOf(value);
  const ctor = proto !== null && typeof proto === 'object' ? (proto as { constructor?: { name?: unknown } }).constructor : undefined;
  const name = ctor !== undefined && typeof ctor.name === 'string' ? ctor.name : 'unknown';
  return `an instance of ${name}`;
}

function childPath(path: string, key: string | number): string {
  return typeof key === 'number' ? `${path}[${key}]` : `${path}.${key}`;
}

/**
 * Validates `value` as lossless JSON and returns a deep-frozen copy of it (the caller's arrays
 * and objects are never shared, so later mutation by the caller has no effect).
 * Frozen input is still copied: freezing does not prove the value is plain JSON.
 *
 * @param value - any value
 * @param path - the name used in the error message, e.g. `data`
 * @throws DomainError `NOT_JSON` naming the offending path
 */
export function toFrozenJson(value: unknown, path = 'value'): Json {
  return copy(value, path, []);
}

function copy(value: unknown, path: string, ancestors: object[]): Json {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value) || Object.is(value, -0)) throw notJson(path, describe(value));
      return value;
    case 'object':
      break;
    default:
      throw notJson(path, describe(value));
  }
  if (value === null) return null;
  const obj = value;
  if (ancestors.includes(obj)) throw notJson(path, 'a cycle');
  const proto: unknown = Object.getPrototypeOf(obj);
  if (Array.isArray(obj)) {
    if (proto !== arrayProto) throw notJson(path, describe(obj));
    const arr = obj as unknown[];
    const len = arr.length;
    // A dense array with no extra properties has exactly `length` own enumerable keys.
    if (Object.getOwnPropertySymbols(arr).length !== 0) throw notJson(path, 'an array with symbol keys');
    const names = Object.getOwnPropertyNames(arr);
    if (names.length !== len + 1) {
      throw notJson(path, names.length < len + 1 ? 'a sparse array' : 'an array with extra properties');
    }
    ancestors.push(obj);
    const out = new Array<Json>(len);
    for (let i = 0; i < len; i++) {
      if (!(i in arr)) throw notJson(childPath(path, i), 'a hole in a sparse array');
      out[i] = copy(arr[i], childPath(path, i), ancestors);
    }
    ancestors.pop();
    return Object.freeze(out) as Json[];
  }
  if (proto !== objectProto && proto !== null) throw notJson(path, describe(obj));
  if (Object.getOwnPropertySymbols(obj).length !== 0) throw notJson(path, 'an object with symbol keys');
  const keys = Object.keys(obj);
  if (Object.getOwnPropertyNames(obj).length !== keys.length) throw notJson(path, 'an object with non-enumerable properties');
  const out: { [key: string]: Json } = {};
  ancestors.push(obj);
  const src = obj as Record<string, unknown>;
  for (const key of keys) {
    const v = copy(src[key], childPath(path, key), ancestors);
    if (key === '__proto__') {
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
    } else {
      out[key] = v;
    }
  }
  ancestors.pop();
  return Object.freeze(out);
}

/**
 * Throws `NOT_JSON` unless `value` is lossless JSON (see the module comment).
 *
 * @param value - any value
 * @param path - the name used in the error message
 */
export function assertLosslessJson(value: unknown, path = 'value'): asserts value is Json {
  copy(value, path, []);
}

/** True iff `value` is lossless JSON. */
export function isLosslessJson(value: unknown): value is Json {
  try {
    copy(value, 'value', []);
    return true;
  } catch (e) {
    if (e instanceof DomainError) return false;
    throw e;
  }
}

/**
 * Deep-freezes a value that is already known to be JSON (no copy, no check). Used for values the
 * domain built itself.
 */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** True iff `value` is a plain JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is { readonly [key: string]: Json } {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Structural JSON equality: key order does not matter, key presence does (an absent key differs
 * from any present value, including null), arrays compare element by element.
 */
export function jsonEqual(a: Json | undefined, b: Json | undefined): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  const aArr = Array.isArray(a);
  if (aArr !== Array.isArray(b)) return false;
  if (aArr) {
    const x = a as readonly Json[];
    const y = b as readonly Json[];
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!jsonEqual(x[i], y[i])) return false;
    return true;
  }
  const x = a as { readonly [key: string]: Json };
  const y = b as { readonly [key: string]: Json };
  const kx = Object.keys(x);
  if (kx.length !== Object.keys(y).length) return false;
  for (const k of kx) {
    if (!Object.prototype.hasOwnProperty.call(y, k)) return false;
    if (!jsonEqual(x[k], y[k])) return false;
  }
  return true;
}
