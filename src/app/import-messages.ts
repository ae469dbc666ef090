/**
 * ImportMessages (issue #34): a conversation in a provider's format written as the reference's
 * events (domain/render/provider-import.ts), appended in one atomic batch at the session's head.
 * The events carry explicit seqs (a tool/result cites its tool/call), so the append is conditional
 * on the head they were numbered from; another writer in between makes it renumber and retry.
 */
import { DomainError } from '../domain/errors.js';
import type { Json } from '../domain/event.js';
import type { ProviderFormat } from '../domain/render/index.js';
import { IMPORT_MESSAGES_INVALID, importProviderMessages, resultCallIds } from '../domain/render/provider-import.js';
import { isJsonObject } from '../domain/json.js';
import type { SessionStore } from './store-port.js';

/** How many of the latest tool/call events a result of an import may answer. */
const RECENT_CALLS = 256;
import { MAX_ATTEMPTS, retriesExhausted, type AppendResult, type CallContext } from './app-types.js';
import type { SessionCache } from './session-cache.js';
import type { CandidateEvent } from '../domain/event.js';

/** What ImportMessages asks for. */
export interface ImportMessagesQuery {
  readonly format: ProviderFormat;
  /** The provider messages as one JSON array text. */
  readonly messagesJson: string;
  readonly provider?: string;
  readonly model?: string;
}

/** Appends `q`'s conversation to session `id`. */
export async function importMessages(
  store: SessionStore,
  cache: SessionCache,
  append: (ctx: CallContext, id: string, events: CandidateEvent[], opts: { expectedLastSeq: number }) => Promise<AppendResult>,
  ctx: CallContext,
  id: string,
  q: ImportMessagesQuery,
): Promise<{ seqs: number[]; headSeq: number }> {
  let messages: Json;
  try {
    messages = JSON.parse(q.messagesJson) as Json;
  } catch {
    throw new DomainError(IMPORT_MESSAGES_INVALID, 'messages_json is not JSON; pass the provider messages as one JSON array', { index: '-1', field: 'messages_json' });
  }
  const wanted = new Set(resultCallIds(q.format, messages));
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const { nextSeq, recent, key } = await cache.withRead(ctx, id, (h) => ({ nextSeq: h.engine.nextSeq, recent: wanted.size === 0 ? [] : h.engine.lastSeqsOfTypes(['tool/call'], RECENT_CALLS), key: h.id }));
    // Results may answer calls of an earlier batch (an agent saving a turn in parts): the recent
    // tool/call events name them.
    const knownCalls = new Map<string, number>();
    if (recent.length > 0) {
      for (const e of await store.getEvents(key, [...recent].sort((x, y) => x - y))) {
        const callId = isJsonObject(e.data) ? e.data['callId'] : undefined;
        if (typeof callId === 'string' && wanted.has(callId)) knownCalls.set(callId, e.seq);
      }
    }
    const events = importProviderMessages(q.format, messages, { sessionId: id, nextSeq, provider: q.provider, model: q.model, knownCalls });
    if (events.length === 0) return { seqs: [], headSeq: nextSeq - 1 };
    try {
      const res = await append(ctx, id, events, { expectedLastSeq: nextSeq - 1 });
      return { seqs: [...res.seqs], headSeq: res.seqs[res.seqs.length - 1] as number };
    } catch (e) {
      if (e instanceof DomainError && e.reason === 'HEAD_MISMATCH') continue;
      throw e;
    }
  }
  throw retriesExhausted(id, 'retry the import');
}
