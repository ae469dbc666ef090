/**
 * The reference search index (issue #40), the memory store's: no index at all, a scan of the tenant's events through
 * the store port at every query, applying the domain's definitions (search-text.ts for what is
 * searchable, search-match.ts and search-fields.ts for what matches). The memory store uses it;
 * the SQLite and PostgreSQL indexes must find exactly what it finds. O(the tenant's events) per
 * query: for tests and small in-memory servers.
 */
import type { SearchCandidate, SearchCandidateQuery, SearchIndex, SearchIndexReport } from './search-port.js';
import type { SessionStore } from './store-port.js';
import { fieldsMatch } from '../domain/search-fields.js';
import { termsMatch } from '../domain/search-match.js';
import { searchTokenSpans } from '../domain/search-query.js';
import { searchDoc } from '../domain/search-text.js';

const SCAN_BATCH = 1000;

/** Newest-first order: time, session key, seq, all descending. */
export function compareNewest(a: { time: number; sessionId: string; seq: number }, b: { time: number; sessionId: string; seq: number }): number {
  if (a.time !== b.time) return b.time - a.time;
  if (a.sessionId !== b.sessionId) return a.sessionId < b.sessionId ? 1 : -1;
  return b.seq - a.seq;
}

/** The scan index over a store. */
export class ScanSearchIndex implements SearchIndex {
  constructor(private readonly store: SessionStore) {}

  async searchCandidates(q: SearchCandidateQuery): Promise<SearchCandidate[]> {
    const hits: SearchCandidate[] = [];
    const types = new Set(q.types);
    const only = new Set(q.sessionIds);
    let pageToken: string | undefined;
    do {
      const page = await this.store.listSessions({ tenant: q.tenant, labels: q.labels, pageSize: SCAN_BATCH, pageToken });
      pageToken = page.nextPageToken || undefined;
      for (const rec of page.sessions) {
        const sessionId = rec.header.id;
        if (rec.tenant !== q.tenant || (only.size > 0 && !only.has(sessionId))) continue;
        const found: SearchCandidate[] = [];
        let replaced = false;
        const calls = new Map<string, string>();
        // The stored form, as the SQLite index reads it: a value kept as a blob is not searchable.
        const scan = this.store.scanStoredEvents?.(sessionId, 0, SCAN_BATCH) ?? this.store.scanEvents(sessionId, 0, SCAN_BATCH);
        for await (const batch of scan) {
          for (const e of batch) {
            const doc = searchDoc(e.type, e.data);
            if (doc === undefined) continue;
            if (typeof e.surfaceOp === 'object') replaced = true;
            const { text, calls: own, callId } = doc;
            const answered = callId === undefined ? undefined : calls.get(callId);
            for (const [id, name] of own) calls.set(id, name);
            const tools = answered === undefined ? own.map(([, n]) => n) : [answered];
            if (types.size > 0 && !types.has(e.type)) continue;
            if (q.fromTime !== undefined && e.time < q.fromTime) continue;
            if (q.toTime !== undefined && e.time >= q.toTime) continue;
            if (q.tool !== undefined && !tools.includes(q.tool)) continue;
            if (!fieldsMatch(q.query.fields, { type: e.type, tools, sessionId, labels: rec.labels })) continue;
            const spans = searchTokenSpans(text);
            if (!termsMatch(q.query.terms, spans)) continue;
            let score = 0;
            for (const t of q.query.terms) if (!t.negated) score += t.tokens.length;
            found.push({ sessionId, seq: e.seq, type: e.type, time: e.time, text, score: score / (1 + spans.length / 100), entered: e.surfaceOp !== undefined, sessionReplaced: false });
          }
        }
        for (const f of found) hits.push({ ...f, sessionReplaced: replaced });
      }
    } while (pageToken !== undefined);
    if (q.order === 'newest') {
      hits.sort(compareNewest);
      const after = q.after;
      const start = after?.kind === 'newest' ? hits.findIndex((h) => compareNewest(h, after) > 0) : 0;
      return start < 0 ? [] : hits.slice(start, start + q.limit);
    }
    hits.sort((a, b) => b.score - a.score || compareNewest(a, b));
    const offset = q.after?.kind === 'score' ? q.after.offset : 0;
    return hits.slice(offset, offset + q.limit);
  }

  /** Nothing is stored, so nothing to rebuild: reports the sessions and events it would scan. */
  reindex(): Promise<{ sessions: number; events: number }> {
    return Promise.resolve({ sessions: 0, events: 0 });
  }

  verifyIndex(): Promise<SearchIndexReport> {
    return Promise.resolve({ events: 0, problems: [] });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
