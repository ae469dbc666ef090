import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import type { Json, SessionEvent, SessionHeader } from '../../src/domain/event.js';
import { decodeJsonl } from '../../src/domain/jsonl-reader.js';
import {
  acceptFork,
  END_SEED_TYPE,
  INVALID_BOUNDARY,
  OPEN_TURN,
  planFork,
  SESSION_ALREADY_EXISTS,
  SESSION_NOT_FOUND,
} from '../../src/domain/fork.js';

const SOURCE_HEADER: SessionHeader = { version: 0, id: 'src', createdAt: 1, cwd: '/home/dev/project', delegationDepth: 0, agentPreset: 'minimal' };

function log(...specs: Array<[string, Json, Partial<SessionEvent>?]>): SessionEvent[] {
  return specs.map(([type, data, extra], seq) => ({ type, seq, time: 100 + seq, data, ...(extra ?? {}) }));
}

const user = (id: string): [string, Json, Partial<SessionEvent>] => [
  'user/message',
  { id, role: 'user', content: [{ type: 'text', text: id }], source: { kind: 'user' } },
  { surfaceOp: 'append' },
];

/** seq 0..7: a closed turn (0..3), a user message (4), an open-then-closed turn (5..7). */
const SOURCE = log(
  ['turn/start', { turn: 1 }],
  user('u1'),
  ['todo/write', { todos: [] }],
  ['turn/end', { turn: 1, reason: { kind: 'completed' } }],
  user('u2'),
  ['turn/start', { turn: 2 }],
  user('u3'),
  ['turn/end', { turn: 2, reason: { kind: 'completed' } }],
);

function fork(boundary?: unknown, events: readonly SessionEvent[] = SOURCE) {
  return planFork({ header: SOURCE_HEADER, events }, { childId: 'child', createdAt: 999, ...(boundary === undefined ? {} : { boundary }) });
}

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return (err as DomainError).reason;
  }
  throw new Error('expected a DomainError');
}

describe('planFork', () => {
  it('exports the app-side reason constants', () => {
    expect(SESSION_NOT_FOUND).toBe('SESSION_NOT_FOUND');
    expect(SESSION_ALREADY_EXISTS).toBe('SESSION_ALREADY_EXISTS');
  });

  it('without a boundary inherits the whole log and adds session/end-seed', () => {
    const plan = fork();
    expect(plan.header).toStrictEqual({
      version: 0,
      id: 'child',
      createdAt: 999,
      cwd: '/home/dev/project',
      parentSession: 'src',
      seedLength: 8,
      delegationDepth: 0,
    });
    expect(plan.events.slice(0, 8)).toStrictEqual(SOURCE);
    expect(plan.events[8]).toStrictEqual({ type: END_SEED_TYPE, seq: 8, time: 999, data: {} });
    expect(plan.events).toHaveLength(9);
  });

  it('at a boundary inherits seq 0..boundary inclusive', () => {
    const plan = fork(4);
    expect(plan.header.seedLength).toBe(5);
    expect(plan.events.map((e) => e.seq)).toStrictEqual([0, 1, 2, 3, 4, 5]);
    expect(plan.events[5]?.type).toBe(END_SEED_TYPE);
  });

  it('does not duplicate a trailing session/end-seed', () => {
    const source = [...SOURCE, { type: END_SEED_TYPE, seq: 8, time: 200, data: {} }];
    const plan = fork(undefined, source);
    expect(plan.events).toStrictEqual(source);
    expect(plan.header.seedLength).toBe(9);
    expect(fork(8, source).events).toStrictEqual(source);
    // forking the child again does not grow it either
    const again = planFork({ header: plan.header, events: plan.events }, { childId: 'grandchild', createdAt: 5 });
    expect(again.events).toStrictEqual(source);
  });

  it('an empty source gives a child with only the session/end-seed marker at seq 0 and seedLength 0 (the reference seeds it; issue #16 item 11)', () => {
    const plan = fork(undefined, []);
    expect(plan.events).toStrictEqual([{ type: 'session/end-seed', seq: 0, time: 999, data: {} }]);
    expect(plan.header.seedLength).toBe(0);
    expect(acceptFork(plan).engine.nextSeq).toBe(1);
  });

  it('omits cwd when the source has none', () => {
    const plan = planFork({ header: { version: 0, id: 'p', createdAt: 0 }, events: [] }, { childId: 'c', createdAt: 1 });
    expect(plan.header).toStrictEqual({ version: 0, id: 'c', createdAt: 1, parentSession: 'p', seedLength: 0, delegationDepth: 0 });
  });

  it.each([[-1], [1.5], [Number.MAX_SAFE_INTEGER + 1], ['3'], [null], [Number.NaN]])('refuses boundary %s with INVALID_BOUNDARY', (b) => {
    expect(reasonOf(() => fork(b))).toBe(INVALID_BOUNDARY);
  });

  it('refuses a boundary beyond the last seq, or on an empty log, with INVALID_BOUNDARY', () => {
    expect(reasonOf(() => fork(8))).toBe(INVALID_BOUNDARY);
    expect(reasonOf(() => fork(0, []))).toBe(INVALID_BOUNDARY);
  });

  it('refuses a boundary that falls in a seq gap of an imported log', () => {
    const gappy: SessionEvent[] = [
      { type: 'user/message', seq: 0, time: 1, data: {}, surfaceOp: 'append' },
      { type: 'user/message', seq: 5, time: 2, data: {}, surfaceOp: 'append' },
    ];
    expect(reasonOf(() => fork(3, gappy))).toBe(INVALID_BOUNDARY);
    const plan = fork(5, gappy);
    expect(plan.events.map((e) => e.seq)).toStrictEqual([0, 5, 6]);
    expect(plan.header.seedLength).toBe(2);
  });

  it('refuses a boundary inside a turn with OPEN_TURN', () => {
    expect(reasonOf(() => fork(0))).toBe(OPEN_TURN);
    expect(reasonOf(() => fork(2))).toBe(OPEN_TURN);
    expect(reasonOf(() => fork(5))).toBe(OPEN_TURN);
    expect(reasonOf(() => fork(6))).toBe(OPEN_TURN);
    expect(fork(3).header.seedLength).toBe(4);
    expect(fork(7).header.seedLength).toBe(8);
  });

  it('refuses a whole-log fork while the last turn is open', () => {
    expect(reasonOf(() => fork(undefined, SOURCE.slice(0, 7)))).toBe(OPEN_TURN);
  });

  it('checks the boundary type before its existence and existence before OPEN_TURN', () => {
    expect(reasonOf(() => fork(-1, SOURCE.slice(0, 7)))).toBe(INVALID_BOUNDARY);
    expect(reasonOf(() => fork(99, SOURCE.slice(0, 7)))).toBe(INVALID_BOUNDARY);
  });

  it('stops reading the source after the boundary', () => {
    let read = 0;
    function* lazy(): Generator<SessionEvent> {
      for (const e of SOURCE) {
        read++;
        yield e;
      }
    }
    planFork({ header: SOURCE_HEADER, events: lazy() }, { childId: 'c', createdAt: 1, boundary: 3 });
    expect(read).toBe(5);
  });

  describe('the child passes the engine (import mode)', () => {
    it.each([false, true])('strict=%s: a whole-log fork and a boundary fork', (strict) => {
      for (const plan of [fork(), fork(3), fork(4)]) {
        const { engine, plan: accepted } = acceptFork(plan, { strict });
        expect(accepted.events).toStrictEqual(plan.events);
        expect(engine.eventCount).toBe(plan.events.length);
      }
    });

    it('the child surface is the fold of the prefix', () => {
      const { engine } = acceptFork(fork(4));
      expect(engine.surface()).toStrictEqual([1, 4]);
    });

    const dir = new URL('../fixtures/reference-sessions', import.meta.url).pathname;
    const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort();
    it.each(files)('%s: forking at every turn/end (and at the end) gives a child the engine accepts', (file) => {
      const { header, events } = decodeJsonl(readFileSync(`${dir}/${file}`, 'utf8'));
      const log = events as unknown as SessionEvent[];
      const boundaries: Array<number | undefined> = log.filter((e) => e.type === 'turn/end').map((e) => e.seq);
      const lastTurnEvent = [...log].reverse().find((e) => e.type === 'turn/start' || e.type === 'turn/end');
      if (lastTurnEvent?.type !== 'turn/start') boundaries.push(undefined);
      for (const boundary of boundaries) {
        const plan = planFork({ header, events: log }, { childId: 'child', createdAt: 1, ...(boundary === undefined ? {} : { boundary }) });
        const prefix = boundary === undefined ? log : log.filter((e) => e.seq <= boundary);
        expect(plan.header.seedLength).toBe(prefix.length);
        expect(plan.events.slice(0, prefix.length)).toStrictEqual(prefix);
        expect(plan.events.filter((e) => e.type === END_SEED_TYPE)).toHaveLength(1);
        expect(acceptFork(plan).plan.events).toHaveLength(plan.events.length);
      }
    });
  });
});
