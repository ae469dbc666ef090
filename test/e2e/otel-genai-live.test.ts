/**
 * `serve --otel-genai-export` across a SIGKILL (issue #41): a server child process exports each
 * committed turn to an OTLP/HTTP receiver started here. A turn committed while the collector is
 * down is not lost when the server is killed: the restarted server exports it (same trace and
 * span ids as the mapping derives), and the turn exported before the kill is not sent again (its
 * position was persisted).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';
import { cliFor, cliWithInput } from '../support/cli.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { tempDbDir } from '../support/temp-db.js';
import { waitFor } from '../support/poll.js';
import { GENAI_SCOPE_NAME, genAiSpanId, genAiTraceId } from '../../src/app/otel-genai-conventions.js';

const dirs = tempDbDir('otel-genai-live-');
let receiver: OtlpReceiver;
beforeAll(async () => {
  ensureBuilt();
  receiver = await startOtlpReceiver();
});
afterAll(async () => { await receiver.close(); });

/** One tool-calling turn as `append` JSONL, starting at seq `base`. */
function turnJsonl(n: number, base: number): string {
  const callId = `call-${n}`;
  const events = [
    { type: 'turn/start', data: { turn: n } },
    { type: 'user/message', data: { id: `u${n}`, role: 'user', content: [{ type: 'text', text: `question ${n}` }], source: { kind: 'user' } }, surfaceOp: 'append' },
    { type: 'step/start', data: { turn: n, step: 1 } },
    {
      type: 'assistant/message', surfaceOp: 'append', sourceEventSeqs: [],
      data: { turn: n, step: 1, usage: { inputTokens: 10, outputTokens: 5 }, message: { id: `a${n}`, role: 'assistant', content: [{ type: 'tool-call', id: callId, name: 'bash', arguments: '{}' }], source: { kind: 'model', provider: 'openai', model: 'gpt-4.1' } } },
    },
    { type: 'tool/call', data: { turn: n, step: 1, callId, name: 'bash', arguments: '{}' } },
    {
      type: 'tool/result', surfaceOp: 'append', sourceEventSeqs: [base + 4],
      data: { turn: n, step: 1, message: { id: `r${n}`, role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: 'ok' }] }] } },
    },
    { type: 'step/end', data: { turn: n, step: 1 } },
    { type: 'turn/end', data: { turn: n, reason: { kind: 'completed' } } },
  ];
  return events.map((e) => JSON.stringify(e)).join('\n') + '\n';
}

const genai = (): ReceivedSpan[] => receiver.spans.filter((s) => s.scope === GENAI_SCOPE_NAME);

describe('serve --otel-genai-export', () => {
  it('exports each committed turn; a turn the collector refused before a SIGKILL is exported after the restart, and nothing twice', async () => {
    const db = dirs.freshPath();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_SERVICE_NAME: 'palimpsest-test' };
    const args = ['--db', db, '--otel-genai-export'];
    let s: ServerProcess = await spawnServer(args, 15_000, env);
    try {
      const cli = cliFor(s.address);
      const cliIn = cliWithInput(s.address);
      expect((await cli('create', '--id', 'S')).code).toBe(0);
      const t1 = await cliIn(turnJsonl(1, 0), 'append', 'S', '-');
      expect(t1.stderr).toBe('');
      await waitFor(() => genai().length === 3, 15_000, 'turn 1 exported');
      expect(genai().map((x) => [x.traceId, x.name])).toEqual([
        [genAiTraceId('S', 0), 'invoke_agent'], [genAiTraceId('S', 0), 'chat gpt-4.1'], [genAiTraceId('S', 0), 'execute_tool bash'],
      ]);
      expect(genai()[0]?.resource['service.name']).toBe('palimpsest-test');

      // The collector goes down; turn 2 commits; the server is killed before it could export it.
      receiver.failNext(1_000_000);
      const refusedBefore = receiver.refused();
      expect((await cliIn(turnJsonl(2, 8), 'append', 'S', '-')).code).toBe(0);
      await waitFor(() => receiver.refused() > refusedBefore, 15_000, 'an export refused by the collector');
      s.proc.kill('SIGKILL');
      await s.exited;
      const journal = readFileSync(`${db}.otel-genai-positions`, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { s?: string; n?: number });
      expect(journal.filter((r) => r.s === 'S').at(-1)?.n).toBe(8);
      expect(genai()).toHaveLength(3);

      receiver.failNext(0);
      s = await spawnServer(args, 15_000, env);
      await waitFor(() => genai().length === 6, 15_000, 'turn 2 exported after the restart');
      const after = genai().slice(3);
      expect(after.map((x) => x.traceId)).toEqual(Array(3).fill(genAiTraceId('S', 8)));
      expect(after[0]?.spanId).toBe(genAiSpanId('S', 8, 'invoke_agent'));
      expect(after.every((x) => x.attributes['gen_ai.conversation.id'] === 'S')).toBe(true);
      // Turn 1's spans were not sent again.
      expect(genai().filter((x) => x.traceId === genAiTraceId('S', 0))).toHaveLength(3);
    } finally {
      s.proc.kill('SIGTERM');
      await s.exited;
    }
  });
});
