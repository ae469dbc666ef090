/**
 * Non-Node toolchains the client tests use (Python, Go, from .ci/system-deps): what is missing,
 * a test that fails under CI=true and is skipped (naming what is missing) elsewhere, and a child
 * process run with its output collected.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { expect, it } from 'vitest';

const CI = process.env.CI === 'true';

/** Whether `bin` is an executable on PATH. */
export function onPath(bin: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((d) => d !== '' && existsSync(join(d, bin)));
}

/** Debian's python3 (its grpcio/protobuf/pytest live there, not in a pyenv python on PATH). */
export const PYTHON = '/usr/bin/python3';

/** What the Python client tests need and is missing (empty = everything is there). */
export function missingPython(modules: readonly string[] = ['grpc', 'google.protobuf']): string[] {
  const missing = ['protoc', 'grpc_python_plugin'].filter((b) => !onPath(b));
  for (const m of modules) {
    if (spawnSync(PYTHON, ['-c', `import ${m}`], { stdio: 'ignore' }).status !== 0) missing.push(`${PYTHON} module ${m}`);
  }
  return missing;
}

/** What the Go client tests need and is missing. */
export function missingGo(): string[] {
  const missing = ['go', 'protoc-gen-go', 'protoc-gen-go-grpc'].filter((b) => !onPath(b));
  if (!existsSync('/usr/share/gocode/src/google.golang.org/grpc')) missing.push('golang-google-grpc-dev');
  if (!existsSync('/usr/share/gocode/src/google.golang.org/protobuf')) missing.push('golang-google-protobuf-dev');
  // github.com/golang/protobuf 1.3 (APIv1) makes grpc-go panic on APIv2 messages; 1.5 wraps APIv2.
  if (existsSync('/usr/share/gocode/src/github.com/golang/protobuf/proto/table_unmarshal.go')) missing.push('golang-github-golang-protobuf-1-5-dev');
  return missing;
}

/** Runs a test when its toolchain is there; fails under CI when it is not; skips otherwise. */
export function toolchainIt(lang: string, missing: string[], name: string, fn: () => Promise<void>, timeout: number): void {
  if (missing.length > 0 && !CI) {
    it.skip(`${name} (skipped: ${lang} toolchain missing: ${missing.join(', ')}; run .ci/system-deps)`, fn);
    return;
  }
  it(name, async () => {
    expect(missing, `${lang} toolchain missing under CI (run .ci/system-deps)`).toEqual([]);
    await fn();
  }, timeout);
}

/** A finished child process. */
export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `cmd args` to completion (SIGKILL after `timeoutMs`); `onStderr` sees stderr as it arrives. */
export function run(cmd: string, args: readonly string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; onStderr?: (all: string) => void } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 100_000);
    child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); opts.onStderr?.(stderr); });
    child.on('error', (e) => { clearTimeout(timer); reject(e); });
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}
