/**
 * A long session for import tests (several store chunks of STORE_READ_BATCH events): seq 1 calls
 * tool c0, seq 2 is its result, then plain messages; `goodEvents` prunes seq 2 at PRUNE_AT and
 * compacts 3..10 at COMPACT_AT, thousands of events (chunks) after their targets.
 */
import type { CandidateEvent } from '../../src/domain/event.js';
import { assistant, toolResultData, user } from './engine-harness.js';

export const N = 5000;
export const PRUNE_AT = 4900;
export const COMPACT_AT = 4950;

/** seq 1 calls tool c0, seq 2 is its result; then plain user/assistant messages. */
export function baseEvents(): CandidateEvent[] {
  const out: CandidateEvent[] = [];
  out.push(user('start'));
  out.push(assistant('calling', {}, 1, 1));
  const call = out[1] as { data: { message: { content: unknown[] } } };
  call.data.message.content.push({ type: 'tool-call', id: 'c0', name: 'read', arguments: '{}' });
  out.push({ type: 'tool/result', data: toolResultData('c0', 'a very long tool output'), surfaceOp: 'append', sourceEventSeqs: [1] });
  while (out.length < N) out.push(out.length % 2 === 1 ? user(`q${out.length}`) : assistant(`a${out.length}`, {}, 1, 2));
  return out;
}

/** The accepted session: a prune of seq 2 at PRUNE_AT and a compaction of 3..10 at COMPACT_AT. */
export function goodEvents(): CandidateEvent[] {
  const out = baseEvents();
  out[PRUNE_AT] = { type: 'tool/result', data: toolResultData('c0', '[pruned]'), surfaceOp: { op: 'replace', start: 2, end: 2 }, sourceEventSeqs: [2] };
  out[COMPACT_AT] = assistant('summary of 3..10', { surfaceOp: { op: 'replace', start: 3, end: 10 }, sourceEventSeqs: [3, 4, 5, 6, 7, 8, 9, 10] }, 1, 3);
  return out;
}

/** The candidates with seq and time, as a reference JSONL file. */
export function jsonl(id: string, events: readonly CandidateEvent[]): Buffer {
  const lines = [JSON.stringify({ type: 'session', version: 0, id, createdAt: 1000, delegationDepth: 0 })];
  events.forEach((e, seq) => lines.push(JSON.stringify({ ...e, seq, time: 2000 + seq })));
  return Buffer.from(`${lines.join('\n')}\n`);
}
