/**
 * The session list's status rule (web/src/status-rule.ts): what each tail of a log shows, with
 * RepairSession's own rule deciding between `open turn` and `needs repair`.
 */
import { describe, expect, it } from 'vitest';
import type { Json, SessionEvent } from '../../src/domain/event.js';
import { statusOf } from '../../web/src/status-rule.js';

/** Events in log order, seqs from 0; statusOf takes them newest first from the newest boundary. */
function log(...events: [string, Json][]): SessionEvent[] {
  const all = events.map(([type, data], seq) => ({ type, seq, time: 1000 + seq, data }));
  const newestFirst = [...all].reverse();
  const boundary = newestFirst.findIndex((e) => e.type === 'turn/start' || e.type === 'turn/end');
  return boundary < 0 ? newestFirst : newestFirst.slice(0, boundary + 1);
}

const start: [string, Json][] = [['turn/start', { turn: 1 }], ['step/start', { turn: 1, step: 1 }]];
const call = (id: string): [string, Json] => ['assistant/message', { turn: 1, step: 1, message: { id: 'a', role: 'assistant', content: [{ type: 'tool-call', id, name: 'read', arguments: '{}' }] } }];
const result = (id: string): [string, Json] => ['tool/result', { turn: 1, step: 1, message: { id: 'r', role: 'user', content: [], source: { kind: 'tool', callId: id } } }];

describe('the session list status rule', () => {
  it('no turn at all: no-turns', () => {
    expect(statusOf(log())).toBe('no-turns');
    expect(statusOf(log(['user/message', { id: 'u', role: 'user', content: [] }]))).toBe('no-turns');
  });

  it('an open turn whose calls all have results: open-turn', () => {
    expect(statusOf(log(...start))).toBe('open-turn');
    expect(statusOf(log(...start, call('c1'), ['tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' }], result('c1')))).toBe('open-turn');
  });

  it('a tool call of the open step without a result (recorded or only advertised): needs-repair', () => {
    expect(statusOf(log(...start, call('c1'), ['tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' }]))).toBe('needs-repair');
    expect(statusOf(log(...start, call('c1')))).toBe('needs-repair');
    // A call settled by a later result is not pending any more.
    expect(statusOf(log(...start, call('c1'), call('c2'), result('c2')))).toBe('needs-repair');
    expect(statusOf(log(...start, call('c1'), call('c2'), result('c2'), result('c1')))).toBe('open-turn');
  });

  it('the last turn ended as interrupted: interrupted; otherwise idle', () => {
    expect(statusOf(log(...start, call('c1'), ['turn/end', { turn: 1, reason: { kind: 'interrupted' } }]))).toBe('interrupted');
    expect(statusOf(log(...start, ['step/end', { turn: 1, step: 1 }], ['turn/end', { turn: 1, reason: { kind: 'completed' } }]))).toBe('idle');
    // A later turn counts, not an earlier interrupted one.
    expect(statusOf(log(['turn/start', { turn: 1 }], ['turn/end', { turn: 1, reason: { kind: 'interrupted' } }], ['turn/start', { turn: 2 }]))).toBe('open-turn');
  });

  it('a turn/start with a null turn opens nothing (as the reference): idle', () => {
    expect(statusOf(log(['turn/start', { turn: null }]))).toBe('idle');
  });
});
