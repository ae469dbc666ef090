/**
 * Checks run on every decoded request before it reaches the interceptor's caller resolution or
 * a handler (see safe-decode.ts): the strings the server looks up, stores or may echo (session
 * ids, labels, header strings, page tokens, event types, idempotency keys) are bounded here, so
 * no later step ever holds or echoes an unbounded one. The rules themselves live in
 * src/app/input-limits.ts (the use cases apply them on their non-gRPC paths too).
 */
import { DomainError } from '../domain/errors.js';
import {
  MAX_AGENT_PRESET_BYTES, MAX_CWD_BYTES, MAX_ORIGIN_BYTES, MAX_PAGE_TOKEN_BYTES, MAX_TYPE_FILTERS,
  checkAppendOptions, checkEventTypes, checkLabels, checkLength, checkSessionId,
} from '../app/input-limits.js';

type Req = Record<string, unknown>;

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function labels(v: unknown): Record<string, string> | undefined {
  return typeof v === 'object' && v !== null ? (v as Record<string, string>) : undefined;
}

function pageToken(r: Req): void {
  const t = str(r.pageToken);
  if (t) checkLength(t, 'page_token', 'a page token', 'max_page_token_bytes', MAX_PAGE_TOKEN_BYTES);
}

/** Checks per SessionService method (by method name); a request field that is absent is skipped. */
const CHECKS: Readonly<Record<string, (r: Req) => void>> = {
  CreateSession(r) {
    const id = str(r.sessionId);
    if (id) checkSessionId(id);
    checkLabels(labels(r.labels));
    const cwd = str(r.cwd);
    if (cwd !== undefined) checkLength(cwd, 'cwd', 'cwd', 'max_cwd_bytes', MAX_CWD_BYTES);
    const origin = str(r.origin);
    if (origin !== undefined) checkLength(origin, 'origin', 'origin', 'max_origin_bytes', MAX_ORIGIN_BYTES);
    const preset = str(r.agentPreset);
    if (preset !== undefined) checkLength(preset, 'agent_preset', 'agent_preset', 'max_agent_preset_bytes', MAX_AGENT_PRESET_BYTES);
  },
  ListSessions(r) {
    checkLabels(labels(r.labelSelector), 'label_selector');
    pageToken(r);
  },
  AppendEvents(r) {
    sessionId(r);
    const events = Array.isArray(r.events) ? (r.events as { type: string }[]) : [];
    checkEventTypes(events);
    checkAppendOptions({ expectedLastSeq: r.expectedLastSeq as number | undefined, idempotencyKey: str(r.idempotencyKey) });
  },
  // Each batch is checked by the handler, so that a refused batch fails alone (append-stream-handler.ts).
  AppendStream() {},
  ListEvents(r) {
    sessionId(r);
    pageToken(r);
    const types = Array.isArray(r.types) ? (r.types as string[]) : [];
    if (types.length > MAX_TYPE_FILTERS) {
      throw new DomainError('INVALID_ARGUMENT', `types has ${types.length} entries; the limit is ${MAX_TYPE_FILTERS}`, {
        field: 'types', limitName: 'max_type_filters', limit: String(MAX_TYPE_FILTERS), actual: String(types.length),
      });
    }
    checkEventTypes(types.map((type) => ({ type })), (i) => `types[${i}]`);
  },
  GetMessages(r) {
    sessionId(r);
    pageToken(r);
  },
  ForkSession(r) {
    sessionId(r);
    const child = str(r.childSessionId);
    if (child) checkSessionId(child, 'child_session_id');
    checkLabels(labels(r.labels));
  },
  Compact(r) {
    sessionId(r);
    checkAppendOptions({ expectedLastSeq: r.expectedLastSeq as number | undefined, idempotencyKey: str(r.idempotencyKey) });
  },
  PruneToolResults(r) {
    sessionId(r);
    checkAppendOptions({ expectedLastSeq: r.expectedLastSeq as number | undefined, idempotencyKey: str(r.idempotencyKey) });
  },
  ImportSession(r) {
    const part = r.part as { $case?: string; value?: Req } | undefined;
    if (part?.$case !== 'options' || !part.value) return;
    const id = str(part.value.sessionId);
    if (id) checkSessionId(id, 'options.session_id');
    checkLabels(labels(part.value.labels), 'options.labels');
  },
};

function sessionId(r: Req): void {
  const id = str(r.sessionId);
  // Empty stays for the handler ("session_id is required").
  if (id) checkSessionId(id);
}

/**
 * The request's first broken bound as a DomainError, or undefined. `path` is the gRPC method path
 * (`/palimpsest.v1.SessionService/GetSession`); other services are not checked.
 */
export function checkRequest(path: string, request: unknown): DomainError | undefined {
  if (!path.startsWith('/palimpsest.v1.SessionService/') || typeof request !== 'object' || request === null) return undefined;
  const name = path.slice(path.lastIndexOf('/') + 1);
  const check = CHECKS[name] ?? sessionId;
  try {
    check(request as Req);
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  return undefined;
}
