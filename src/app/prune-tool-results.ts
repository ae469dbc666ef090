/**
 * PruneToolResults (issue #14): the server builds the reference's prune batch (domain/prune.ts)
 * from one committed state of the session and appends it through the ordinary append path,
 * conditional on that state's head, with the tool-pairing guard on (see compaction.ts).
 */
import type { CandidateEvent, Json, SessionEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { isJsonObject } from '../domain/json.js';
import type { MessageJson } from '../domain/message-view.js';
import { DEFAULT_HEAD_CHARS, DEFAULT_TAIL_CHARS, minThresholdChars, pruneBatch, textBytes, textChars, type PruneMarkerKind } from '../domain/prune.js';
import { requestBodyHash } from './append.js';
import { pairingOf, storedBatch } from './server-batches.js';
import type { CallContext, SessionService } from './session-service.js';

/** PruneToolResults' request. */
export interface PruneRequest {
  readonly seqs?: readonly number[];
  readonly minBytes?: number;
  /** Policy and threshold: results whose text is over this many code points (the reference's thresholdChars). */
  readonly minChars?: number;
  readonly keepRecent?: number;
  readonly excludeTools?: readonly string[];
  readonly headChars?: number;
  readonly tailChars?: number;
  /** Default 'reference' (the fixed marker). */
  readonly marker?: PruneMarkerKind;
  /** Skip a prune that removes fewer code points (Palimpsest's option; default none). */
  readonly minSavingChars?: number;
  readonly expectedLastSeq?: number;
  readonly idempotencyKey?: string;
}

/** One pruned result. */
export interface PrunedResult {
  readonly originalSeq: number;
  readonly pruneSeq: number;
  readonly replacementSeq: number;
  readonly callId: string;
  readonly bytesBefore: number;
  readonly bytesAfter: number;
}

/** PruneToolResults' answer. */
export interface PruneResult {
  readonly pruned: readonly PrunedResult[];
  readonly bytesSaved: number;
  readonly skipped: readonly number[];
  readonly surfaceLength: number;
  readonly replayed: boolean;
}

/** PruneToolResults. */
export async function pruneToolResults(app: SessionService, ctx: CallContext, id: string, req: PruneRequest): Promise<PruneResult> {
  const explicit = req.seqs !== undefined && req.seqs.length > 0;
  const byChars = req.minChars !== undefined && req.minChars > 0;
  if (!explicit && !(req.minBytes !== undefined && req.minBytes > 0) && !byChars) {
    throw new DomainError('INVALID_ARGUMENT', 'say what to prune: seqs, or min_chars > 0 or min_bytes > 0 (with keep_recent / exclude_tools)', { field: 'seqs' });
  }
  const headChars = req.headChars ?? DEFAULT_HEAD_CHARS;
  const tailChars = req.tailChars ?? DEFAULT_TAIL_CHARS;
  const least = minThresholdChars(headChars, tailChars);
  if (byChars && (req.minChars as number) < least) {
    throw new DomainError('INVALID_ARGUMENT',
      `min_chars (${req.minChars}) must be at least head_chars + marker + tail_chars (${least}), as the reference's thresholdChars; raise min_chars or lower head_chars / tail_chars`,
      { field: 'min_chars' });
  }
  const pruneOpts = { headChars, tailChars, thresholdChars: byChars ? req.minChars : undefined, marker: req.marker, minSavingChars: req.minSavingChars };
  const key = req.idempotencyKey || undefined;
  const hash = key ? requestBodyHash('PruneToolResults', { ...req, idempotencyKey: undefined }) : '';
  if (key) {
    const b = await storedBatch(app, ctx, id, key, hash, 'prune');
    if (b) return { ...(await pruneResultOf(app, ctx, b.events, id)), skipped: [], surfaceLength: b.surfaceLength, replayed: true };
  }
  const snap = await app.modelSnapshot(ctx, id, { surface: true, types: true });
  const head = snap.headSeq ?? -1;
  if (req.expectedLastSeq !== undefined && req.expectedLastSeq !== head) {
    throw new DomainError('HEAD_MISMATCH', `expected_last_seq ${req.expectedLastSeq} does not match the session head ${head}; re-read and retry`, {
      sessionId: id, expected: String(req.expectedLastSeq), actual: String(head),
    });
  }
  const surface = snap.surface as number[];
  const types = snap.types as string[];
  const msgs = snap.nodeMessages as (MessageJson | undefined)[];
  let targets: number[];
  if (explicit) {
    const wanted = new Set(req.seqs as readonly number[]);
    const found = new Map<number, string>();
    for (let i = 0; i < surface.length && found.size < wanted.size; i++) if (wanted.has(surface[i] as number)) found.set(surface[i] as number, types[i] as string);
    for (const s of req.seqs as readonly number[]) {
      const t = found.get(s);
      if (t !== 'tool/result') {
        throw new DomainError('PRUNE_TARGET_INVALID', `seq ${s} is not a tool/result on the surface${t !== undefined ? ` (it is ${t})` : ''}; pass seqs from GetSurface`, { seq: String(s) });
      }
    }
    targets = surface.filter((s) => found.has(s));
  } else {
    const names = new Map<string, string>();
    const results: number[] = [];
    for (let i = 0; i < surface.length; i++) {
      const m = msgs[i];
      if (m === undefined) continue;
      const p = pairingOf(m);
      p.calls.forEach((c, j) => names.set(c, p.names[j] ?? ''));
      if (types[i] === 'tool/result') results.push(i);
    }
    const keep = Math.max(0, req.keepRecent ?? 0);
    const exclude = new Set(req.excludeTools ?? []);
    targets = results.slice(0, Math.max(0, results.length - keep)).filter((i) => {
      const m = msgs[i] as MessageJson;
      const callId = pairingOf(m).results[0];
      if (callId !== undefined && exclude.has(names.get(callId) ?? '')) return false;
      const block = Array.isArray(m['content']) ? m['content'][0] : undefined;
      const inner = isJsonObject(block) && Array.isArray(block['content']) ? (block['content'] as Json[]) : [];
      if (req.minBytes !== undefined && req.minBytes > 0 && !(textBytes(inner) > req.minBytes)) return false;
      return !byChars || textChars(inner) > (req.minChars as number);
    }).map((i) => surface[i] as number);
  }
  if (targets.length === 0) return { pruned: [], bytesSaved: 0, skipped: [], surfaceLength: snap.surfaceLength, replayed: false };
  const stored = new Map((await app.store.getEvents(app.storageKey(ctx, id), targets)).map((e) => [e.seq, e] as const));
  const batch = pruneBatch(targets.map((s) => stored.get(s) as SessionEvent), id, pruneOpts);
  if (batch.events.length === 0) return { pruned: [], bytesSaved: 0, skipped: batch.skipped, surfaceLength: snap.surfaceLength, replayed: false };
  const res = await app.append(ctx, id, batch.events as unknown as CandidateEvent[], { expectedLastSeq: head, idempotencyKey: key, pairingGuard: true, requestHash: hash });
  const pruned = batch.entries.map((e) => ({
    originalSeq: e.originalSeq, pruneSeq: res.seqs[e.index] as number, replacementSeq: res.seqs[e.index + 1] as number,
    callId: e.callId, bytesBefore: e.bytesBefore, bytesAfter: e.bytesAfter,
  }));
  return { pruned, bytesSaved: pruned.reduce((a, p) => a + p.bytesBefore - p.bytesAfter, 0), skipped: batch.skipped, surfaceLength: res.surfaceLength, replayed: res.replayed };
}

/** The pruned list of a stored prune batch (idempotent replay), with the originals read back. */
async function pruneResultOf(app: SessionService, ctx: CallContext, events: readonly SessionEvent[], id: string): Promise<{ pruned: PrunedResult[]; bytesSaved: number }> {
  const pairs: { p: SessionEvent; copy: SessionEvent; start: number }[] = [];
  for (let i = 0; i + 1 < events.length; i++) {
    const p = events[i] as SessionEvent;
    const copy = events[i + 1] as SessionEvent;
    if (p.type !== 'compaction/prune' || copy.type !== 'tool/result' || copy.surfaceOp === undefined || copy.surfaceOp === 'append') continue;
    pairs.push({ p, copy, start: copy.surfaceOp.start });
  }
  if (pairs.length === 0) {
    throw new DomainError('IDEMPOTENCY_KEY_REUSED', 'this idempotency key was used for another request (not a prune); use a new key', { sessionId: id });
  }
  const originals = new Map((await app.store.getEvents(app.storageKey(ctx, id), pairs.map((x) => x.start))).map((e) => [e.seq, e] as const));
  const pruned = pairs.map(({ p, copy, start }) => {
    const o = originals.get(start);
    const after = innerTextBytes(copy);
    return { originalSeq: start, pruneSeq: p.seq, replacementSeq: copy.seq, callId: callIdOf(copy), bytesBefore: o === undefined ? after : innerTextBytes(o), bytesAfter: after };
  });
  return { pruned, bytesSaved: pruned.reduce((a, x) => a + x.bytesBefore - x.bytesAfter, 0) };
}

function innerTextBytes(e: SessionEvent): number {
  const d = e.data;
  if (!isJsonObject(d)) return 0;
  const m = isJsonObject(d['message']) ? d['message'] : undefined;
  const block = m && Array.isArray(m['content']) ? m['content'][0] : undefined;
  const inner = isJsonObject(block) && Array.isArray(block['content']) ? block['content'] : Array.isArray(d['content']) ? d['content'] : [];
  return textBytes(inner as Json[]);
}

function callIdOf(e: SessionEvent): string {
  const d = e.data;
  const m = isJsonObject(d) && isJsonObject(d['message']) ? d['message'] : undefined;
  const src = m && isJsonObject(m['source']) ? m['source'] : undefined;
  if (src && typeof src['callId'] === 'string') return src['callId'];
  return isJsonObject(d) && typeof d['callId'] === 'string' ? d['callId'] : '';
}
