/**
 * A session's token counts (issue #34 item 4): `surfaceTokens`, the model history's estimated
 * size now (the one estimator, domain/token-estimate.ts, over the surface's messages), and
 * `usage`, the sums of the usage recorded in every assistant/message of the log.
 *
 * With a store that keeps each event's token figures (TokenFigureReads, domain/event-tokens.ts;
 * issue #37) no event data is read: `surfaceTokens` is the sum of the figures of the surface's
 * seqs (from the hot session's engine) and `usage` the sum of the usage texts in seq order. The
 * figures are kept per cached handle, densely by seq, and a call reads only those after the last
 * seq it has (a cold open reads them all, from the structural index). Events whose figures the
 * store does not know (data holding blob references) are read and estimated here.
 *
 * Without that capability the surface comes from the hot session's
 * snapshot (message objects are cached, so are their estimates) and usage is read from the
 * assistant/message events after the last one summed.
 */
import type { CallContext, SessionService } from './session-service.js';
import { hasTokenFigureReads, type TokenFigureReads, type TokenFigureRows } from './ports/capabilities.js';
import { addUsageText, eventTokenFigures } from '../domain/event-tokens.js';
import { addAssistantUsage, estimateMessageTokens, NO_USAGE, type UsageTotals } from '../domain/token-estimate.js';

/** A session's token counts. */
export interface SessionTokens {
  readonly surfaceTokens: number;
  readonly usage: UsageTotals;
}

const READ_BATCH = 1000;
const ASSISTANT_USAGE_TYPES = ['assistant/message'] as const;
const usageCache = new WeakMap<object, { through: number; totals: UsageTotals }>();

/** The figures of one handle's log up to `through`: tokens by seq (0 where none) and the usage sums. */
interface FigureState {
  through: number;
  tokens: number[];
  totals: UsageTotals;
}
const figureCache = new WeakMap<object, FigureState>();

/** tokens[seq] = t, the array kept dense (filled with 0 up to seq: a far index would turn it into a dictionary). */
function setFigure(tokens: number[], seq: number, t: number): void {
  while (tokens.length < seq) tokens.push(0);
  tokens[seq] = t;
}

/** The token counts of session `id` now. */
export async function sessionTokens(app: SessionService, ctx: CallContext, id: string): Promise<SessionTokens> {
  const store = app.store;
  if (hasTokenFigureReads(store)) {
    const now = await app.cache.withRead(ctx, id, (h) => ({ h, surface: h.engine.surface(), head: h.engine.eventCount > 0 ? h.engine.nextSeq - 1 : -1 }));
    return fromFigures(app, store, app.storageKey(ctx, id), now.h, now.surface, now.head);
  }
  return fromEvents(app, ctx, id);
}

async function fromFigures(app: SessionService, store: TokenFigureReads, key: string, handle: object, surface: readonly number[], head: number): Promise<SessionTokens> {
  let state = figureCache.get(handle);
  if (state === undefined || state.through > head) state = { through: -1, tokens: [], totals: NO_USAGE };
  if (state.through < head) {
    const rows = await store.readTokenFigures(key, state.through + 1);
    // Filled in place: a concurrent call writes the same figure for the same seq.
    const tokens = state.tokens;
    let totals = state.totals;
    const unknown: number[] = [];
    for (let i = 0; i < rows.seqs.length; i++) {
      const seq = rows.seqs[i]!;
      if (seq > head) break;
      const t = rows.tokens[i]!;
      if (t < 0) {
        unknown.push(seq);
        continue;
      }
      setFigure(tokens, seq, t);
      const u = rows.usage[i]!;
      if (u !== '') totals = addUsageText(totals, u);
    }
    if (unknown.length > 0) totals = await addUnknown(app, key, unknown, tokens, state.totals, rows, head);
    state = { through: head, tokens, totals };
    figureCache.set(handle, state);
  }
  let surfaceTokens = 0;
  for (const seq of surface) surfaceTokens += state.tokens[seq] ?? 0;
  return { surfaceTokens, usage: state.totals };
}

/**
 * The figures of the events whose figures the store does not know, from their data: usage sums
 * again in seq order (the sums are those of the data, floating point included), from `base`.
 */
async function addUnknown(
  app: SessionService, key: string, unknown: readonly number[], tokens: number[], base: UsageTotals,
  rows: TokenFigureRows, head: number,
): Promise<UsageTotals> {
  const events = new Map((await app.store.getEvents(key, unknown)).map((e) => [e.seq, e] as const));
  let totals = base;
  for (let i = 0; i < rows.seqs.length; i++) {
    const seq = rows.seqs[i]!;
    if (seq > head) break;
    if (rows.tokens[i]! >= 0) {
      if (rows.usage[i] !== '') totals = addUsageText(totals, rows.usage[i]!);
      continue;
    }
    const e = events.get(seq);
    if (e === undefined) continue;
    const f = eventTokenFigures(e);
    setFigure(tokens, seq, f.tokens);
    if (f.usage !== undefined) totals = addUsageText(totals, f.usage);
  }
  return totals;
}

async function fromEvents(app: SessionService, ctx: CallContext, id: string): Promise<SessionTokens> {
  const snap = await app.modelSnapshot(ctx, id, { surface: true });
  let surfaceTokens = 0;
  for (const m of snap.nodeMessages ?? []) surfaceTokens += estimateMessageTokens(m);
  const head = snap.headSeq ?? -1;
  let cached = usageCache.get(snap.record);
  if (cached === undefined || cached.through > head) cached = { through: -1, totals: NO_USAGE };
  let { through, totals } = cached;
  const key = app.storageKey(ctx, id);
  while (through < head) {
    const events = await app.store.readEvents(key, { fromSeq: through + 1, direction: 'forward', limit: READ_BATCH, types: ASSISTANT_USAGE_TYPES });
    for (const e of events) {
      if (e.seq > head) break;
      totals = addAssistantUsage(totals, e.data);
    }
    const last = events[events.length - 1];
    through = events.length < READ_BATCH || last === undefined ? head : Math.min(last.seq, head);
  }
  usageCache.set(snap.record, { through, totals });
  return { surfaceTokens, usage: totals };
}
