/**
 * UpdateSession (issue #35): sets and removes labels, with the limits of CreateSession applied to
 * the result, optionally only while the session's metadata is at `expectedVersion`
 * (METADATA_VERSION_MISMATCH otherwise, nothing changed). The store writes it as a
 * compare-and-set on the metadata version in one transaction, which also records
 * `labels_changed` in the session feed. Retention reads the `palimpsest.dev/ttl-days` label from
 * the store at each sweep, so a changed value applies from the next sweep.
 */
import { DomainError } from '../domain/errors.js';
import { notFound, type CallContext } from './app-types.js';
import { checkLabels } from './input-limits.js';
import type { SessionCache } from './session-cache.js';
import type { SessionStore } from './store-port.js';
import { storageKey } from './tenant-scope.js';

/** What UpdateSession asks for. */
export interface UpdateSessionRequest {
  /** Labels to set (added or overwritten). */
  readonly setLabels?: Readonly<Record<string, string>>;
  /** Label keys to remove (absent keys are ignored). */
  readonly removeLabels?: readonly string[];
  /** Change only while the metadata version is this one. */
  readonly expectedVersion?: number;
}

/** Unconditional updates retried after losing a race with another update. */
const MAX_ATTEMPTS = 5;

function mismatch(id: string, expected: number, actual: number): DomainError {
  return new DomainError('METADATA_VERSION_MISMATCH',
    `session ${JSON.stringify(id)} has metadata version ${actual}, not ${expected}: it changed meanwhile; read it again (GetSession) and retry with its metadata_version`,
    { sessionId: id, expectedVersion: String(expected), actualVersion: String(actual) });
}

/** Applies the update; resolves once committed. */
export async function updateSession(store: SessionStore, cache: SessionCache, ctx: CallContext, id: string, req: UpdateSessionRequest): Promise<void> {
  const set = req.setLabels ?? {};
  const remove = req.removeLabels ?? [];
  checkLabels(set, 'set_labels');
  for (const k of remove) {
    if (Object.hasOwn(set, k)) {
      throw new DomainError('INVALID_ARGUMENT', `label ${JSON.stringify(k)} is both set and removed; send it in one of set_labels or remove_labels`, { field: 'remove_labels' });
    }
  }
  const key = storageKey(ctx.tenant, id);
  for (let attempt = 0; ; attempt++) {
    const rec = await cache.record(ctx, id);
    if (req.expectedVersion !== undefined && rec.metadataVersion !== req.expectedVersion) throw mismatch(id, req.expectedVersion, rec.metadataVersion);
    const labels: Record<string, string> = { ...rec.labels, ...set };
    for (const k of remove) delete labels[k];
    checkLabels(labels, 'labels');
    const outcome = await store.updateLabels(key, labels, rec.metadataVersion);
    if (outcome.kind === 'not-found') throw notFound(id);
    if (outcome.kind === 'updated') {
      // A hot handle keeps its record: give it the new labels (reads answer from it).
      const h = cache.peek(key);
      if (h !== undefined && h.record.metadataVersion === rec.metadataVersion) h.record = { ...h.record, labels, metadataVersion: rec.metadataVersion + 1 };
      return;
    }
    if (req.expectedVersion !== undefined) throw mismatch(id, req.expectedVersion, outcome.actual);
    if (attempt + 1 >= MAX_ATTEMPTS) {
      throw new DomainError('CONFLICT_RETRIES_EXHAUSTED', `session ${JSON.stringify(id)}: its labels kept changing under this update; retry`, { sessionId: id });
    }
  }
}
