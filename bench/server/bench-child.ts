/**
 * What the per-call server scripts (percall.ts, reads-percall.ts) and the server bench share: the
 * bench's agent-step events, a bundled bench child process (bench/server/child.ts) and a process's
 * CPU time from /proc.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { CandidateEvent } from '../../src/domain/event.js';

/** An agent-step mix (5 chunks, assistant message with a tool call, tool call, tool result) as import candidates. */
export function stepEvents(step: number, seq0: number): CandidateEvent[] {
  const t = 1_760_000_000_000 + seq0;
  const out: CandidateEvent[] = [];
  for (let i = 0; i < 5; i++) out.push({ seq: seq0 + i, time: t + i, type: 'assistant/chunk', data: { turn: 1, step, chunk: { type: 'text-delta', index: 0, text: 'The quick brown fox ' } } } as CandidateEvent);
  out.push({
    seq: seq0 + 5, time: t + 5, type: 'assistant/message', surfaceOp: 'append',
    data: { turn: 1, step, message: { id: `a${step}`, role: 'assistant', content: [{ type: 'text', text: 'The quick brown fox jumps over the lazy dog.' }, { type: 'tool-call', id: `c${step}`, name: 'bash', arguments: '{"command":"ls"}' }], source: { kind: 'model', provider: 'p', model: 'm' } }, usage: { inputTokens: 10, outputTokens: 2 } },
  } as CandidateEvent);
  out.push({ seq: seq0 + 6, time: t + 6, type: 'tool/call', data: { turn: 1, step, callId: `c${step}`, name: 'bash', arguments: '{"command":"ls"}' } } as CandidateEvent);
  out.push({
    seq: seq0 + 7, time: t + 7, type: 'tool/result', surfaceOp: 'append',
    data: { turn: 1, step, message: { id: `r${step}`, role: 'user', source: { kind: 'tool', callId: `c${step}` }, content: [{ type: 'tool-result', toolCallId: `c${step}`, content: [{ type: 'text', text: 'file-a\nfile-b\nfile-c' }], isError: false }] } },
  } as CandidateEvent);
  return out;
}

/** A running bench child: its pid and address, its store's counters (SIGUSR2), and stop. */
export interface BenchChild<S = unknown> {
  readonly pid: number;
  readonly address: string;
  stop(): Promise<void>;
  stats(): Promise<S>;
}

/** Spawns `command` (bundleServerChild()) with `args` and node flags `flags`; resolves once it prints its port. */
export async function spawnBenchChild<S = unknown>(command: readonly string[], args: readonly string[], flags: readonly string[] = []): Promise<BenchChild<S>> {
  const proc = spawn(process.execPath, [...flags, ...command, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = createInterface({ input: proc.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    rl.once('line', (l) => resolve((JSON.parse(l) as { port: number }).port));
    proc.once('exit', (code) => reject(new Error(`exited ${code}`)));
  });
  return {
    pid: proc.pid!, address: `127.0.0.1:${port}`,
    stats: () => new Promise((resolve) => {
      rl.once('line', (l) => resolve((JSON.parse(l) as { stats: S }).stats));
      proc.kill('SIGUSR2');
    }),
    stop: () => new Promise((r) => { proc.once('exit', () => r()); proc.kill('SIGTERM'); }),
  };
}

/** utime+stime in seconds of a process (all threads) or of one of its threads (the main thread: tid = pid). */
export function cpuSeconds(pid: number, tid?: number): number {
  const s = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // USER_HZ
}
