/**
 * Every `palimpsest` command README.md shows runs as written, in order, against a real server
 * whose SQLite file is `palimpsest.db` in the working directory (so `backup --db palimpsest.db`
 * and `verify --db palimpsest.db` read the server's own file). `npx palimpsest` and `palimpsest`
 * both run this checkout's bin/palimpsest.mjs; `watch` runs until its first line and is then
 * stopped with Ctrl-C (SIGINT), which must exit 0.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { run } from '../support/toolchains.js';
import { fencedBlocks } from '../support/markdown.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'palimpsest.mjs');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The README's shell lines that run `palimpsest` (continuations joined), in order. */
export function palimpsestLines(md: string): string[] {
  const out: string[] = [];
  for (const block of fencedBlocks(md, 'sh')) {
    let pending = '';
    for (const raw of block) {
      const line = pending + raw;
      if (/\\\s*$/.test(raw)) {
        pending = line.replace(/\\\s*$/, ' ');
        continue;
      }
      pending = '';
      if (/(^|\|\s*)(npx\s+)?palimpsest\s/.test(line.trim())) out.push(line.trim());
    }
  }
  return out;
}

/** A `watch` line's arguments (no quoting in them), without its comment. */
function watchArgs(line: string): string[] {
  return line.replace(/\s+#.*$/, '').replace(/^(npx\s+)?palimpsest\s+/, '').split(/\s+/);
}

describe('README.md commands', () => {
  let ts: TestServer;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'palimpsest-readme-'));
    symlinkSync(join(ROOT, 'test'), join(dir, 'test'));
    const bin = join(dir, '.bin');
    mkdirSync(bin);
    // `npx palimpsest` and `palimpsest` both run this checkout's command.
    writeFileSync(join(bin, 'palimpsest'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
    writeFileSync(join(bin, 'npx'), `#!/bin/sh\n[ "$1" = palimpsest ] || { echo "npx $1: not a README command" >&2; exit 99; }\nshift\nexec "${process.execPath}" "${BIN}" "$@"\n`);
    chmodSync(join(bin, 'palimpsest'), 0o755);
    chmodSync(join(bin, 'npx'), 0o755);
    ts = await startTestServer({ db: join(dir, 'palimpsest.db') });
    env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, PALIMPSEST_ADDR: ts.server.address, NO_COLOR: '1' };
  });
  afterAll(async () => {
    await ts?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('finds the commands (continuation lines joined)', () => {
    const lines = palimpsestLines('```sh\nnpm ci\necho x \\\n  | npx palimpsest append demo -\npalimpsest surface demo   # seqs\n```\n```json\npalimpsest not-sh\n```\n');
    expect(lines).toEqual(['echo x    | npx palimpsest append demo -', 'palimpsest surface demo   # seqs']);
  });

  it('every palimpsest command in README.md runs, in order, and exits 0', async () => {
    const lines = palimpsestLines(README);
    expect(lines.length).toBeGreaterThanOrEqual(15);
    for (const line of lines) {
      if (/\bpalimpsest\s+watch\s/.test(line)) {
        const child = spawn(process.execPath, [BIN, ...watchArgs(line)], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
        const code = await new Promise<number | null>((resolve) => {
          const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
          let stopped = false;
          child.stdout.on('data', (b: Buffer) => {
            out += b.toString();
            // One Ctrl-C, as a person presses it once.
            if (!stopped && out.includes('\n')) {
              stopped = true;
              child.kill('SIGINT');
            }
          });
          child.on('close', (c) => { clearTimeout(timer); resolve(c); });
        });
        expect(out, `${line}: no output (${err})`).toContain('\n');
        expect(code, `${line}: ${err}`).toBe(0);
        continue;
      }
      const r = await run('/bin/sh', ['-c', line], { cwd: dir, env, timeoutMs: 60_000 });
      expect(r.code, `${line}\n${r.stdout}\n${r.stderr}`).toBe(0);
    }
  }, 240_000);
});
