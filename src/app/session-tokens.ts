/**
 * A session's token counts (issue #34 item 4): `surfaceTokens`, the model history's estimated
 * size now (the one estimator, domain/token-estimate.ts, over the surface's messages), and
 * `usage`, the sums of the usage recorded in every assistant/message of the log.
 *
 * The surface comes from the hot session's snapshot (message objects are cached, so are their
 * estimates). Usage is kept incrementally per session record object (which lives as long as its
 * cached handle): a call reads only the assistant/message events after the last one it summed.
 */
import type { CallContext, SessionService } from './session-service.js';
import { addAssistantUsage, estimateMessageTokens, NO_USAGE, type UsageTotals } from '../domain/token-estimate.js';

/** A session's token counts. */
export interface SessionTokens {
  readonly surfaceTokens: number;
  readonly usage: UsageTotals;
}

const READ_BATCH = 1000;
const ASSISTANT_USAGE_TYPES = ['assistant/message'] as const;
const usageCache = new WeakMap<object, { through: number; totals: UsageTotals }>();

/** The token counts of session `id` now. */
export async function sessionTokens(app: SessionService, ctx: CallContext, id: string): Promise<SessionTokens> {
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
