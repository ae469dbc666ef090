/**
 * A pager for long terminal output (`events --full`): `$PAGER`, else `less -FRX` (quits at once
 * when the text fits, keeps colours, leaves the text on screen), only when stdout is a terminal.
 * If the pager cannot start, output goes to the terminal directly.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Writable } from 'node:stream';
import type { OutStream } from './output.js';

/** An open pager: write to `stream`, then `close()` waits until the user quits it. */
export interface Pager {
  readonly stream: Writable;
  close(): Promise<void>;
}

/** A pager when `stdout` is a terminal and PAGER is not empty; undefined otherwise. */
export function openPager(stdout: OutStream, env: NodeJS.ProcessEnv): Pager | undefined {
  if (stdout.isTTY !== true) return undefined;
  const command = env['PAGER'] ?? 'less -FRX';
  if (command.trim() === '' || command.trim() === 'cat') return undefined;
  let child: ChildProcess;
  try {
    child = spawn(command, { shell: true, stdio: ['pipe', 'inherit', 'inherit'], env: { LESS: 'FRX', ...env } });
  } catch {
    return undefined;
  }
  const stream = child.stdin!;
  const exited = new Promise<void>((resolve) => {
    const done = (): void => { stream.destroy(); resolve(); };
    child.once('close', done);
    child.once('error', done);
  });
  stream.on('error', () => {}); // the user quit the pager early (EPIPE): stop quietly
  return {
    stream,
    async close() {
      stream.end();
      await exited;
    },
  };
}
