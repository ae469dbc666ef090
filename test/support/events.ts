/**
 * Builders of reference-shaped events for tests (EventInput protos and domain candidates).
 */
import type { EventInput } from '../../gen/palimpsest/v1/event.js';

/** A JSON-data EventInput. */
export function input(type: string, data: unknown, extra: Partial<EventInput> = {}): EventInput {
  return { type, data: { kind: { $case: 'json', value: JSON.stringify(data) } }, sourceEventSeqs: undefined, surfaceOp: undefined, ignorable: false, ...extra };
}

/** A user/message appended to the surface. */
export function userMessage(id: string, text: string): EventInput {
  return input('user/message', { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } }, { surfaceOp: { $case: 'append', value: {} } });
}

/** An assistant/message citing `sources`, optionally advertising tool calls. */
export function assistantMessage(id: string, text: string, sources: number[], toolCalls: { id: string; name: string }[] = [], turn = 1, step = 1): EventInput {
  const content: unknown[] = [{ type: 'text', text }];
  for (const c of toolCalls) content.push({ type: 'tool-call', id: c.id, name: c.name, arguments: '{}' });
  return input('assistant/message', {
    turn, step,
    message: { id, role: 'assistant', content, source: { kind: 'model', provider: 'test', model: 'test-1' } },
  }, { surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: { seqs: sources } });
}

/** A tool/result for `callId`, citing `callSeq` when given. */
export function toolResult(id: string, callId: string, text: string, callSeq?: number, turn = 1, step = 1): EventInput {
  return input('tool/result', {
    turn, step,
    message: { id, role: 'user', content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text }] }], source: { kind: 'tool', callId } },
  }, { surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: callSeq === undefined ? undefined : { seqs: [callSeq] } });
}

/** A replace surface op. */
export function replaceOp(start: number, end: number): EventInput['surfaceOp'] {
  return { $case: 'replace', value: { start, end } };
}
