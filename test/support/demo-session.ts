/**
 * A small realistic session for the web port and viewer tests: a tool round, reasoning, a
 * compaction that shadows the first turn, and a pruned tool result. Batches are appended in
 * order; the seqs below are what they get.
 */
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import { input, replaceOp, toolResult, userMessage } from './events.js';

/** A small PNG (a checkerboard), attached to a user message to show images as images. */
export const DEMO_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAHgAAAA8CAIAAAAiz+n/AAAAoklEQVR42u3aoQ3AIBRFUfbqKJ24C2DwXQFJLZKQQPrDSZ6+4jjIT9ddxvfkNj7lfgkHaNCgQYMGjQM0aNCgQYPGARo0aNB/hWa3pwwaNGjQoI+EbvUNN9CgQYMGDRo0aNCgQYM+EXrdCzUidMiPf9CgQYMGDRo0aNCgQYN2qeQkTBk0aNCgXZM6CVMGDRo0aNCglUGDBg0aNGhl0KBBg54vf7lE+o3ZKVWYAAAAAElFTkSuQmCC';

function assistant(id: string, content: unknown[], sources: number[], turn: number): EventInput {
  return input('assistant/message', {
    turn, step: 1,
    message: { id, role: 'assistant', content, source: { kind: 'model', provider: 'deepseek-official', model: 'deepseek-v4-flash' } },
  }, { surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: { seqs: sources } });
}

/** Seqs of the demo session's notable events. */
export const DEMO = {
  firstUser: 0,
  toolCall: 1,
  toolResult: 2,
  firstAnswer: 3,
  compactionSummary: 7,
  compactionReplacement: 8,
  secondToolResult: 11,
  pruneReplacement: 13,
  head: 14,
  /** Surface after the whole demo. */
  surface: [8, 4, 5, 10, 13, 14],
} as const;

/** The demo's batches (append them in order, each atomically). */
export function demoBatches(): EventInput[][] {
  return [
    [userMessage('u1', 'What is in src/? Keep it short.')],
    [assistant('a1', [{ type: 'text', text: 'Let me look.' }, { type: 'tool-call', id: 'c1', name: 'ls', arguments: '{"path":"src"}' }], [0], 1)],
    [toolResult('r1', 'c1', 'app/\ncli/\ndomain/\nserver/\nstore/', 1)],
    [assistant('a2', [{ type: 'text', text: 'Five folders: app, cli, domain, server and store.' }], [2], 1)],
    [input('user/message', {
      id: 'u2', role: 'user',
      content: [{ type: 'text', text: 'Which one holds the rules? (screenshot attached)' }, { type: 'image', attachment: { mimeType: 'image/png', data: DEMO_PNG, name: 'layers.png' } }],
      source: { kind: 'user' },
    }, { surfaceOp: { $case: 'append', value: {} } })],
    [assistant('a3', [
      { type: 'reasoning', text: 'The validation rules are in the pure core; the app layer only orchestrates.' },
      { type: 'text', text: '`src/domain`: the engine validates every event there.' },
    ], [4], 2)],
    // Compaction of the first turn (seqs 0..3) into one summary message (seq 8).
    [
      input('compaction/start', { compactionId: 'k1', turn: 2 }),
      input('compaction/summary', { compactionId: 'k1', summary: [{ type: 'text', text: 'The user asked what is in src/; the assistant listed five folders.' }], shadowedRange: { start: 0, end: 3 }, shadowedSeqs: [0, 1, 2, 3], shadowedTokenCount: 120, provider: 'p', model: 'm' }),
      input('user/message', {
        id: 'k1', role: 'user',
        content: [{ type: 'text', text: 'Summary of the earlier conversation: the user asked what is in src/; the assistant listed five folders (app, cli, domain, server, store).' }],
        source: { kind: 'plugin', plugin: 'compact', compactionId: 'k1' },
      }, { surfaceOp: replaceOp(0, 3), sourceEventSeqs: { seqs: [6, 7, 0, 1, 2, 3] } }),
      input('compaction/end', { compactionId: 'k1', turn: 2 }),
    ],
    [assistant('a4', [{ type: 'tool-call', id: 'c2', name: 'read', arguments: '{"path":"src/domain/surface.ts"}' }], [5], 2)],
    [toolResult('r2', 'c2', '/**\n * The surface: one ordered array of event seqs ...\n */\nexport class ChunkedSurface { /* 400 lines */ }', 10, 2)],
    // The long read is pruned: its result (seq 11) is replaced by a stub (seq 13).
    [
      input('compaction/prune', { shadowedRange: { start: 11, end: 11 }, shadowedSeqs: [11], shadowedTokenCount: 900 }),
      input('tool/result', {
        turn: 2, step: 1,
        message: { id: 'r2', role: 'user', content: [{ type: 'tool-result', toolCallId: 'c2', content: [{ type: 'text', text: '[pruned: 900 tokens]' }] }], source: { kind: 'tool', callId: 'c2' } },
      }, { surfaceOp: replaceOp(11, 11), sourceEventSeqs: { seqs: [11] } }),
    ],
    [assistant('a5', [{ type: 'text', text: 'The surface is a chunked array of seqs; replaces splice a range.' }], [13], 2)],
  ];
}
