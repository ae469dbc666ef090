/**
 * Content-addressed blobs (issue #39): which values of event data are stored out of the event
 * row, the reference that takes their place, and the two pure walks (extraction on append,
 * re-inflation on read). docs/blobs.md is the user-facing description.
 *
 * - **What is blobbed** (when blobs are on, `minBytes > 0`): an image block's data (the string
 *   `attachment.data` of any object `{type: "image", attachment: {data}}`, at any depth) of at
 *   least `min(minBytes, IMAGE_MIN_BYTES)` characters, and any other string of at least
 *   `minBytes` UTF-8 bytes. A string holding a lone surrogate has no UTF-8 form and stays inline.
 * - **Bytes**: image data that is canonical base64 (what a standard encoder writes, padding
 *   included) is stored decoded, so the blob is the image file itself and its digest the file's
 *   SHA-256; its reference says `"encoding": "base64"`. Every other value is stored as its UTF-8
 *   bytes (no `encoding` key). Re-inflation turns the bytes back into exactly the string that was
 *   appended, so the event's JSON text is byte-identical.
 * - **The reference** (what a `blob_refs` read returns, and what the row stores):
 *   `{"$blob": "sha256:<64 lowercase hex>", "bytes": N, "mediaType": M}` plus `"encoding":
 *   "base64"` for decoded base64, keys in that order. `mediaType` is the image block's
 *   `attachment.mimeType` (or `application/octet-stream`), `text/plain; charset=utf-8` for strings.
 * - **No ambiguity with user data**: an object of exactly the reference shape ({@link
 *   parseBlobRef}: a `$blob` key with a well-formed digest and only the other reference keys, with
 *   valid values) in appended or imported data is a reference *by digest*: it stands for the
 *   blob's content, and the write fails with `BLOB_NOT_FOUND` (nothing stored) when the tenant
 *   has no such blob. So such an object is never stored as a literal, and every reference-shaped
 *   object in a stored row is a blob reference. Any other object with a `$blob` key is ordinary
 *   data. (Stores also record which digests each row references, for counting and `verify`.)
 */
import type { Json, JsonObject } from './event.js';
import { MAX_NESTING } from './json.js';

/** Default `--blob-min-bytes`: strings of at least 64 KiB are blobbed. */
export const DEFAULT_BLOB_MIN_BYTES = 65_536;

/** Image data of at least this many characters (or `minBytes`, if smaller) is blobbed. */
export const IMAGE_MIN_BYTES = 1024;

/** The media type of a blobbed string. */
export const TEXT_MEDIA_TYPE = 'text/plain; charset=utf-8';

/** The media type of image data whose block names none. */
export const DEFAULT_IMAGE_MEDIA_TYPE = 'application/octet-stream';

/** How a blob's bytes become the JSON string they stand for. */
export type BlobEncoding = 'utf8' | 'base64';

/** A blob reference. */
export interface BlobRef {
  /** `sha256:` and 64 lowercase hex digits. */
  readonly digest: string;
  /** The blob's size in bytes. */
  readonly bytes: number;
  readonly mediaType: string;
  readonly encoding: BlobEncoding;
}

/** A value chosen for a blob, before it has bytes and a digest. */
export interface BlobCandidate {
  readonly value: string;
  readonly encoding: BlobEncoding;
  readonly mediaType: string;
}

/**
 * Turns a candidate into its blob (bytes, digest; the caller keeps the bytes), or undefined to
 * keep the value inline (e.g. image data that is not canonical base64).
 */
export type BlobMaker = (candidate: BlobCandidate) => BlobRef | undefined;

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const REF_KEYS: ReadonlySet<string> = new Set(['$blob', 'bytes', 'mediaType', 'encoding']);

/** True when `digest` is `sha256:` and 64 lowercase hex digits. */
export function isBlobDigest(digest: unknown): digest is string {
  return typeof digest === 'string' && digest.length === 71 && DIGEST.test(digest);
}

/**
 * The reference an object stands for, or undefined when it is ordinary data. A reference has a
 * `$blob` digest and may have `bytes` (a non-negative safe integer), `mediaType` (a string) and
 * `encoding` (`"utf8"` or `"base64"`), nothing else. A missing `bytes` is -1 (unknown; the
 * blob's own size applies) and a missing mediaType ''.
 */
export function parseBlobRef(value: Json | undefined): BlobRef | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const o = value as JsonObject;
  const digest = o['$blob'];
  if (digest === undefined || !isBlobDigest(digest)) return undefined;
  for (const k in o) if (!REF_KEYS.has(k)) return undefined;
  const bytes = o['bytes'];
  if (bytes !== undefined && !(typeof bytes === 'number' && Number.isSafeInteger(bytes) && bytes >= 0)) return undefined;
  const mediaType = o['mediaType'];
  if (mediaType !== undefined && typeof mediaType !== 'string') return undefined;
  const encoding = o['encoding'];
  if (encoding !== undefined && encoding !== 'utf8' && encoding !== 'base64') return undefined;
  return { digest, bytes: bytes ?? -1, mediaType: mediaType ?? '', encoding: encoding ?? 'utf8' };
}

/** The stored / returned form of a reference (keys in the documented order; `encoding` only for base64). */
export function blobRefJson(ref: BlobRef): JsonObject {
  const o: JsonObject = { $blob: ref.digest, bytes: ref.bytes, mediaType: ref.mediaType };
  if (ref.encoding === 'base64') o['encoding'] = 'base64';
  return o;
}

/**
 * Whether data whose JSON text is `text` may hold a value to blob: a string of `minBytes` bytes
 * needs at least that many characters of text, and image data an image block. A cheap gate that
 * keeps ordinary small events off the walk.
 */
export function mayHoldBlobs(text: string, minBytes: number): boolean {
  if (minBytes <= 0) return false;
  if (text.length >= minBytes) return true;
  return text.length >= Math.min(minBytes, IMAGE_MIN_BYTES) && text.includes('"type":"image"');
}

/**
 * Whether data whose JSON text is `text` may hold references (an object with a `$blob` key): the
 * text holds `"$blob"`. Searched from its `$` (rare in JSON text: the engine's search skips to each
 * one at memchr speed) with a 6-character pattern, then the quote before it checked: a pattern
 * starting with the quote stops at every string of the text (~124 against ~43 ns per 200-byte event).
 */
export function mayHoldRefs(text: string): boolean {
  for (let i = text.indexOf('$blob"'); i !== -1; i = text.indexOf('$blob"', i + 6)) {
    if (i > 0 && text.charCodeAt(i - 1) === 34) return true;
  }
  return false;
}

/** Sets an own data property (a `__proto__` key included, as JSON.parse makes it). */
function setKey(o: JsonObject, k: string, v: Json): void {
  if (k === '__proto__') Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  else o[k] = v;
}

/** UTF-8 length of `s`, or -1 when it holds a lone surrogate (no UTF-8 form). */
function utf8LengthOrBad(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff) {
      if (i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
        n += 2;
        i++;
      } else return -1;
    } else if (c >= 0xdc00 && c <= 0xdfff) return -1;
    else n += 2;
  }
  return n;
}

/**
 * Array or object `v` with each child replaced by `f(child, key)`, copy-on-write: `v` itself when
 * no child changed, else a copy with the changed children (unchanged subtrees shared).
 */
function mapChildren(v: Json[] | JsonObject, f: (x: Json, key: string | number) => Json): Json {
  if (Array.isArray(v)) {
    let out: Json[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const x = v[i] as Json;
      const y = f(x, i);
      if (y !== x) {
        out ??= v.slice();
        out[i] = y;
      }
    }
    return out ?? v;
  }
  let out: JsonObject | undefined;
  for (const k in v) {
    const x = v[k] as Json;
    const y = f(x, k);
    if (y !== x) {
      out ??= { ...v };
      setKey(out, k, y);
    }
  }
  return out ?? v;
}

/** The result of {@link extractBlobs}: the data with references in place, and the references in walk order. */
export interface Extracted {
  readonly data: Json;
  readonly refs: readonly BlobRef[];
}

/**
 * `data` with every value to blob (see the module comment) replaced by its reference, made by
 * `make`; undefined when nothing was blobbed (data unchanged). Copy-on-write: `data` is not
 * modified, unchanged subtrees are shared.
 */
export function extractBlobs(data: Json, minBytes: number, make: BlobMaker): Extracted | undefined {
  if (minBytes <= 0) return undefined;
  const refs: BlobRef[] = [];
  const imageMin = Math.min(minBytes, IMAGE_MIN_BYTES);
  const visit = (v: Json): Json => {
    if (typeof v === 'string') {
      if (v.length * 3 < minBytes || v.length < 1) return v;
      const n = utf8LengthOrBad(v);
      if (n < minBytes) return v;
      const ref = make({ value: v, encoding: 'utf8', mediaType: TEXT_MEDIA_TYPE });
      if (ref === undefined) return v;
      refs.push(ref);
      return blobRefJson(ref);
    }
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return mapChildren(v, (x) => visit(x));
    return mapChildren(v, (x, k) => (k === 'attachment' && v['type'] === 'image' ? visitAttachment(x) : visit(x)));
  };
  const visitAttachment = (a: Json): Json => {
    if (a === null || typeof a !== 'object' || Array.isArray(a)) return visit(a);
    const d = a['data'];
    if (typeof d !== 'string' || d.length < imageMin) return visit(a);
    const mt = a['mimeType'];
    const ref = make({ value: d, encoding: 'base64', mediaType: typeof mt === 'string' ? mt : DEFAULT_IMAGE_MEDIA_TYPE });
    if (ref === undefined) return visit(a);
    refs.push(ref);
    const out: JsonObject = {};
    for (const k in a) setKey(out, k, k === 'data' ? blobRefJson(ref) : visit(a[k] as Json));
    return out;
  };
  const result = visit(data);
  return refs.length === 0 ? undefined : { data: result, refs };
}

/**
 * Every reference in `data`, in walk order (duplicates kept): the one reference walk, over stored
 * data and over unvalidated candidates alike (it stops below MAX_NESTING, deeper data is refused
 * by validation).
 */
export function findBlobRefs(data: unknown): BlobRef[] {
  const refs: BlobRef[] = [];
  const visit = (v: unknown, depth: number): void => {
    if (v === null || typeof v !== 'object' || depth > MAX_NESTING) return;
    if (Array.isArray(v)) {
      for (const x of v) visit(x, depth + 1);
      return;
    }
    const ref = '$blob' in v ? parseBlobRef(v as Json) : undefined;
    if (ref !== undefined) {
      refs.push(ref);
      return;
    }
    for (const k in v) visit((v as Record<string, unknown>)[k], depth + 1);
  };
  visit(data, 0);
  return refs;
}

/**
 * `data` with every reference replaced by `resolve(ref)` (the string it stands for; resolve
 * throws when the blob is missing or damaged). Copy-on-write, as {@link extractBlobs}.
 */
export function inflateBlobs(data: Json, resolve: (ref: BlobRef) => string): Json {
  const visit = (v: Json): Json => {
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return mapChildren(v, (x) => visit(x));
    const ref = '$blob' in v ? parseBlobRef(v) : undefined;
    if (ref !== undefined) return resolve(ref);
    return mapChildren(v, (x) => visit(x));
  };
  return visit(data);
}
