/**
 * The built server as a child process (`node bin/palimpsest.mjs serve`), for tests that kill it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The repository root. */
export const ROOT = new URL('../..', import.meta.url).pathname;

function newestMtime(dir: string): number {
  let max = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    max = Math.max(max, entry.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return max;
}

/**
 * Builds dist/ (`tsc -p tsconfig.build.json`) unless it is newer than every source file. Type
 * errors elsewhere in the tree do not stop tsc from emitting, so only a missing output fails.
 */
export function ensureBuilt(): void {
  const out = join(ROOT, 'dist/src/cli/main.js');
  const sources = [join(ROOT, 'src'), join(ROOT, 'gen'), join(ROOT, 'clients/typescript/src')];
  if (existsSync(out) && statSync(out).mtimeMs > Math.max(...sources.map(newestMtime))) return;
  const r = tsc('tsconfig.build.json');
  if (!existsSync(out)) throw new Error(`build failed:\n${r.stdout}\n${r.stderr}`);
}

/** Builds the @palimpsest/client package (clients/typescript/dist) unless it is newer than its sources. */
export function ensureClientBuilt(): void {
  const out = join(ROOT, 'clients/typescript/dist/index.d.ts');
  if (existsSync(out) && statSync(out).mtimeMs > newestMtime(join(ROOT, 'clients/typescript/src'))) return;
  const r = tsc('clients/typescript/tsconfig.json');
  if (r.status !== 0 || !existsSync(out)) throw new Error(`client build failed:\n${r.stdout}\n${r.stderr}`);
}

function tsc(project: string): ReturnType<typeof spawnSync> & { stdout: string; stderr: string } {
  return spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project], { cwd: ROOT, encoding: 'utf8' });
}

/** A running server process. */
export interface ServerProcess {
  readonly proc: ChildProcess;
  /** host:port it listens on. */
  readonly address: string;
  /** Resolves with the exit code/signal. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Everything written to stdout so far. */
  stdout(): string;
}

/** Spawns `palimpsest serve` on 127.0.0.1:0 and resolves once it prints its address (`nodeArgs`: node's own flags, e.g. --cpu-prof). */
export function spawnServer(args: readonly string[], timeoutMs = 15_000, env: Record<string, string> = {}, nodeArgs: readonly string[] = []): Promise<ServerProcess> {
  const proc = spawn(process.execPath, [...nodeArgs, join(ROOT, 'bin/palimpsest.mjs'), 'serve', '--listen', '127.0.0.1:0', '--log-level', 'silent', ...args], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`server did not start within ${timeoutMs} ms:\n${out}\n${err}`));
    }, timeoutMs);
    proc.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /palimpsest listening on (\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, address: m[1] as string, exited, stderr: () => err, stdout: () => out });
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before listening:\n${out}\n${err}`));
    });
  });
}
