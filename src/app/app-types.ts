/**
 * The app layer's shared vocabulary: limits, the caller context, use-case results, and the small
 * rules every use case applies the same way (session ids, headers, page sizes, event sizes).
 */
import type { CandidateEvent, Json, SessionHeader } from '../domain/event.js';
import { SESSION_FORMAT_VERSION } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { isWellFormedText, type ParsedJsonText } from '../domain/json.js';
import type { SessionRecord } from './store-port.js';
import type { SessionHandle } from './session-handle.js';
import { checkSessionId } from './input-limits.js';

/** Limits enforced by the app (the server adds transport limits). */
export interface AppLimits {
  /** Max events per AppendEvents batch. */
  readonly maxBatchEvents: number;
  /** Max bytes of one event's data (JSON text). */
  readonly maxEventBytes: number;
  /** Max page size of list RPCs. */
  readonly maxPageSize: number;
  /** Default page size of list RPCs. */
  readonly defaultPageSize: number;
  /** Hot sessions kept in memory. */
  readonly cacheMaxSessions: number;
  /** Total events (structural entries) of hot sessions kept in memory. */
  readonly cacheMaxEvents: number;
  /** Per-tenant max sessions (0 = unlimited). */
  readonly tenantMaxSessions: number;
  /** Per-tenant max stored bytes: header + labels JSON + event data (0 = unlimited). */
  readonly tenantMaxBytes: number;
}

/** Sensible production defaults. */
export const DEFAULT_LIMITS: AppLimits = {
  maxBatchEvents: 1000,
  maxEventBytes: 4 * 1024 * 1024,
  maxPageSize: 1000,
  defaultPageSize: 100,
  cacheMaxSessions: 10_000,
  cacheMaxEvents: 20_000_000,
  tenantMaxSessions: 0,
  tenantMaxBytes: 0,
};

/** Who is calling: the tenant that owns what it creates ('' when auth is off). */
export interface CallContext {
  readonly tenant: string;
}

/** The no-auth context. */
export const ANONYMOUS: CallContext = { tenant: '' };

/** Options of an append. */
export interface AppendOptions {
  /** Seq of the last event the client expects (-1 = empty session). */
  readonly expectedLastSeq?: number;
  /** Idempotency key ('' or absent = none). */
  readonly idempotencyKey?: string;
  /** Byte size of each candidate's data as received (for the per-event limit), if known. */
  readonly dataBytes?: readonly number[];
  /**
   * Per candidate (by index): its data is fresh from the caller's JSON.parse of this text and
   * handed over, never used by the caller again (the server's json data form): the domain
   * freezes it in place instead of copying it, and the store writes the text when canonical.
   */
  readonly parsedData?: readonly (ParsedJsonText | undefined)[];
  /** Check the tool-pairing guard even if the session has it off (server-built compaction/prune batches). */
  readonly pairingGuard?: boolean;
  /**
   * What the idempotency record stores instead of the events' hash (server-built batches: the hash
   * of the Compact / PruneToolResults request, see requestBodyHash in append.ts), so a replay compares
   * the request, not the events built from it.
   */
  readonly requestHash?: string;
  /**
   * Called when the call's plan has been handed to the store (its place in the session's order
   * is then fixed: a later call plans on top of it). A caller that keeps a session's calls in
   * order (AppendStream) starts the next one then instead of waiting for this one's commit.
   */
  readonly onPlanned?: () => void;
  /**
   * Awaited before every attempt after the first: the settlement of the call this one was
   * planned behind. A first attempt planned on top of one that then failed cannot commit (its
   * compare-and-set names that one's writer token), so its re-plan waits until that one is
   * settled, and the session's calls keep their order through retries too.
   */
  readonly retryAfter?: Promise<unknown>;
}

/** Result of an append. */
export interface AppendResult {
  readonly seqs: readonly number[];
  readonly replayed: boolean;
  readonly surfaceLength: number;
}

/** A session and its live counts. */
export interface SessionView {
  readonly record: SessionRecord;
  readonly surfaceLength: number;
  readonly headSeq: number | undefined;
  readonly eventCount: number;
  /** Set (ListSessions only) for a session that failed an integrity check: its reads answer DATA_CORRUPTED. */
  readonly damaged?: true;
}

/** A derived message with the event it comes from. */
export interface DerivedMessage {
  readonly seq: number;
  readonly message: Json;
}

/** Logger port (pino in production). */
export interface AppLogger {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Attempts of a use case that re-plans after another writer moved the session. */
export const MAX_ATTEMPTS = 8;
/**
 * Attempts of a read of a hot handle: a read never conflicts, it only waits for the session's
 * writes in flight and starts again when the handle was dropped meanwhile (the session deleted,
 * or another process's write found). A read that goes to the store for the message projection
 * holds the session's writes after one lost race (SessionHandle.readHeld), so steady appends do
 * not use up its attempts (test/unit/read-under-churn.test.ts).
 */
export const READ_ATTEMPTS = 8;
/** Events per store read of the use cases that walk a log. */
export const STORE_READ_BATCH = 2000;

/** SESSION_NOT_FOUND for a client session id. */
export function notFound(id: string): DomainError {
  return new DomainError('SESSION_NOT_FOUND', `session ${JSON.stringify(id)} does not exist`, { sessionId: id });
}

/** CONFLICT_RETRIES_EXHAUSTED after MAX_ATTEMPTS. */
export function retriesExhausted(id: string, what = 'retry'): DomainError {
  return new DomainError('CONFLICT_RETRIES_EXHAUSTED', `session ${id} kept moving under concurrent writers; ${what}`, { sessionId: id });
}

/** Checks a client session id. */
export function checkId(id: string): void {
  checkSessionId(id);
}

/** The header of a new session, from the create request's fields. */
export function buildHeader(h: { id: string; createdAt: number; cwd?: string; origin?: string; delegationDepth?: number; agentPreset?: string }): SessionHeader {
  for (const [field, value] of [['cwd', h.cwd], ['agentPreset', h.agentPreset]] as const) {
    if (value !== undefined && !isWellFormedText(value)) {
      throw new DomainError('HEADER_INVALID', `${field} holds a lone UTF-16 surrogate (it has no UTF-8 form); send well-formed Unicode`, { field });
    }
  }
  const out: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = { version: SESSION_FORMAT_VERSION, id: h.id, createdAt: h.createdAt };
  if (h.cwd !== undefined) {
    if (!h.cwd.startsWith('/')) throw new DomainError('HEADER_INVALID', `cwd ${JSON.stringify(h.cwd)} must be an absolute path`, { field: 'cwd' });
    out.cwd = h.cwd;
  }
  if (h.origin !== undefined) {
    if (h.origin !== 'subagent') throw new DomainError('HEADER_INVALID', `origin ${JSON.stringify(h.origin)} is not supported; the only origin is "subagent"`, { field: 'origin' });
    out.origin = 'subagent';
  }
  // The reference's JSONL header always carries delegationDepth (0 for a top-level session).
  out.delegationDepth = h.delegationDepth ?? 0;
  if (h.agentPreset !== undefined) out.agentPreset = h.agentPreset;
  return out;
}

/** A list page size: the default when absent, PAGE_SIZE_TOO_LARGE above the limit. */
export function pageSizeOf(limits: AppLimits, requested: number | undefined): number {
  if (!requested) return limits.defaultPageSize;
  checkPageSizeLimit(limits, requested);
  return requested;
}

/** PAGE_SIZE_TOO_LARGE above the limit. */
export function checkPageSizeLimit(limits: AppLimits, requested: number): void {
  if (requested > limits.maxPageSize) {
    throw new DomainError('PAGE_SIZE_TOO_LARGE', `page_size ${requested} exceeds the limit ${limits.maxPageSize}`, {
      field: 'page_size', limitName: 'max_page_size', limit: String(limits.maxPageSize), actual: String(requested),
    });
  }
}

/** EVENT_TOO_LARGE for the first candidate whose data exceeds the limit. */
export function checkEventSizes(limits: AppLimits, candidates: readonly CandidateEvent[], sizes: readonly number[] | undefined): void {
  for (let i = 0; i < candidates.length; i++) {
    const size = sizes?.[i] ?? JSON.stringify(candidates[i]?.data ?? null).length;
    if (size > limits.maxEventBytes) {
      throw new DomainError('EVENT_TOO_LARGE', `event ${i} has ${size} bytes of data; the limit is ${limits.maxEventBytes}`, {
        limitName: 'max_event_bytes', limit: String(limits.maxEventBytes), actual: String(size),
      }, i);
    }
  }
}

/** The live view of a hot session. */
export function viewOf(h: SessionHandle): SessionView {
  return {
    record: h.record,
    surfaceLength: h.engine.surfaceLength,
    headSeq: h.engine.eventCount > 0 ? h.engine.nextSeq - 1 : undefined,
    eventCount: h.engine.eventCount,
  };
}
