/**
 * SessionEngine behaviour beyond single rules: batches, purity of plan(), commit, cold load,
 * dataDependencies, legacy ids through replacements.
 */
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { dataDependencies } from '../../src/domain/replace-chains.js';
import { SessionEngine, StructureCorruptError } from '../../src/domain/session-engine.js';
import { messageView } from '../../src/domain/message-view.js';
import { Harness, assistant, logEvent, rep, snapshot, toolResult, toolResultData, user } from '../support/engine-harness.js';

describe('batches', () => {
  it('given a batch that cites and replaces its own earlier events, then each candidate sees the state left by the previous ones', () => {
    const h = new Harness();
    const p = h.add([
      logEvent('turn/start', { turn: 1 }), // 0
      user('a'), // 1
      logEvent('tool/call', { turn: 1, step: 1, callId: 'c', name: 'bash', arguments: '{}' }), // 2
      toolResult('c', 'long', { sourceEventSeqs: [2] }), // 3
      logEvent('compaction/prune', { shadowedRange: { start: 3, end: 3 }, shadowedSeqs: [3], shadowedTokenCount: 9 }), // 4
      toolResult('c', 'short', { surfaceOp: rep(3, 3), sourceEventSeqs: [3] }), // 5
      user('summary', rep(1, 5), { sourceEventSeqs: [1, 5] }), // 6
    ]);
    expect(p.deltas.map((d) => d.kind)).toEqual(['none', 'append', 'none', 'append', 'none', 'replace', 'replace']);
    expect(p.deltas[6]).toEqual({ kind: 'replace', seq: 6, start: 1, end: 5, shadowed: [1, 5], index: 0 });
    expect(h.engine.surface()).toEqual([6]);
    expect(h.engine.replaceGeneration).toBe(2);
  });

  it('given a batch of events without a time, then they share one reading of the clock; given times are kept and read no clock', () => {
    let reads = 0;
    const ctx = { mode: 'append' as const, now: () => 1_000 + reads++, sessionId: 's', lookup: () => undefined };
    const engine = SessionEngine.create();
    const plan = engine.plan([user('a'), { type: 'x/y', data: 1, time: 7 }, user('b'), { type: 'x/y', data: 2 }], ctx);
    expect(plan.events.map((e) => e.time)).toEqual([1_000, 7, 1_000, 1_000]);
    expect(reads).toBe(1);
    engine.commit(plan);
    expect(engine.plan([{ type: 'x/y', data: 3, time: 9 }], ctx).events[0]!.time).toBe(9);
    expect(reads).toBe(1);
    // The next batch reads the clock again.
    expect(engine.plan([user('c')], ctx).events[0]!.time).toBe(1_001);
  });

  it('given a batch whose 3rd candidate fails, then nothing of the batch is applied and the error names index 2', () => {
    const h = new Harness();
    h.add(user('x'));
    h.expectReject([user('a'), user('b', rep(1, 1), { sourceEventSeqs: [1] }), user('c', rep(1, 1), { sourceEventSeqs: [1] })], 'REPLACE_START_NOT_ON_SURFACE', 2);
  });

  it('plan() is pure: planning twice and committing the second plan works; a stale plan is refused', () => {
    const h = new Harness();
    h.add([user('a'), user('b')]);
    const before = snapshot(h.engine);
    const p1 = h.plan([user('c', rep(0, 1), { sourceEventSeqs: [0, 1] })]);
    const p2 = h.plan([user('d', rep(0, 1), { sourceEventSeqs: [0, 1] })]);
    expect(snapshot(h.engine)).toEqual(before);
    h.commit(p2);
    expect(h.engine.surface()).toEqual([2]);
    expect(() => h.engine.commit(p1)).toThrow(/stale plan/);
    expect(h.engine.surface()).toEqual([2]);
  });

  it('given an empty batch, then the plan is empty and commit is a no-op', () => {
    const h = new Harness();
    const p = h.plan([]);
    expect(p).toMatchObject({ baseNextSeq: 0, events: [], deltas: [] });
    h.commit(p);
    expect(h.engine.nextSeq).toBe(0);
  });

  it('accepted events are normalized, deep-frozen copies; later mutation of the candidate has no effect', () => {
    const h = new Harness();
    const data = { id: 'u', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } };
    const sources: number[] = [];
    h.add(logEvent('x'));
    const p = h.plan([{ type: 'user/message', data, surfaceOp: 'append', sourceEventSeqs: [0], time: 5 }]);
    data.content.push({ type: 'text', text: 'later' });
    sources.push(1);
    const e = p.events[0] as SessionEvent;
    expect(e).toEqual({ type: 'user/message', seq: 1, time: 5, data: { id: 'u', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, sourceEventSeqs: [0], surfaceOp: 'append' });
    expect(Object.isFrozen(e) && Object.isFrozen(e.data) && Object.isFrozen(e.sourceEventSeqs)).toBe(true);
    expect('ignorable' in e).toBe(false);
  });

  it('a plan from another engine instance in the same state can be committed (deltas are replayed)', () => {
    const a = new Harness();
    const b = new Harness();
    for (const h of [a, b]) h.add([user('1'), user('2'), user('3')]);
    const p = a.plan([user('s', rep(1, 2), { sourceEventSeqs: [1, 2] })]);
    b.engine.commit(p);
    expect(b.engine.surface()).toEqual([0, 3]);
    expect(b.engine.replaceGeneration).toBe(1);
  });

  it('a surface of thousands of nodes survives many block-spanning replaces and prunes', () => {
    const h = new Harness();
    const batch = Array.from({ length: 2000 }, (_, i) => (i % 2 === 0 ? user(String(i)) : toolResult(`c${i}`, 'x')));
    h.add(batch);
    h.add(user('s', rep(100, 1500), { sourceEventSeqs: Array.from({ length: 1401 }, (_, i) => i + 100) }));
    for (let s = 1501; s < 2000; s += 2) h.add(toolResult(`c${s}`, 'y', { surfaceOp: rep(s, s), sourceEventSeqs: [s] }));
    const all = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
    h.add(user('t', rep(2000, 2249), { sourceEventSeqs: all(h.engine.nextSeq) }));
    const surf = h.engine.surface();
    expect(surf.length).toBe(103);
    h.add(user('u', rep(surf[5] as number, surf[surf.length - 30] as number), { sourceEventSeqs: all(h.engine.nextSeq) }));
    expect(h.engine.surface()).toEqual([...surf.slice(0, 5), h.engine.nextSeq - 1, ...surf.slice(surf.length - 29)]);
    const engine = SessionEngine.create();
    engine.loadStructural(h.log);
    expect(engine.surface()).toEqual(h.engine.surface());
  });
});

describe('loadStructural / loadEvents', () => {
  it('given rows with a non-increasing seq, a surface field on a log-only type or a replace off the surface, then StructureCorruptError and an empty engine', () => {
    const e = SessionEngine.create();
    expect(() => e.loadStructural([{ seq: 0, type: 'a' }, { seq: 0, type: 'b' }])).toThrow(StructureCorruptError);
    expect(() => e.loadStructural([{ seq: 0, type: 'a', surfaceOp: 'append' }])).toThrow(StructureCorruptError);
    expect(() => e.loadStructural([{ seq: 0, type: 'user/message' }])).toThrow(StructureCorruptError);
    expect(() => e.loadStructural([{ seq: 0, type: 'user/message', surfaceOp: { op: 'replace', start: 3, end: 3 } }])).toThrow(StructureCorruptError);
    expect(snapshot(e)).toEqual({ nextSeq: 0, eventCount: 0, replaceGeneration: 0, surfaceLength: 0, surface: [] });
  });

  it('loads 1,000,000 rows well under a second', () => {
    const rows = Array.from({ length: 1_000_000 }, (_, seq) => (seq % 4 === 0 ? { seq, type: 'user/message', surfaceOp: 'append' as const } : { seq, type: 'assistant/chunk' }));
    const e = SessionEngine.create();
    const t0 = performance.now();
    e.loadStructural(rows);
    const ms = performance.now() - t0;
    expect(e.surfaceLength).toBe(250_000);
    expect(ms).toBeLessThan(1000);
  });

  it('a strict engine loaded structurally refuses to plan until loadEvents rebuilt its trace', () => {
    const h = new Harness({ strict: true });
    h.add([logEvent('turn/start', { turn: 1 })]);
    const cold = SessionEngine.create({ strict: true });
    cold.loadStructural(h.log);
    expect(() => cold.plan([logEvent('turn/end', { turn: 1, reason: { kind: 'completed' } })], h.ctx())).toThrow(/loadEvents/);
    cold.loadEvents(h.log);
    expect(() => cold.plan([logEvent('turn/start', { turn: 2 })], h.ctx())).toThrow(DomainError);
    expect(cold.plan([logEvent('turn/end', { turn: 1, reason: { kind: 'completed' } })], h.ctx()).events).toHaveLength(1);
  });
});

describe('dataDependencies and lookups', () => {
  it('lists the targets of tool/result replacements and the chain behind them', () => {
    const h = new Harness();
    h.add([toolResult('c', 'long'), user('x')]); // 0 1
    h.add(toolResult('c', 'mid', { surfaceOp: rep(0, 0), sourceEventSeqs: [0] })); // 2
    const cands = [toolResult('c', 'short', { surfaceOp: rep(2, 2), sourceEventSeqs: [2] }), user('y', rep(1, 1), { sourceEventSeqs: [1] })];
    expect(dataDependencies(h.engine, cands)).toEqual([0, 2]);
    const lookup = new Map([0, 2].map((s) => [s, h.events.get(s) as SessionEvent]));
    const p = h.engine.plan(cands, { ...h.ctx(), lookup: (s) => lookup.get(s) });
    expect(p.events).toHaveLength(2);
  });

  it('throws a plain Error (not a DomainError) when a needed event was not prefetched', () => {
    const h = new Harness();
    h.add(toolResult('c', 'long'));
    expect(() => h.engine.plan([toolResult('c', 's', { surfaceOp: rep(0, 0), sourceEventSeqs: [0] })], { ...h.ctx(), lookup: () => undefined })).toThrow(/prefetch/);
  });

  it('a legacy tool/result replacement takes the upgraded id of its target, through chains', () => {
    const h = new Harness();
    const legacy = { turn: 1, step: 1, callId: 'L', content: [{ type: 'text', text: 'long' }], isError: false };
    h.add({ type: 'tool/result', data: legacy, surfaceOp: 'append' }); // 0
    h.add({ type: 'tool/result', data: { ...legacy, content: [] }, surfaceOp: rep(0, 0), sourceEventSeqs: [0] }); // 1
    h.add({ type: 'tool/result', data: { ...legacy, content: [{ type: 'text', text: 'z' }] }, surfaceOp: rep(1, 1), sourceEventSeqs: [1] }); // 2
    const lookup = (s: number): SessionEvent | undefined => h.events.get(s);
    expect(messageView(h.events.get(2) as SessionEvent, 'sess-1', lookup)?.['id']).toBe('legacy-message:sess-1:0');
    // A canonical target keeps its own id.
    h.add({ type: 'tool/result', data: toolResultData('K', 'long', { id: 'orig', isError: false }), surfaceOp: 'append' }); // 3
    h.add({ type: 'tool/result', data: { turn: 1, step: 1, callId: 'K', content: [], isError: false }, surfaceOp: rep(3, 3), sourceEventSeqs: [3] }); // 4
    expect(messageView(h.events.get(4) as SessionEvent, 'sess-1', lookup)?.['id']).toBe('orig');
  });

  it('typeOf / isOnSurface / surface() report committed state and surface() is a fresh array', () => {
    const h = new Harness();
    h.add([logEvent('turn/start', { turn: 1 }), user('a'), assistant('b')]);
    expect(h.engine.typeOf(0)).toBe('turn/start');
    expect(h.engine.typeOf(3)).toBeUndefined();
    expect([0, 1, 2, 3].map((s) => h.engine.isOnSurface(s))).toEqual([false, true, true, false]);
    const s = h.engine.surface();
    s.push(99);
    expect(h.engine.surface()).toEqual([1, 2]);
  });
});
