/**
 * ImportSession over gRPC with replaces thousands of events (several store chunks) after their
 * targets: a prune of a tool result and a compaction are accepted and fold exactly as the domain
 * engine folds the same events; a far-back prune the engine refuses comes back as its own reason
 * and status (not INTERNAL) and leaves no session. Runs on SQLite and (project e2e-postgres)
 * PostgreSQL.
 */
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionEngine } from '../../src/domain/session-engine.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { allEvents, api, failure, replay, type Api } from '../support/e2e.js';
import { toolResultData } from '../support/engine-harness.js';
import { COMPACT_AT, N, PRUNE_AT, baseEvents, goodEvents, jsonl } from '../support/long-import.js';

let t: TestServer;
let a: Api;
beforeAll(async () => {
  t = await startTestServer();
  a = api(t.client);
});
afterAll(async () => { await t.stop(); });

/** The surface the domain engine gives the same events, folded in one batch. */
function folded(events: readonly CandidateEvent[]): number[] {
  const engine = SessionEngine.create();
  const withSeqs = events.map((e, seq) => ({ ...e, seq, time: 2000 + seq }));
  engine.commit(engine.plan(withSeqs, { mode: 'import', now: () => 0, sessionId: 'lb', lookup: () => undefined }));
  return engine.surface();
}

describe('ImportSession looks back over the whole file', () => {
  it('accepts a prune and a compaction of events chunks back; the log and surface are those of the same events folded by the engine', async () => {
    const events = goodEvents();
    const file = jsonl('lb', events);
    const { session } = await a.importSession({ sessionId: 'lb' }, file, 65_536);
    expect(session).toMatchObject({ id: 'lb', eventCount: N });
    const surface = (await a.getSurface({ sessionId: 'lb' })).seqs;
    expect(surface).toEqual(folded(events));
    expect(surface.slice(0, 4)).toEqual([0, 1, PRUNE_AT, COMPACT_AT]);
    expect(replay(await allEvents(a, 'lb')).surface).toEqual(surface);
    // The export gives back the imported events.
    const lines = (await a.exportSession('lb', true)).trimEnd().split('\n').slice(1).map((l) => JSON.parse(l) as unknown);
    expect(lines).toEqual(file.toString('utf8').trimEnd().split('\n').slice(1).map((l) => JSON.parse(l) as unknown));
  });

  it('refuses a prune of a result chunks back that changes its message id with TOOL_RESULT_REPLACE_NON_CONTENT (not INTERNAL), leaving no session', async () => {
    const events = baseEvents();
    events[PRUNE_AT] = { type: 'tool/result', data: toolResultData('c0', '[pruned]', { id: 'another-id' }), surfaceOp: { op: 'replace', start: 2, end: 2 }, sourceEventSeqs: [2] };
    const e = await failure(a.importSession({ sessionId: 'lb-bad' }, jsonl('lb-bad', events), 65_536));
    expect(e).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'TOOL_RESULT_REPLACE_NON_CONTENT', metadata: { line: String(PRUNE_AT + 2), start: '2' } });
    expect(await failure(a.getSession({ sessionId: 'lb-bad' }))).toMatchObject({ code: status.NOT_FOUND, reason: 'SESSION_NOT_FOUND' });
    expect((await a.listSessions({ pageSize: 100 })).sessions.map((s) => s.id)).not.toContain('lb-bad');
  });
});
