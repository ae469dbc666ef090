/**
 * The tool-pairing guard through the app layer (SessionService over the memory store): every way
 * a replace can split a tool call from its result is refused with TOOL_PAIRING_BROKEN and leaves
 * the log untouched; the success cases next to them; sessions with the guard off and imported
 * sessions keep the reference's behaviour.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import { assistant, logEvent, rep, toolResult, toolResultData, user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;

function service(): SessionService {
  return new SessionService(new MemorySessionStore(), undefined, () => 1_000);
}

/** An assistant message advertising `calls`. */
function caller(text: string, calls: string[]): CandidateEvent {
  return {
    type: 'assistant/message',
    data: {
      turn: 1, step: 1,
      message: { id: `a-${text}`, role: 'assistant', content: [{ type: 'text', text }, ...calls.map((id) => ({ type: 'tool-call', id, name: 'read', arguments: '{}' }))], source: { kind: 'model', provider: 'p', model: 'm' } },
    },
    surfaceOp: 'append',
  };
}

function summary(op: { start: number; end: number }, cites: number[]): CandidateEvent {
  return user(`sum-${op.start}-${op.end}`, { op: 'replace', ...op }, { sourceEventSeqs: cites });
}

/**
 * 0 user, 1 assistant(call c1), 2 tool/call, 3 tool/result(c1), 4 assistant(call c2, c3),
 * 5 result(c2), 6 result(c3), 7 user.   Surface: 0 1 3 4 5 6 7.
 */
async function seeded(app: SessionService, id: string, opts: { pairingGuard?: boolean } = {}): Promise<void> {
  await app.createSession(ctx, { id, pairingGuard: opts.pairingGuard });
  await app.append(ctx, id, [
    user('hi'), caller('one', ['c1']), logEvent('tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' }),
    toolResult('c1', 'r1', { sourceEventSeqs: [2] }), caller('two', ['c2', 'c3']), toolResult('c2', 'r2'), toolResult('c3', 'r3'), user('next'),
  ]);
}

async function state(app: SessionService, id: string): Promise<unknown> {
  const s = await app.getSurface(ctx, id);
  const v = await app.getSession(ctx, id);
  return { s, head: v.headSeq, count: v.eventCount };
}

async function expectBroken(app: SessionService, id: string, batch: CandidateEvent[], want: { callId: string; callSeq?: string; resultSeq: string; index: string }): Promise<void> {
  const before = await state(app, id);
  const err = await app.append(ctx, id, batch).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(DomainError);
  const de = err as DomainError;
  expect(de.reason, de.message).toBe('TOOL_PAIRING_BROKEN');
  expect({ callId: de.metadata['callId'], callSeq: de.metadata['callSeq'], resultSeq: de.metadata['resultSeq'], index: de.metadata['index'] }).toEqual(want);
  expect(await state(app, id)).toEqual(before);
}

describe('tool-pairing guard (on by default for CreateSession)', () => {
  it('reports the guard on the session', async () => {
    const app = service();
    expect((await app.createSession(ctx, { id: 'on' })).record.pairingGuard).toBe(true);
    expect((await app.createSession(ctx, { id: 'off', pairingGuard: false })).record.pairingGuard).toBe(false);
  });

  it('refuses a range that ends between a call and its result; covering the result too is accepted', async () => {
    const app = service();
    await seeded(app, 's');
    await expectBroken(app, 's', [summary({ start: 0, end: 1 }, [0, 1])], { callId: 'c1', callSeq: '1', resultSeq: '3', index: '0' });
    await app.append(ctx, 's', [summary({ start: 0, end: 3 }, [0, 1, 3])]);
    expect((await app.getSurface(ctx, 's')).seqs).toEqual([8, 4, 5, 6, 7]);
  });

  it('refuses a range that starts between a call and its result (the call stays, its result is lost)', async () => {
    const app = service();
    await seeded(app, 's');
    await expectBroken(app, 's', [summary({ start: 3, end: 3 }, [3])], { callId: 'c1', callSeq: '1', resultSeq: '3', index: '0' });
    await expectBroken(app, 's', [summary({ start: 5, end: 7 }, [5, 6, 7])], { callId: 'c2', callSeq: '4', resultSeq: '5', index: '0' });
    // The whole round (call and both results) is fine.
    await app.append(ctx, 's', [summary({ start: 4, end: 6 }, [4, 5, 6])]);
  });

  it('refuses a nested replace that splits a pair a previous compaction kept together', async () => {
    const app = service();
    await seeded(app, 's');
    await app.append(ctx, 's', [summary({ start: 0, end: 0 }, [0])]); // 8 replaces the first user message
    // Surface: 8 1 3 4 5 6 7; nesting 8..4 shadows call c2/c3 and leaves their results.
    await expectBroken(app, 's', [summary({ start: 8, end: 4 }, [8, 1, 3, 4])], { callId: 'c2', callSeq: '4', resultSeq: '5', index: '0' });
    await app.append(ctx, 's', [summary({ start: 8, end: 6 }, [8, 1, 3, 4, 5, 6])]);
    expect((await app.getSurface(ctx, 's')).seqs).toEqual([9, 7]);
  });

  it('checks the state after the whole batch: shadowing a pair and re-adding what it needs is accepted, re-adding too little is refused at the culprit', async () => {
    const app = service();
    await seeded(app, 's');
    // 8 shadows c1's call; 9 re-adds an assistant message holding c1 before the result? No: the
    // result (3) is shadowed too and 10 re-adds a copy after the new call.
    await app.append(ctx, 's', [
      summary({ start: 0, end: 3 }, [0, 1, 3]),
      caller('again', ['c1']),
      { type: 'tool/result', data: toolResultData('c1', 'r1 again'), surfaceOp: 'append' },
    ]);
    const app2 = service();
    await seeded(app2, 't');
    // Shadow the call, then append a new caller of c1 *after* the old result: the result at 3 is
    // an orphan (its call no longer precedes it).
    await expectBroken(app2, 't', [summary({ start: 0, end: 1 }, [0, 1]), caller('late', ['c1'])], { callId: 'c1', callSeq: '1', resultSeq: '3', index: '0' });
  });

  it('accepts a pruned tool/result copy (same call id, same place) and a second prune of the copy', async () => {
    const app = service();
    await seeded(app, 's');
    await app.append(ctx, 's', [logEvent('compaction/prune', { shadowedRange: { start: 5, end: 5 }, shadowedSeqs: [5], shadowedTokenCount: 9 }), toolResult('c2', 'short', { surfaceOp: rep(5, 5), sourceEventSeqs: [5] })]);
    await app.append(ctx, 's', [toolResult('c2', 'shorter', { surfaceOp: rep(9, 9), sourceEventSeqs: [9] })]);
    expect((await app.getSurface(ctx, 's')).seqs).toEqual([0, 1, 3, 4, 10, 6, 7]);
  });

  it('does not blame a batch for an orphan that was already there', async () => {
    const app = service();
    // A result without any call (an imported hand-built log: imports are not checked), then a
    // compaction of unrelated messages.
    const lines = [
      JSON.stringify({ type: 'session', version: 0, id: 'o', createdAt: 0 }),
      ...[user('a'), toolResult('cx', 'lonely'), user('b')].map((c, i) => JSON.stringify({ ...c, seq: i, time: 1 })),
    ];
    await app.importJsonl(ctx, (async function* () { yield new TextEncoder().encode(lines.join('\n') + '\n'); })(), { pairingGuard: true });
    await app.append(ctx, 'o', [summary({ start: 0, end: 0 }, [0])]);
    await app.append(ctx, 'o', [toolResult('cx', 'pruned', { surfaceOp: rep(1, 1), sourceEventSeqs: [1] })]);
  });

  it('a session with the guard off accepts the split (reference behaviour), so does a fork of it; a fork of a guarded session is guarded', async () => {
    const app = service();
    await seeded(app, 'raw', { pairingGuard: false });
    await app.append(ctx, 'raw', [summary({ start: 0, end: 1 }, [0, 1])]);
    expect((await app.getSurface(ctx, 'raw')).seqs).toEqual([8, 3, 4, 5, 6, 7]);
    expect((await app.fork(ctx, 'raw', { childId: 'raw-child' })).record.pairingGuard).toBe(false);
    await seeded(app, 'g');
    const child = await app.fork(ctx, 'g', { childId: 'g-child' });
    expect(child.record.pairingGuard).toBe(true);
    await expectBroken(app, 'g-child', [summary({ start: 0, end: 1 }, [0, 1])], { callId: 'c1', callSeq: '1', resultSeq: '3', index: '0' });
  });

  it('a guarded session cold-loaded from the store (index hydrated from the surface data) refuses the same split', async () => {
    const store = new MemorySessionStore();
    const first = new SessionService(store, undefined, () => 1_000);
    await seeded(first, 's');
    const second = new SessionService(store, undefined, () => 1_000);
    await expectBroken(second, 's', [summary({ start: 0, end: 1 }, [0, 1])], { callId: 'c1', callSeq: '1', resultSeq: '3', index: '0' });
  });

  it('imports keep reference behaviour: off by default (a split pair imports unchanged), refused with --pairing-guard', async () => {
    const lines = [
      JSON.stringify({ type: 'session', version: 0, id: 'imp', createdAt: 0 }),
      JSON.stringify({ type: 'user/message', seq: 0, time: 1, data: { id: 'u', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, surfaceOp: 'append' }),
      JSON.stringify({ type: 'assistant/message', seq: 1, time: 1, data: { turn: 1, step: 1, message: { id: 'a', role: 'assistant', content: [{ type: 'tool-call', id: 'k', name: 'read', arguments: '{}' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append' }),
      JSON.stringify({ type: 'tool/result', seq: 2, time: 1, data: toolResultData('k', 'out'), surfaceOp: 'append' }),
      JSON.stringify({ type: 'user/message', seq: 3, time: 1, data: { id: 's', role: 'user', content: [{ type: 'text', text: 'sum' }], source: { kind: 'plugin', plugin: 'compact' } }, surfaceOp: { op: 'replace', start: 0, end: 1 }, sourceEventSeqs: [0, 1] }),
    ];
    const bytes = async function* (): AsyncGenerator<Uint8Array> {
      yield new TextEncoder().encode(lines.join('\n') + '\n');
    };
    const app = service();
    const v = await app.importJsonl(ctx, bytes(), {});
    expect(v.record.pairingGuard).toBe(false);
    expect((await app.getSurface(ctx, 'imp')).seqs).toEqual([3, 2]);
    const err = await app.importJsonl(ctx, bytes(), { id: 'imp2', pairingGuard: true }).then(() => undefined, (e: unknown) => e as DomainError);
    expect(err?.reason).toBe('TOOL_PAIRING_BROKEN');
    expect(err?.metadata['line']).toBe('5');
    await expect(app.getSession(ctx, 'imp2')).rejects.toMatchObject({ reason: 'SESSION_NOT_FOUND' });
  });

  it('every reference fixture imports unchanged with the guard off', async () => {
    const dir = new URL('../fixtures/reference-sessions/', import.meta.url);
    const app = service();
    const text = readFileSync(new URL('compaction-recovery.jsonl', dir));
    const v = await app.importJsonl(ctx, (async function* () { yield text; })(), { id: 'cr' });
    expect(v.eventCount).toBe(31);
  });
});

async function expectRefused(app: SessionService, id: string, batch: CandidateEvent[], want: { reason: string; callId: string; callSeq?: string; index: string }): Promise<void> {
  const before = await state(app, id);
  const err = await app.append(ctx, id, batch).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(DomainError);
  const de = err as DomainError;
  expect({ reason: de.reason, callId: de.metadata['callId'], callSeq: de.metadata['callSeq'], index: de.metadata['index'] }, de.message).toEqual(want);
  expect(await state(app, id)).toEqual(before);
}

describe('the guard checks appends (issue #34)', () => {
  it('refuses a tool result whose call is nowhere on the surface (TOOL_RESULT_ORPHANED), log untouched; the same result after its call is accepted', async () => {
    const app = service();
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', [user('hi')]);
    await expectRefused(app, 's', [toolResult('c9', 'out')], { reason: 'TOOL_RESULT_ORPHANED', callId: 'c9', callSeq: undefined, index: '0' });
    // Within one batch the call may come first.
    await app.append(ctx, 's', [caller('call', ['c9']), toolResult('c9', 'out')]);
    expect((await app.getSurface(ctx, 's')).seqs).toEqual([0, 1, 2]);
  });

  it('refuses a message appended while a call has no result (TOOL_RESULT_MISSING with callId and callSeq), log untouched; after the result it is accepted', async () => {
    const app = service();
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', [user('hi'), caller('one', ['c1'])]);
    await expectRefused(app, 's', [user('next turn')], { reason: 'TOOL_RESULT_MISSING', callId: 'c1', callSeq: '1', index: '0' });
    await expectRefused(app, 's', [assistant('more text')], { reason: 'TOOL_RESULT_MISSING', callId: 'c1', callSeq: '1', index: '0' });
    // The batch index names the culprit.
    await expectRefused(app, 's', [logEvent('step/end', { turn: 1, step: 1 }), user('x')], { reason: 'TOOL_RESULT_MISSING', callId: 'c1', callSeq: '1', index: '1' });
    await app.append(ctx, 's', [toolResult('c1', 'r1'), user('next turn')]);
    expect((await app.getSurface(ctx, 's')).seqs).toEqual([0, 1, 2, 3]);
  });

  it('keeps the results of parallel calls legal in any order and in separate batches; a usage-only assistant message is not checked', async () => {
    const app = service();
    await app.createSession(ctx, { id: 'p' });
    await app.append(ctx, 'p', [user('hi'), caller('two', ['a', 'b', 'c'])]);
    await app.append(ctx, 'p', [toolResult('c', 'rc')]);
    await app.append(ctx, 'p', [{ type: 'assistant/message', data: { turn: 1, step: 1, message: { id: 'usage', role: 'assistant', content: [], source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append' }]);
    await expectRefused(app, 'p', [toolResult('a', 'ra'), user('too early')], { reason: 'TOOL_RESULT_MISSING', callId: 'b', callSeq: '1', index: '1' });
    await app.append(ctx, 'p', [toolResult('a', 'ra'), toolResult('b', 'rb'), user('done')]);
  });

  it('a session with the guard off accepts both (reference behaviour); RepairSession closes the open call of an interrupted turn on a guarded one', async () => {
    const app = service();
    await app.createSession(ctx, { id: 'raw', pairingGuard: false });
    await app.append(ctx, 'raw', [user('hi'), toolResult('zz', 'orphan'), caller('one', ['c1']), user('next')]);
    await app.createSession(ctx, { id: 'g' });
    await app.append(ctx, 'g', [logEvent('turn/start', { turn: 1 }), user('hi'), logEvent('step/start', { turn: 1, step: 1 }), caller('one', ['c1'])]);
    await expectRefused(app, 'g', [user('next')], { reason: 'TOOL_RESULT_MISSING', callId: 'c1', callSeq: '3', index: '0' });
    expect((await app.repair(ctx, 'g')).map((e) => e.type)).toEqual(['tool/result', 'step/end', 'turn/end']);
    await app.append(ctx, 'g', [user('next')]);
  });

  it('after a compaction the open calls are derived again from the new surface', async () => {
    const app = service();
    await seeded(app, 's');
    await app.append(ctx, 's', [summary({ start: 0, end: 3 }, [0, 1, 3]), caller('again', ['c7'])]);
    await expectRefused(app, 's', [user('x')], { reason: 'TOOL_RESULT_MISSING', callId: 'c7', callSeq: '9', index: '0' });
    // c1's call was compacted away: a new result for it is an orphan.
    await expectRefused(app, 's', [toolResult('c1', 'late')], { reason: 'TOOL_RESULT_ORPHANED', callId: 'c1', callSeq: undefined, index: '0' });
    await app.append(ctx, 's', [toolResult('c7', 'r7'), user('x')]);
  });

  it('a cold-loaded guarded session (index hydrated from the store) refuses the same append', async () => {
    const store = new MemorySessionStore();
    const first = new SessionService(store, undefined, () => 1_000);
    await first.createSession(ctx, { id: 's' });
    await first.append(ctx, 's', [user('hi'), caller('one', ['c1'])]);
    const second = new SessionService(store, undefined, () => 1_000);
    await expectRefused(second, 's', [user('next')], { reason: 'TOOL_RESULT_MISSING', callId: 'c1', callSeq: '1', index: '0' });
  });
});

describe('an assistant message without calls never trips the guard', () => {
  it('plain compactions of chat turns are accepted', async () => {
    const app = service();
    await app.createSession(ctx, { id: 'chat' });
    await app.append(ctx, 'chat', [user('a'), assistant('b'), user('c'), assistant('d')]);
    await app.append(ctx, 'chat', [summary({ start: 0, end: 2 }, [0, 1, 2])]);
    expect((await app.getSurface(ctx, 'chat')).seqs).toEqual([4, 3]);
  });
});

describe('the guard keeps appends pipelined', () => {
  it('a second append to a guarded session reaches the store while the first is still being written', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const reached: number[] = [];
    class GatedStore extends MemorySessionStore {
      override async append(...args: Parameters<MemorySessionStore['append']>): ReturnType<MemorySessionStore['append']> {
        reached.push(args[1].events[0]!.seq);
        if (args[1].events[0]!.seq === 2) await gate;
        return super.append(...args);
      }
    }
    const app = new SessionService(new GatedStore(), undefined, () => 1_000);
    await app.createSession(ctx, { id: 'p' });
    await app.append(ctx, 'p', [user('a'), caller('one', ['k'])]);
    const tick = async (until: number): Promise<void> => {
      for (let i = 0; i < 50 && reached.length < until; i++) await new Promise((r) => setImmediate(r));
    };
    const first = app.append(ctx, 'p', [toolResult('k', 'out')]);
    await tick(2);
    expect(reached).toEqual([0, 2]);
    // The first batch is being written; the second is planned on it and handed to the store too.
    const second = app.append(ctx, 'p', [user('next')]);
    await tick(3);
    expect(reached).toEqual([0, 2, 3]);
    release();
    expect((await first).seqs).toEqual([2]);
    expect((await second).seqs).toEqual([3]);
  });
});
