/**
 * Per-event acceptance rules that do not depend on the surface: lossless JSON, the envelope, the
 * retired vocabulary, the request/header shape and the message shape (dsh-semantics 1.1, 2.1, 2.3),
 * then the seq rule. One validator for every path: live append, batch append, import and load
 * (unlike upstream, the message-shape rules also run on live append, so anything accepted can be
 * loaded again).
 *
 * Order (dsh-semantics 2.1, seed/load): NOT_JSON, ENVELOPE_INVALID, LEGACY_VOCABULARY (retired
 * types; on import `steering/message` is upgraded instead and its message checked), TURN_SHAPE
 * (import of a file only), REQUEST_HEADER_SHAPE, MESSAGE_SHAPE, LEGACY_VOCABULARY (request/header
 * reason `fallback`), SEQ_NOT_CONTIGUOUS. The same order is used on append.
 *
 * Adapter convenience: a *top-level* candidate key whose value is `undefined` counts as absent
 * (in-process callers build candidates with optional fields); `undefined` anywhere inside `data`,
 * `surfaceOp` or `sourceEventSeqs` is `NOT_JSON`.
 */
import { DomainError } from './errors.js';
import type { CandidateEvent, Json, SessionEvent, SurfaceOp } from './event.js';
import { adoptParsedJson, isJsonObject, isWellFormedText, toFrozenJson, type ParsedJsonText } from './json.js';
import { LEGACY_REQUIRED_KEYS, STEERING_TYPE, isLegacyShape, messageOf, upgradeSteering } from './message-view.js';
import { checkLegacyTurnShape } from './legacy-turns.js';
import { Reason } from './reasons.js';

/** Envelope keys allowed on an event. */
export const ENVELOPE_KEYS: ReadonlySet<string> = new Set(['type', 'seq', 'time', 'data', 'sourceEventSeqs', 'surfaceOp', 'ignorable']);

/** Retired types refused with LEGACY_VOCABULARY, with the message to give. */
export const LEGACY_TYPES: ReadonlyMap<string, string> = new Map([
  ['request/header-delta', 'the legacy request/header-delta event is unsupported; write a full request/header snapshot instead'],
  ['mode/set', 'the legacy mode/set event is unsupported; use the current mode events (plan/mode, sandbox/mode, permission/preset)'],
  ['context/message', 'context/message is a retired surface type and is not imported; write it as a user/message with a plugin source'],
  ['steering/message', 'steering/message is a retired surface type (2026-08) and cannot be appended; write a user/message (imported logs keep theirs, seen as user messages)'],
]);

/** The config keys a request/header `adapterDefaults` marker may name. */
const ADAPTER_DEFAULT_KEYS: ReadonlySet<string> = new Set(['reasoningEffort', 'maxTokens']);

/** How the seq rule applies. */
export type SeqMode = 'append' | 'import';

/** What {@link normalizeCandidate} needs to know about the log it extends. */
export interface NormalizeContext {
  readonly mode: SeqMode;
  /** Last seq + 1 of the log (including earlier events of the same batch). */
  readonly nextSeq: number;
  /** Number of events in the log (including earlier events of the same batch). */
  readonly eventCount: number;
  /** Clock for an omitted `time` on append. */
  readonly now: () => number;
  /**
   * Import only: accept seq gaps (seqs need only increase). Off by default: the reference seeds a
   * log only when it is contiguous from 0, so a file with a lost line is refused.
   */
  readonly allowSeqGaps?: boolean;
  /** Import of a reference file: also refuse what the reference's load path refuses (TURN_SHAPE). */
  readonly referenceLoad?: boolean;
  /**
   * The candidate's data is fresh from the caller's JSON.parse of this text and handed over: it
   * is checked and frozen in place (adoptParsedJson), not copied, and its text kept when canonical.
   */
  readonly parsedData?: ParsedJsonText;
}

/** A normalized event plus the facts the surface rules need. */
export interface NormalizedCandidate {
  /** Deep-frozen event; absent keys are absent. `surfaceOp` and `sourceEventSeqs` are unchecked JSON here. */
  readonly event: SessionEvent;
  /** Whether the candidate carried the key (even with a JSON null value). */
  readonly hasSurfaceOp: boolean;
  readonly hasSources: boolean;
  /** The data's JSON text, exactly what JSON.stringify writes for it, when the caller's text was that (ctx.parsedData). */
  readonly dataText?: string;
}

function fail(reason: string, message: string, metadata: Record<string, string> = {}): DomainError {
  return new DomainError(reason, message, metadata);
}

function isSafeSeq(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function nonEmptyString(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0;
}

/**
 * Checks `candidate` (see the module comment for the order) and returns the normalized,
 * deep-frozen event with its seq and time assigned.
 *
 * @throws DomainError with one of NOT_JSON, ENVELOPE_INVALID, LEGACY_VOCABULARY,
 *   REQUEST_HEADER_SHAPE, MESSAGE_SHAPE, SEQ_NOT_CONTIGUOUS
 */
export function normalizeCandidate(candidate: CandidateEvent, ctx: NormalizeContext): NormalizedCandidate {
  // 1. Lossless JSON over the whole event.
  if (candidate === null || typeof candidate !== 'object' || Array.isArray(candidate)) {
    toFrozenJson(candidate, 'event');
    throw fail(Reason.ENVELOPE_INVALID, 'the event has an invalid event envelope: it must be a JSON object');
  }
  const proto: unknown = Object.getPrototypeOf(candidate);
  if ((proto !== Object.prototype && proto !== null) || Object.getOwnPropertySymbols(candidate).length !== 0) {
    toFrozenJson(candidate, 'event');
  }
  const src = candidate as Record<string, unknown>;
  let unknownKey: string | undefined;
  for (const key of Object.keys(candidate)) {
    if (!ENVELOPE_KEYS.has(key) && src[key] !== undefined) {
      toFrozenJson(src[key], key);
      unknownKey ??= key;
    }
  }
  const field = (key: string): Json | undefined => {
    const v = src[key];
    return v === undefined ? undefined : toFrozenJson(v, key);
  };
  const typeIn = field('type');
  const seqIn0 = field('seq');
  const timeIn0 = field('time');
  let dataText: string | undefined;
  let data: Json | undefined;
  if (ctx.parsedData !== undefined && src['data'] !== undefined) {
    ({ value: data, text: dataText } = adoptParsedJson(src['data'] as Json, ctx.parsedData, 'data'));
  } else data = field('data');
  const sources = field('sourceEventSeqs');
  const op = field('surfaceOp');
  const ignorable = field('ignorable');

  // 2. Envelope.
  if (unknownKey !== undefined) {
    throw fail(Reason.ENVELOPE_INVALID, `the event has an invalid event envelope: unknown key "${unknownKey}" (allowed: ${[...ENVELOPE_KEYS].join(', ')})`, { field: unknownKey });
  }
  const type = typeIn;
  // Any string, the empty one included: the reference requires only typeof type === "string".
  if (typeof type !== 'string') throw fail(Reason.ENVELOPE_INVALID, 'the event has an invalid event envelope: type must be a string', { field: 'type' });
  if (!isWellFormedText(type)) {
    throw fail(Reason.ENVELOPE_INVALID, 'the event has an invalid event envelope: type holds a lone UTF-16 surrogate (it has no UTF-8 form); send well-formed Unicode', { field: 'type' });
  }
  const seqIn = seqIn0;
  if (seqIn !== undefined && !isSafeSeq(seqIn)) {
    throw fail(Reason.ENVELOPE_INVALID, `${type} has an invalid event envelope: seq must be a non-negative safe integer`, { field: 'seq' });
  }
  if (seqIn === undefined && ctx.mode === 'import') {
    throw fail(Reason.ENVELOPE_INVALID, `${type} has an invalid event envelope: seq is required on import`, { field: 'seq' });
  }
  const timeIn = timeIn0;
  if (timeIn !== undefined && !(typeof timeIn === 'number' && Number.isSafeInteger(timeIn))) {
    throw fail(Reason.ENVELOPE_INVALID, `${type} has an invalid event envelope: time must be a safe integer (Unix epoch ms)`, { field: 'time' });
  }
  if (timeIn === undefined && ctx.mode === 'import') {
    throw fail(Reason.ENVELOPE_INVALID, `${type} has an invalid event envelope: time is required on import`, { field: 'time' });
  }
  if (data === undefined) throw fail(Reason.ENVELOPE_INVALID, `${type} has an invalid event envelope: data is required`, { field: 'data' });
  if (ignorable !== undefined && ignorable !== true) {
    throw fail(Reason.ENVELOPE_INVALID, `${type} has an invalid event envelope: ignorable must be absent or exactly true`, { field: 'ignorable' });
  }

  // 3. Retired vocabulary, request/header shape, message shape, request/header reason.
  const legacy = LEGACY_TYPES.get(type);
  // A stored log (import, fork) may hold steering/message: it is seen as the user/message the
  // reference's load path upgrades it to.
  const upgradable = type === STEERING_TYPE && ctx.mode === 'import';
  if (legacy !== undefined && !upgradable) throw fail(Reason.LEGACY_VOCABULARY, legacy, { type });
  if (upgradable) {
    const message = upgradeSteering(data, '-', 0);
    if (message === undefined) {
      throw fail(Reason.MESSAGE_SHAPE, 'steering/message (retired; upgraded to a user/message on import) must be {turn, content, source} or {turn, message} with an integer turn and no other keys', { type });
    }
    checkMessageShape('user/message', message);
  }
  if (ctx.referenceLoad === true) checkLegacyTurnShape(type, data);
  if (type === 'request/header') {
    checkRequestHeader(data);
    if (isJsonObject(data) && data['reason'] === 'fallback') {
      throw fail(Reason.LEGACY_VOCABULARY, 'request/header reason "fallback" is unsupported legacy vocabulary; use initial, resume or change', { type });
    }
  } else if (type === 'user/message' || type === 'assistant/message' || type === 'tool/result') {
    checkMessageShape(type, data);
  }

  // 4. Seq.
  let seq: number;
  if (ctx.mode === 'append') {
    if (seqIn !== undefined && seqIn !== ctx.nextSeq) {
      throw fail(Reason.SEQ_NOT_CONTIGUOUS, `${type} seq ${String(seqIn)} is not contiguous; expected ${ctx.nextSeq}`, {
        seq: String(seqIn),
        expectedSeq: String(ctx.nextSeq),
      });
    }
    seq = ctx.nextSeq;
  } else {
    seq = seqIn as number;
    if (ctx.eventCount > 0 && seq < ctx.nextSeq) {
      throw fail(Reason.SEQ_NOT_CONTIGUOUS, `${type} seq ${seq} is not contiguous; expected ${ctx.allowSeqGaps === true ? 'a seq of at least ' : ''}${ctx.nextSeq} (seqs must increase)`, {
        seq: String(seq),
        expectedSeq: String(ctx.nextSeq),
      });
    }
    if (ctx.allowSeqGaps !== true && seq !== ctx.nextSeq) {
      const missing = seq - 1 > ctx.nextSeq ? `seqs ${ctx.nextSeq}..${seq - 1} are` : `seq ${ctx.nextSeq} is`;
      throw fail(Reason.SEQ_NOT_CONTIGUOUS, `${type} seq ${seq} is not contiguous; expected ${ctx.nextSeq} (${missing} missing: a log must be contiguous from 0; import with allow_seq_gaps to accept a snapshot with gaps)`, {
        seq: String(seq),
        expectedSeq: String(ctx.nextSeq),
        missingSeq: String(ctx.nextSeq),
      });
    }
  }
  const time = timeIn === undefined ? ctx.now() : (timeIn as number);

  const event: { -readonly [K in keyof SessionEvent]: SessionEvent[K] } = { type, seq, time, data };
  if (sources !== undefined) (event as { sourceEventSeqs?: unknown }).sourceEventSeqs = sources;
  if (op !== undefined) (event as { surfaceOp?: unknown }).surfaceOp = op as unknown as SurfaceOp;
  if (ignorable === true) event.ignorable = true;
  return { event: Object.freeze(event), hasSurfaceOp: op !== undefined, hasSources: sources !== undefined, dataText };
}

/**
 * REQUEST_HEADER_SHAPE: `data.header.config` must be an object with non-empty string `provider`
 * and `model`; `config.reasoningEffort`, when present, a non-empty string; `config.maxTokens`,
 * when present, a positive safe integer; `header.adapterDefaults`, when present, an object of
 * markers saying which config values came from the adapter's defaults: only the keys
 * `reasoningEffort` and `maxTokens`, each exactly `true` and present in `config` (as the
 * reference's seed validation); `header.system`, when
 * present, a string; `header.tools`, when present, an array.
 */
export function checkRequestHeader(data: Json): void {
  const bad = (what: string, field: string): DomainError =>
    fail(Reason.REQUEST_HEADER_SHAPE, `request/header ${what}`, { field });
  if (!isJsonObject(data)) throw bad('lacks provider/model: data must be an object with a header', 'data');
  const header = data['header'];
  if (!isJsonObject(header)) throw bad('lacks provider/model: data.header must be an object', 'data.header');
  const config = header['config'];
  if (!isJsonObject(config)) throw bad('lacks provider/model: data.header.config must be an object', 'data.header.config');
  if (!nonEmptyString(config['provider']) || !nonEmptyString(config['model'])) {
    throw bad('lacks provider/model: config.provider and config.model must be non-empty strings', 'data.header.config');
  }
  if ('reasoningEffort' in config && !nonEmptyString(config['reasoningEffort'])) {
    throw bad('has an invalid reasoningEffort: it must be a non-empty string', 'data.header.config.reasoningEffort');
  }
  if ('maxTokens' in config) {
    const m = config['maxTokens'];
    if (!(typeof m === 'number' && Number.isSafeInteger(m) && m > 0)) throw bad('has an invalid maxTokens: it must be a positive integer', 'data.header.config.maxTokens');
  }
  if ('adapterDefaults' in header) {
    const a = header['adapterDefaults'];
    const what = 'has invalid adapterDefaults: it must be an object whose keys are reasoningEffort or maxTokens, each exactly true and present in config';
    if (!isJsonObject(a)) throw bad(what, 'data.header.adapterDefaults');
    for (const key of Object.keys(a)) {
      if (!ADAPTER_DEFAULT_KEYS.has(key)) throw bad(`${what} (unknown key "${key}")`, `data.header.adapterDefaults.${key}`);
      if (a[key] !== true) throw bad(`${what} (${key} is ${JSON.stringify(a[key])})`, `data.header.adapterDefaults.${key}`);
      if (!(key in config)) throw bad(`${what} (config has no ${key})`, `data.header.adapterDefaults.${key}`);
    }
  }
  if ('system' in header && typeof header['system'] !== 'string') throw bad('has an invalid system: it must be a string', 'data.header.system');
  if ('tools' in header && !Array.isArray(header['tools'])) throw bad('has invalid tools: it must be an array', 'data.header.tools');
}

/** The keys of a message object (dsh-semantics 2.3). */
const MESSAGE_KEYS: ReadonlySet<string> = new Set(['id', 'role', 'content', 'source']);

/** Where the message of a surface type lives. */
function messagePath(type: string): string {
  return type === 'user/message' ? 'data' : 'data.message';
}

/** Why `data` of `type` has no message object: the wrapper is missing, and what a legacy shape would need. */
function missingMessage(type: string, data: Json): string {
  if (type === 'user/message') return 'lacks an identified message: data must be the message object {id, role, content, source}';
  const wrapper = `lacks an identified message: data.message is missing or not an object; write {turn, step, message:{id, role, content, source}}`;
  if (!isJsonObject(data) || 'message' in data) return wrapper;
  const required = LEGACY_REQUIRED_KEYS[type] ?? [];
  const missing = required.filter((k) => !(k in data));
  return `${wrapper} (an unwrapped legacy ${type} is upgraded only when it has ${required.join(', ')}; missing: ${missing.join(', ')})`;
}

/** Keys of a message object that are not message keys (likely misspellings), for error messages. */
function strayKeys(msg: { readonly [key: string]: Json }): string {
  const stray = Object.keys(msg).filter((k) => !MESSAGE_KEYS.has(k));
  return stray.length === 0 ? '' : `; unexpected key${stray.length > 1 ? 's' : ''} ${stray.map((k) => JSON.stringify(k)).join(', ')}`;
}

/** Keys of a tool-result block that are not block keys (likely misspellings), for error messages. */
function strayBlockKeys(block: { readonly [key: string]: Json }): string {
  const stray = Object.keys(block).filter((k) => !TOOL_RESULT_BLOCK_KEYS.has(k));
  return stray.length === 0 ? '' : `; unexpected key${stray.length > 1 ? 's' : ''} ${stray.map((k) => JSON.stringify(k)).join(', ')}`;
}

/** The keys of a tool-result content block. */
const TOOL_RESULT_BLOCK_KEYS: ReadonlySet<string> = new Set(['type', 'toolCallId', 'content', 'isError']);

/**
 * MESSAGE_SHAPE (dsh-semantics 2.3) for user/message, assistant/message and tool/result, checked on
 * the canonical view (legacy unwrapped shapes are upgraded first, see message-view.ts). Messages
 * name what is wrong: a missing wrapper, a missing key next to a misspelled one, an unexpected
 * tool-result block type. Content block types are otherwise open (the reference accepts unknown
 * ones).
 */
export function checkMessageShape(type: string, data: Json): void {
  const bad = (what: string): DomainError => fail(Reason.MESSAGE_SHAPE, `${type} ${what}`, { type });
  const legacy = isLegacyShape(type, data);
  // The placeholder session id only feeds the synthetic legacy id, which is never empty.
  const msg = messageOf({ type, seq: 0, data, surfaceOp: 'append' }, '-');
  if (msg === undefined) throw bad(missingMessage(type, data));
  const at = messagePath(type);
  if (!nonEmptyString(msg['id'])) throw bad(`lacks an identified message: ${at}.id must be a non-empty string${'id' in msg ? '' : strayKeys(msg)}`);
  const role = type === 'assistant/message' ? 'assistant' : 'user';
  if (msg['role'] !== role) throw bad(`must have role "${role}"${'role' in msg ? ` (${at}.role is ${JSON.stringify(msg['role'])})` : strayKeys(msg)}`);
  const source = msg['source'];
  if (!isJsonObject(source) || !nonEmptyString(source['kind'])) {
    throw bad(legacy && type === 'assistant/message'
      ? 'has an invalid source: legacy provenance must be an object'
      : `has an invalid source: ${at}.source must be an object with a non-empty kind${'source' in msg ? '' : strayKeys(msg)}`);
  }
  const content = msg['content'];
  if (!Array.isArray(content)) throw bad(`has invalid content: ${at}.content must be an array${'content' in msg ? '' : ` and is missing${strayKeys(msg)}`}`);
  if (type === 'assistant/message') {
    if (source['kind'] !== 'model' || !nonEmptyString(source['provider']) || !nonEmptyString(source['model'])) {
      throw bad('must have model source: {kind:"model", provider, model} with non-empty provider and model');
    }
  } else if (type === 'tool/result') {
    if (source['kind'] !== 'tool' || !nonEmptyString(source['callId'])) {
      throw bad('must have tool source: {kind:"tool", callId} with a non-empty callId');
    }
    const block: unknown = content[0];
    if (content.length !== 1 || !isJsonObject(block) || block['type'] !== 'tool-result' || !Array.isArray(block['content'])) {
      const found = content.length !== 1
        ? `it has ${content.length} blocks`
        : !isJsonObject(block)
          ? 'block 0 is not an object'
          : block['type'] !== 'tool-result'
            ? `block 0 has type ${JSON.stringify(block['type'] ?? null)}`
            : `block 0 content is ${'content' in block ? 'not an array' : `missing${strayBlockKeys(block)}`}`;
      throw bad(`must contain one tool-result block whose content is an array: ${found}`);
    }
    if (block['toolCallId'] !== source['callId']) throw bad('has mismatched tool call ids: the block toolCallId must equal source.callId');
  }
}
