/**
 * Every event of the 36 reference session logs (DeepSeek Harness JSONL, including legacy
 * unwrapped shapes, packed chunk rows and the seq gaps of cordis-tool-round) is accepted by the
 * engine in import mode, and gapless logs are accepted on the live-append path too.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { deriveMessages, MessageProjection } from '../../src/domain/derive.js';
import type { CandidateEvent, SessionEvent } from '../../src/domain/event.js';
import { decodeJsonl } from '../../src/domain/jsonl-reader.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import { naiveFold } from '../support/naive-surface.js';

const DIR = new URL('../fixtures/reference-sessions', import.meta.url).pathname;
const files = readdirSync(DIR).filter((f) => f.endsWith('.jsonl')).sort();

function load(file: string): { id: string; events: CandidateEvent[] } {
  const { header, events } = decodeJsonl(readFileSync(join(DIR, file), 'utf8'));
  return { id: header.id, events };
}

describe('reference fixtures', () => {
  it('has all 36 files', () => {
    expect(files).toHaveLength(36);
  });

  it.each(files)('given %s, when imported as one batch, then every event is accepted and the surface matches the naive fold', (file) => {
    const { id, events } = load(file);
    const engine = SessionEngine.create();
    const byseq = new Map<number, SessionEvent>();
    // Only the UI snapshot cordis-tool-round has seq gaps (elided chunks): it needs allowSeqGaps.
    const plan = engine.plan(events, { mode: 'import', now: () => 0, sessionId: id, lookup: (s) => byseq.get(s), allowSeqGaps: file === 'cordis-tool-round.jsonl' });
    engine.commit(plan);
    for (const e of plan.events) byseq.set(e.seq, e);
    expect(engine.eventCount).toBe(events.length);
    const naive = naiveFold(plan.events);
    expect(engine.surface()).toEqual(naive.surface);
    expect(engine.replaceGeneration).toBe(naive.replaceGeneration);
    // Events are stored verbatim (lossless): same JSON as the decoded candidates.
    expect(JSON.parse(JSON.stringify(plan.events))).toEqual(JSON.parse(JSON.stringify(events)));
    // Cold open from structural columns rebuilds the same state.
    const cold = SessionEngine.create();
    cold.loadStructural(plan.events);
    expect([cold.surface(), cold.nextSeq, cold.eventCount, cold.replaceGeneration]).toEqual([engine.surface(), engine.nextSeq, engine.eventCount, engine.replaceGeneration]);
    // Model history: every surface node projects, legacy ones with upgraded ids.
    const messages = deriveMessages(engine.surface(), (s) => byseq.get(s), id);
    for (const m of messages) expect(typeof m['id']).toBe('string');
    const projection = new MessageProjection(id);
    projection.hydrate([], 0);
    projection.apply(plan);
    expect(projection.history()).toEqual(messages);
  });

  it.each(files.filter((f) => f !== 'cordis-tool-round.jsonl'))('given %s, when replayed through live append (seq and time omitted), then accepted too', (file) => {
    const { id, events } = load(file);
    const engine = SessionEngine.create();
    const byseq = new Map<number, SessionEvent>();
    for (const c of events) {
      const { seq: _seq, time: _time, ...rest } = c;
      const plan = engine.plan([rest as CandidateEvent], { mode: 'append', now: () => 0, sessionId: id, lookup: (s) => byseq.get(s) });
      engine.commit(plan);
      for (const e of plan.events) byseq.set(e.seq, e);
    }
    expect(engine.nextSeq).toBe(events.length);
  });

  it('given cordis-tool-round.jsonl (seq gaps), then refused as SEQ_NOT_CONTIGUOUS by default; with allowSeqGaps nextSeq and eventCount differ and chunk citations of elided seqs pass', () => {
    const { id, events } = load('cordis-tool-round.jsonl');
    const engine = SessionEngine.create();
    expect(() => engine.plan(events, { mode: 'import', now: () => 0, sessionId: id, lookup: () => undefined })).toThrow(expect.objectContaining({ reason: 'SEQ_NOT_CONTIGUOUS' }));
    engine.commit(engine.plan(events, { mode: 'import', now: () => 0, sessionId: id, lookup: () => undefined, allowSeqGaps: true }));
    expect(engine.eventCount).toBe(60);
    expect(engine.nextSeq).toBe(263);
  });

  it('given compaction-recovery.jsonl, then the summary user/message replaced seq 4 and the history uses legacy ids where needed', () => {
    const { id, events } = load('compaction-recovery.jsonl');
    const engine = SessionEngine.create();
    const plan = engine.plan(events, { mode: 'import', now: () => 0, sessionId: id, lookup: () => undefined });
    engine.commit(plan);
    expect(engine.isOnSurface(4)).toBe(false);
    expect(engine.isOnSurface(21)).toBe(true);
    expect(plan.deltas[21]).toMatchObject({ kind: 'replace', start: 4, end: 4, shadowed: [4] });
  });

  it('given multi-turn-conversation.jsonl (legacy shapes), then its messages carry legacy-message ids', () => {
    const { id, events } = load('multi-turn-conversation.jsonl');
    const engine = SessionEngine.create();
    const byseq = new Map<number, SessionEvent>();
    const plan = engine.plan(events, { mode: 'import', now: () => 0, sessionId: id, lookup: () => undefined });
    engine.commit(plan);
    for (const e of plan.events) byseq.set(e.seq, e);
    const messages = deriveMessages(engine.surface(), (s) => byseq.get(s), id);
    expect(messages[0]).toMatchObject({ id: `legacy-message:${id}:1`, role: 'user' });
    expect(messages[1]).toMatchObject({ role: 'assistant', source: { kind: 'model', provider: 'deepseek-official' } });
  });
});
