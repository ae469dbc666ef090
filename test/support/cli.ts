/**
 * Runs the built `palimpsest` binary as a child process (the CLI tests drive a real server
 * through it exactly as a shell would).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { ROOT } from './server-process.js';

/** What a finished CLI run produced. */
export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Options of a run. */
export interface CliOptions {
  /** Bytes fed to stdin (closed right after). */
  readonly input?: string;
  /** Extra environment (PALIMPSEST_ADDR, NO_COLOR, ...). */
  readonly env?: Record<string, string>;
}

/** Spawns `node bin/palimpsest.mjs ...args` without waiting for it. */
export function spawnCli(args: readonly string[], env: Record<string, string> = {}): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, [join(ROOT, 'bin/palimpsest.mjs'), ...args], {
    cwd: ROOT, env: { ...process.env, PALIMPSEST_ADDR: '', PALIMPSEST_TOKEN: '', ...env }, stdio: 'pipe',
  });
}

/** Runs the CLI to completion. */
export function runCli(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  const proc = spawnCli(args, options.env);
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
  proc.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  proc.stdin.end(options.input ?? '');
  return new Promise((resolve, reject) => {
    proc.once('error', reject);
    proc.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A CLI bound to one server address: `cli('surface', 's1', '--json')`. */
export function cliFor(addr: string): (...args: string[]) => Promise<CliResult> {
  return (...args) => runCli([...args, '--addr', addr]);
}

/** A CLI bound to one server address, feeding `input` to stdin. */
export function cliWithInput(addr: string): (input: string, ...args: string[]) => Promise<CliResult> {
  return (input, ...args) => runCli([...args, '--addr', addr], { input });
}

/** A loopback port nothing listens on (bound then released). */
export async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/** Parses JSON lines (blank lines skipped). */
export function jsonLines(text: string): unknown[] {
  return text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as unknown);
}

/** A running CLI whose stdout lines are collected; `until` waits for a condition (no sleeps). */
export class RunningCli {
  readonly lines: string[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;
  #partial = '';
  readonly #waiters = new Set<() => void>();

  constructor(readonly proc: ChildProcessWithoutNullStreams) {
    proc.stdout.on('data', (d: Buffer) => {
      const parts = (this.#partial + d.toString()).split('\n');
      this.#partial = parts.pop() ?? '';
      this.lines.push(...parts);
      for (const w of this.#waiters) w();
    });
    proc.stderr.on('data', (d: Buffer) => { this.stderr += d.toString(); });
    this.exited = new Promise((resolve) => proc.once('close', (code) => {
      for (const w of this.#waiters) w();
      resolve(code);
    }));
  }

  /** Resolves once `pred(lines)` holds; rejects after `ms` or if the process exits first. */
  until(pred: (lines: string[]) => boolean, ms = 10_000): Promise<void> {
    if (pred(this.lines)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`timed out; lines so far:\n${this.lines.join('\n')}\nstderr: ${this.stderr}`)), ms);
      const check = (): void => {
        if (pred(this.lines)) done();
        else if (this.proc.exitCode !== null || this.proc.signalCode !== null) done(new Error(`exited (${this.proc.exitCode}); stderr: ${this.stderr}`));
      };
      const done = (err?: Error): void => {
        clearTimeout(timer);
        this.#waiters.delete(check);
        if (err) reject(err);
        else resolve();
      };
      this.#waiters.add(check);
    });
  }
}
