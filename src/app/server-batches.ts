/**
 * What the server-built batches (compaction.ts, prune-tool-results.ts) share: the batch stored
 * under an idempotency key, and the tool-pairing facts of a message (cached per message object).
 */
import { DomainError } from '../domain/errors.js';
import type { SessionEvent } from '../domain/event.js';
import type { MessageJson } from '../domain/message-view.js';
import { pairingInfoOfMessage, type PairingInfo } from '../domain/tool-pairing.js';
import type { CallContext, SessionService } from './session-service.js';

const pairingCache = new WeakMap<object, PairingInfo>();

export function pairingOf(m: MessageJson): PairingInfo {
  let p = pairingCache.get(m);
  if (p === undefined) {
    p = pairingInfoOfMessage(m);
    pairingCache.set(m, p);
  }
  return p;
}

/** The batch stored under `key`, if any; IDEMPOTENCY_KEY_REUSED when it was stored for another request body. */
export async function storedBatch(app: SessionService, ctx: CallContext, id: string, key: string, hash: string, what: string): Promise<{ events: SessionEvent[]; surfaceLength: number } | undefined> {
  const skey = app.storageKey(ctx, id);
  const stored = await app.store.getIdempotent(skey, key);
  if (!stored) return undefined;
  if (stored.requestHash !== hash) {
    throw new DomainError('IDEMPOTENCY_KEY_REUSED',
      `idempotency key ${JSON.stringify(key)} was already used with a different request; use a new key for a new ${what}`,
      { sessionId: id, idempotencyKey: key });
  }
  const events = await app.store.getEvents(skey, stored.seqs);
  return { events, surfaceLength: stored.surfaceLength };
}

