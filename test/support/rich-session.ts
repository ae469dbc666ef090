/**
 * A session with everything a provider rendering must handle (issue #34): an image, signed and
 * unsigned reasoning, parallel tool calls (one result an error holding an image), a compaction
 * summary and a pruned result. Surface after `richSession`: 12 2 3 6 7 8 14 11 15.
 */
import type { CandidateEvent } from '../../src/domain/event.js';

/** A 1x1 PNG, base64. */
export const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

const src = { kind: 'model', provider: 'anthropic', model: 'claude-x' };

function asst(id: string, content: unknown[], step = 1): CandidateEvent {
  return { type: 'assistant/message', data: { turn: 1, step, message: { id, role: 'assistant', content, source: src } }, surfaceOp: 'append', sourceEventSeqs: [] };
}

function result(id: string, callId: string, content: unknown[], extra: Record<string, unknown> = {}, isError = false): CandidateEvent {
  const block: Record<string, unknown> = { type: 'tool-result', toolCallId: callId, content };
  if (isError) block['isError'] = true;
  return { type: 'tool/result', data: { turn: 1, step: 1, message: { id, role: 'user', source: { kind: 'tool', callId }, content: [block] } }, surfaceOp: 'append', ...extra };
}

const user = (id: string, content: unknown[], extra: Record<string, unknown> = {}): CandidateEvent => ({ type: 'user/message', data: { id, role: 'user', content, source: { kind: 'user' } }, surfaceOp: 'append', ...extra });

/** The batches that build the rich session, in order (append each one). */
export function richSessionBatches(): CandidateEvent[][] {
  return [
    [
      user('u0', [{ type: 'text', text: 'old question' }]),
      asst('a1', [{ type: 'text', text: 'old answer' }]),
      user('u2', [{ type: 'text', text: 'Read both files; here is a screenshot.' }, { type: 'image', attachment: { mimeType: 'image/png', data: PNG, name: 'shot.png' } }]),
      asst('a3', [
        { type: 'reasoning', text: 'Two reads, in parallel.', signature: 'sig-abc' },
        { type: 'text', text: 'Reading both.' },
        { type: 'tool-call', id: 'toolu_01', name: 'read', arguments: '{"path":"a.txt"}' },
        { type: 'tool-call', id: 'toolu_02', name: 'read', arguments: '{"path":"b.png"}' },
      ]),
      { type: 'tool/call', data: { turn: 1, step: 1, callId: 'toolu_01', name: 'read', arguments: '{"path":"a.txt"}' } },
      { type: 'tool/call', data: { turn: 1, step: 1, callId: 'toolu_02', name: 'read', arguments: '{"path":"b.png"}' } },
      result('r6', 'toolu_01', [{ type: 'text', text: 'contents of a' }], { sourceEventSeqs: [4] }),
      result('r7', 'toolu_02', [{ type: 'text', text: 'binary file' }, { type: 'image', attachment: { mimeType: 'image/png', data: PNG } }], { sourceEventSeqs: [5] }, true),
      asst('a8', [{ type: 'reasoning', text: 'unsigned thoughts' }, { type: 'tool-call', id: 'toolu_03', name: 'bash', arguments: '{"cmd":"ls"}' }], 2),
      { type: 'tool/call', data: { turn: 1, step: 2, callId: 'toolu_03', name: 'bash', arguments: '{"cmd":"ls"}' } },
      result('r10', 'toolu_03', [{ type: 'text', text: 'x'.repeat(2000) }], { sourceEventSeqs: [9] }),
      asst('a11', [{ type: 'text', text: 'done' }], 3),
    ],
    [
      { type: 'user/message', data: { id: 's12', role: 'user', content: [{ type: 'text', text: 'Summary: the user asked an old question.' }], source: { kind: 'plugin', plugin: 'compact' } }, surfaceOp: { op: 'replace', start: 0, end: 1 }, sourceEventSeqs: [0, 1] },
      { type: 'compaction/prune', data: { shadowedRange: { start: 10, end: 10 }, shadowedSeqs: [10], shadowedTokenCount: 500 } },
      result('r10', 'toolu_03', [{ type: 'text', text: 'xxxx…[pruned]' }], { surfaceOp: { op: 'replace', start: 10, end: 10 }, sourceEventSeqs: [10] }),
      user('u15', [{ type: 'text', text: 'thanks' }]),
    ],
  ];
}
