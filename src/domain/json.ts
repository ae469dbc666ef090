/**
 * Lossless JSON (dsh-semantics 1.1): the only values a session log may hold are null, booleans,
 * finite numbers other than -0, strings, dense arrays and plain objects. Everything else
 * (BigInt, functions, symbols, undefined, NaN, Infinity, -0, cycles, sparse arrays, Map/Set/Date
 * and other class instances, symbol keys, non-enumerable keys) is refused
 * with `NOT_JSON`, because it would not survive a JSON round trip unchanged.
 *
 * The check, the defensive copy and the deep freeze are one pass (`toFrozenJson`), so accepting
 * an event walks its data once. Non-index properties added to an array are not copied (JSON
 * serialization drops them too), so the stored value is exactly what a JSON client would send.
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

/** Internal: thrown at the offending value; the path is collected while unwinding (no per-node string work). */
class Offence {
  readonly segments: (string | number)[] = [];
  constructor(readonly what: string) {}
}

function toDomainError(o: Offence, root: string): DomainError {
  let path = root;
  for (let i = o.segments.length - 1; i >= 0; i--) path = childPath(path, o.segments[i] as string | number);
  return notJson(path, o.what);
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
  try {
    return copy(value, []);
  } catch (e) {
    if (e instanceof Offence) throw toDomainError(e, path);
    throw e;
  }
}

function copy(value: unknown, ancestors: object[]): Json {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value) || Object.is(value, -0)) throw new Offence(describe(value));
      return value;
    case 'object':
      break;
    default:
      throw new Offence(describe(value));
  }
  if (value === null) return null;
  const obj = value;
  // Cycle check against the current ancestor chain (shared, non-cyclic subtrees are fine).
  if (ancestors.length > 0 && ancestors.includes(obj)) throw new Offence('a cycle');
  const proto: unknown = Object.getPrototypeOf(obj);
  if (Array.isArray(obj)) {
    if (proto !== arrayProto) throw new Offence(describe(obj));
    const arr = obj as unknown[];
    const len = arr.length;
    ancestors.push(obj);
    const out = new Array<Json>(len);
    let i = 0;
    try {
      for (; i < len; i++) {
        if (!(i in arr)) throw new Offence('a hole in a sparse array');
        out[i] = copy(arr[i], ancestors);
      }
    } catch (e) {
      if (e instanceof Offence) e.segments.push(i);
      throw e;
    }
    ancestors.pop();
    return Object.freeze(out) as Json[];
  }
  if (proto !== objectProto && proto !== null) throw new Offence(describe(obj));
  const out: { [key: string]: Json } = {};
  const src = obj as Record<string, unknown>;
  ancestors.push(obj);
  let n = 0;
  let current = '';
  // for-in visits enumerable string keys (own ones: the prototype is Object.prototype or null);
  // comparing with Reflect.ownKeys catches symbol keys and non-enumerable keys in one call.
  try {
    for (const key in src) {
      current = key;
      const v = copy(src[key], ancestors);
      if (key === '__proto__') {
        Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      } else {
        out[key] = v;
      }
      n++;
    }
  } catch (e) {
    if (e instanceof Offence) e.segments.push(current);
    throw e;
  }
  if (Reflect.ownKeys(obj).length !== n) {
    throw new Offence(Object.getOwnPropertySymbols(obj).length !== 0 ? 'an object with symbol keys' : 'an object with non-enumerable properties');
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
  toFrozenJson(value, path);
}

/** True iff `value` is lossless JSON. */
export function isLosslessJson(value: unknown): value is Json {
  try {
    copy(value, []);
    return true;
  } catch (e) {
    if (e instanceof Offence) return false;
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
