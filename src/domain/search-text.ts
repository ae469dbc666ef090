/**
 * The searchable text of an event (issue #40): what the search index holds for it. One
 * definition, computed the same way by every store (memory and SQLite run this code; PostgreSQL
 * runs the SQL twin in src/store/postgres/search-schema.ts, and the contract suite compares them):
 *
 * - Only message-producing events are indexed: user/message, assistant/message, tool/result and
 *   the retired steering/message ({@link SEARCH_EVENT_TYPES}). Their text is the user's and the
 *   model's text, reasoning blocks, tool-call names and arguments, tool-result text, a tool
 *   result's `error`: every *string* value in the event's `data`, at any depth, except under the
 *   structural keys of {@link SEARCH_SKIPPED_KEYS} (ids, block types, roles, the message source,
 *   a tool's display payload `meta`, attachments). Legacy shapes need no upgrade: the same rule
 *   finds their text.
 * - Strings are joined with a newline in the order PostgreSQL's jsonb keeps object keys (shorter
 *   keys first, then by UTF-8 bytes), array elements in order; so phrase matches and snippets are
 *   the same on every store.
 * - The text is cut to {@link MAX_SEARCH_TEXT} code points: a bigger event (a long tool output)
 *   is searchable by its beginning only.
 * - A value kept as a blob (a string of at least `--blob-min-bytes`, image data; docs/blobs.md) is
 *   not searchable: the stored data holds its reference (src/domain/blobs.ts parseBlobRef), which
 *   is skipped whole, so its digest is not searchable either. Every store reads the stored form.
 * - An event whose JSON text holds a `\u0000` or surrogate escape (a string PostgreSQL's jsonb
 *   cannot hold) is indexed with empty text: findable by its fields, not its words.
 */
import type { Json } from './event.js';
import { MESSAGE_EVENT_TYPES } from './event.js';
import { isJsonObject } from './json.js';
import { parseBlobRef } from './blobs.js';
import { utf8Length } from './utf8.js';

/** The event types whose events are indexed. */
export const SEARCH_EVENT_TYPES: ReadonlySet<string> = MESSAGE_EVENT_TYPES;

/** Longest searchable text of one event, in Unicode code points (64 KiB of ASCII). */
export const MAX_SEARCH_TEXT = 65536;

/** Keys whose values (whole subtrees) are not searchable text. */
export const SEARCH_SKIPPED_KEYS: readonly string[] = [
  'id', 'type', 'role', 'toolCallId', 'callId', 'source', 'provenance', 'replayState', 'meta', 'attachment', 'usage',
];
const SKIPPED: ReadonlySet<string> = new Set(SEARCH_SKIPPED_KEYS);

/** JSON escapes PostgreSQL's jsonb refuses: NUL and (lone, as JSON.stringify writes them) surrogates. */
export const UNINDEXABLE_ESCAPE = /\\u(0000|d[89a-f][0-9a-f]{2})/i;

/** Whether the JSON text holds an {@link UNINDEXABLE_ESCAPE} (most hold no `\u` at all: a plain scan first). */
function unindexable(jsonText: string): boolean {
  return jsonText.includes('\\u') && UNINDEXABLE_ESCAPE.test(jsonText);
}


/** Code point order, which is UTF-8 byte order. */
function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}

/** jsonb's key order: by UTF-8 length, then bytes. */
export function compareJsonbKeys(a: string, b: string): number {
  return utf8Length(a) - utf8Length(b) || compareCodePoints(a, b);
}

/**
 * Key lists seen (as JSON) -> their searchable keys in jsonb order: events repeat a few shapes.
 * Only short key lists are cached (at most KEY_ORDERS_MAX of at most KEY_LIST_MAX keys and
 * KEY_SHAPE_MAX characters: some 10-20 MiB at the very most): an object with many or long keys, which any caller
 * may append, is ordered every time instead of being kept.
 */
const keyOrders = new Map<string, readonly string[]>();
const KEY_ORDERS_MAX = 4096;
const KEY_LIST_MAX = 32;
const KEY_SHAPE_MAX = 1024;

/** The number of key lists cached (for tests). */
export function cachedKeyOrders(): number {
  return keyOrders.size;
}

const orderKeys = (keys: string[]): readonly string[] => keys.filter((k) => !SKIPPED.has(k)).sort(compareJsonbKeys);

/** The keys of `keys` that are searchable, in jsonb order (cached per short key list). */
function searchableKeys(keys: string[]): readonly string[] {
  if (keys.length < 2) return keys.length === 1 && SKIPPED.has(keys[0]!) ? [] : keys;
  if (keys.length > KEY_LIST_MAX) return orderKeys(keys);
  const shape = JSON.stringify(keys);
  if (shape.length > KEY_SHAPE_MAX) return orderKeys(keys);
  let order = keyOrders.get(shape);
  if (order === undefined) {
    order = orderKeys(keys);
    if (keyOrders.size >= KEY_ORDERS_MAX) keyOrders.clear();
    keyOrders.set(shape, order);
  }
  return order;
}

/**
 * UTF-16 units (separators counted) past which collecting stops: that many hold at least
 * {@link MAX_SEARCH_TEXT} code points, so the text cut from them is the text cut from all of them,
 * and a big event's strings past its searchable beginning are not joined only to be cut.
 */
const COLLECT_UNITS = 2 * MAX_SEARCH_TEXT;

/** Pushes the searchable strings of `v` onto `out`; returns the units gathered so far (`units` before). */
function collect(v: Json, out: string[], units = 0): number {
  if (units >= COLLECT_UNITS) return units;
  if (typeof v === 'string') {
    out.push(v);
    return units + v.length + 1;
  }
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length && units < COLLECT_UNITS; i++) units = collect(v[i]!, out, units);
  } else if (isJsonObject(v)) {
    if ('$blob' in v && parseBlobRef(v) !== undefined) return units; // a value kept as a blob: not searchable
    for (const k of searchableKeys(Object.keys(v))) {
      if (units >= COLLECT_UNITS) break;
      units = collect(v[k] as Json, out, units);
    }
  }
  return units;
}

/** `s` cut to at most `max` code points. */
export function cutCodePoints(s: string, max: number): string {
  if (s.length <= max) return s;
  let points = 0;
  let i = 0;
  while (i < s.length && points < max) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length ? 2 : 1;
    points++;
  }
  return s.slice(0, i);
}

/**
 * The searchable text of an event of type `type` with data `data` (see the module comment), or
 * undefined when events of this type are not indexed. `dataText` is the data's JSON text when the
 * caller has it (else it is written here for the escape check).
 */
export function searchText(type: string, data: Json, dataText?: string): string | undefined {
  if (!SEARCH_EVENT_TYPES.has(type)) return undefined;
  if (unindexable(dataText ?? JSON.stringify(data))) return '';
  const parts: string[] = [];
  collect(data, parts);
  return cutCodePoints(parts.join('\n'), MAX_SEARCH_TEXT);
}

/** `value[key]` when value is an object. */
function at(value: Json | undefined, key: string): Json | undefined {
  return isJsonObject(value) ? value[key] : undefined;
}

/**
 * The tool calls an assistant/message makes: `[callId, toolName]` of each `tool-call` block with a
 * string id and name, from `data.message.content` when that is an array, else the legacy
 * `data.content`. Empty for other types.
 */
export function searchToolCalls(type: string, data: Json): [string, string][] {
  if (type !== 'assistant/message') return [];
  const wrapped = at(at(data, 'message'), 'content');
  const content = Array.isArray(wrapped) ? wrapped : at(data, 'content');
  if (!Array.isArray(content)) return [];
  const out: [string, string][] = [];
  for (const b of content) {
    if (!isJsonObject(b) || b['type'] !== 'tool-call') continue;
    const id = b['id'];
    const name = b['name'];
    if (typeof id === 'string' && typeof name === 'string') out.push([id, name]);
  }
  return out;
}

/**
 * The call a tool/result answers: `data.message.content[0].toolCallId` when a string, else the
 * legacy `data.callId` when a string; undefined otherwise (and for other types). Its tool name is
 * that of the latest earlier call with this id in the session (what the index looked up when the
 * result was written).
 */
export function searchResultCallId(type: string, data: Json): string | undefined {
  if (type !== 'tool/result') return undefined;
  const content = at(at(data, 'message'), 'content');
  const first = Array.isArray(content) ? content[0] : undefined;
  const id = at(first, 'toolCallId');
  if (typeof id === 'string') return id;
  const legacy = at(data, 'callId');
  return typeof legacy === 'string' ? legacy : undefined;
}

/** Everything the index keeps of an event (see {@link searchDoc}). */
export interface SearchDoc {
  /** Searchable text ('' when unindexable). */
  readonly text: string;
  /** Tool calls it makes: [call id, tool name]. */
  readonly calls: [string, string][];
  /** The call id it answers, if any. */
  readonly callId: string | undefined;
}

/**
 * The index entry parts of an event, or undefined for a type that is not indexed. An event whose
 * JSON text holds an escape jsonb refuses has empty text and no calls (PostgreSQL cannot read it).
 */
export function searchDoc(type: string, data: Json, dataText?: string): SearchDoc | undefined {
  if (!SEARCH_EVENT_TYPES.has(type)) return undefined;
  if (unindexable(dataText ?? JSON.stringify(data))) return { text: '', calls: [], callId: undefined };
  const parts: string[] = [];
  collect(data, parts);
  return { text: cutCodePoints(parts.join('\n'), MAX_SEARCH_TEXT), calls: searchToolCalls(type, data), callId: searchResultCallId(type, data) };
}
