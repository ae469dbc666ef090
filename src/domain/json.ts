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
 * Nesting deeper than {@link MAX_NESTING} levels is refused with `NOT_JSON` too (the walk and
 * JSON.stringify recurse per level; many JSON parsers refuse far less).
 *
 * A value the caller just got from `JSON.parse` and hands over (`adoptParsedJson`) is checked and
 * frozen in place instead of copied: JSON.parse only builds plain objects, dense arrays, strings,
 * booleans and null, so only its numbers need the check (it yields -0 and ±Infinity for `-0` and
 * `1e999`). When the text it came from is what JSON.stringify would write for the value, the text
 * is returned with it, so the store need not serialize it again. (What is known about the text
 * travels next to the value, never in a WeakMap: those cost ~0.3 us per event.)
 */
import { DomainError } from './errors.js';
import type { Json } from './event.js';
import { Reason } from './reasons.js';

/** Deepest nesting accepted (the value itself is level 0). */
export const MAX_NESTING = 1000;

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
 * What was wrong with text JSON.parse refused, without the text: V8 quotes the input (`Unexpected
 * token 'x', "..." is not valid JSON`), which would carry event data into error messages and
 * from there into logs. Keeps the offending token and any position.
 */
export function jsonSyntaxProblem(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  // `Unexpected token 'x', <excerpt> is not valid JSON`, the excerpt maybe cut at either end
  // ("...", ..."...", "..."...): keep the token only. Anchored at both ends, so linear.
  return message.replace(/^(Unexpected token '[^]{1,2}?'), [^]* is not valid JSON$/, '$1 is not valid JSON');
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
    return copy(value, [], 0);
  } catch (e) {
    if (e instanceof Offence) throw toDomainError(e, path);
    throw e;
  }
}

/** What the caller of JSON.parse knows about the text it parsed (see adoptParsedJson). */
export interface ParsedJsonText {
  /**
   * The parsed text when it claims to be canonical (no whitespace, escapes or numbers that
   * JSON.stringify would write differently: json-depth.ts jsonTextInfo), else undefined.
   */
  readonly text: string | undefined;
  /** Name/value pairs of the text. */
  readonly members: number;
}

/**
 * Checks and deep-freezes in place a value fresh from `JSON.parse(parsed.text)` that the caller
 * hands over (no other reference to it is kept or given out): only its numbers and its depth need
 * the check. Returns it with its text when the text is canonical for it: the walk confirms that
 * no duplicate or integer-like key made JSON.parse change the object (members counted), so the
 * text is exactly what JSON.stringify writes for the value.
 *
 * @throws DomainError `NOT_JSON` naming the offending path (-0, ±Infinity, too deep)
 */
export function adoptParsedJson(value: Json, parsed: ParsedJsonText, path = 'value'): { readonly value: Json; readonly text: string | undefined } {
  try {
    if (typeof value !== 'object' || value === null) return { value: copy(value, [], 0), text: parsed.text };
    walkMembers = 0;
    walkIndexKey = false;
    freezeParsed(value, 0);
    return { value, text: parsed.text !== undefined && !walkIndexKey && walkMembers === parsed.members ? parsed.text : undefined };
  } catch (e) {
    if (e instanceof Offence) throw toDomainError(e, path);
    throw e;
  }
}

let walkMembers = 0;
let walkIndexKey = false;

/** In-place check + freeze of a JSON.parse result (see adoptParsedJson): numbers and depth only (already frozen parts are walked again: a retried plan). */
function freezeParsed(value: object, depth: number): void {
  if (depth >= MAX_NESTING) throw new Offence(`nesting deeper than ${MAX_NESTING} levels`);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      try {
        if (typeof v === 'number') checkNumber(v);
        else if (typeof v === 'object' && v !== null) freezeParsed(v, depth + 1);
      } catch (e) {
        if (e instanceof Offence) e.segments.push(i);
        throw e;
      }
    }
  } else {
    const o = value as Record<string, unknown>;
    for (const key in o) {
      walkMembers++;
      const c = key.charCodeAt(0);
      if (c >= 48 && c <= 57) walkIndexKey = true;
      const v = o[key];
      try {
        if (typeof v === 'number') checkNumber(v);
        else if (typeof v === 'object' && v !== null) freezeParsed(v, depth + 1);
      } catch (e) {
        if (e instanceof Offence) e.segments.push(key);
        throw e;
      }
    }
  }
  Object.freeze(value);
}

function checkNumber(v: number): void {
  if (!Number.isFinite(v) || Object.is(v, -0)) throw new Offence(describe(v));
}

function copy(value: unknown, ancestors: object[], depth: number): Json {
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
  if (depth >= MAX_NESTING) throw new Offence(`nesting deeper than ${MAX_NESTING} levels`);
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
        out[i] = copy(arr[i], ancestors, depth + 1);
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
      const v = copy(src[key], ancestors, depth + 1);
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
    copy(value, [], 0);
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

/**
 * True unless `s` holds a lone surrogate (a UTF-16 half with no partner). Such a string has no
 * UTF-8 form: stored as text it would come back changed (SQLite keeps the surrogate's 3-byte
 * CESU form, which reads back as U+FFFD replacement characters), so strings that are stored as
 * text are refused with it rather than altered. JSON text escapes them (`\ud800`) and is safe.
 */
export function isWellFormedText(s: string): boolean {
  return (s as string & { isWellFormed(): boolean }).isWellFormed();
}
