/**
 * CLI items of issue #38: named contexts (`palimpsest context add|use|list|remove`), `-o
 * json|yaml|table` on the read commands, short flags, `palimpsest completion bash|zsh|fish`, and
 * `verify` reaching the server of PALIMPSEST_ADDR and naming it without grpc-js's `dns:` prefix.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../support/cli.js';
import { ensureBuilt, ROOT } from '../support/server-process.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

let ts: TestServer;
let addr: string;
const tmp = mkdtempSync(join(tmpdir(), 'palimpsest-cli-contexts-'));
let n = 0;
/** A fresh contexts file per test. */
const configFile = (): string => join(tmp, `contexts-${++n}.json`);

beforeAll(async () => {
  ensureBuilt();
  ts = await startTestServer();
  addr = ts.server.address;
});
afterAll(async () => {
  await ts?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

describe('palimpsest context', () => {
  it('add, list, use and remove; client commands connect as the current context says', async () => {
    const cfg = configFile();
    const cli = (...args: string[]): Promise<CliResult> => runCli(args, { env: { PALIMPSEST_CONFIG: cfg } });
    expect(await cli('context', 'add', 'dev', '--addr', addr)).toMatchObject({ code: 0, stdout: 'context dev added (current)\n' });
    expect(await cli('context', 'add', 'far', '--addr', '127.0.0.1:1', '--tls-ca', 'ca.pem')).toMatchObject({ code: 0, stdout: 'context far added\n' });
    const list = await cli('context', 'list', '-o', 'json');
    expect(JSON.parse(list.stdout)).toEqual([
      { name: 'dev', current: true, addr },
      { name: 'far', current: false, addr: '127.0.0.1:1', tlsCa: join(ROOT, 'ca.pem') },
    ]);
    expect((await cli('context', 'list')).stdout).toMatch(/^CURRENT\s+NAME\s+ADDR\s+TLS\s+TOKEN FILE\n\*\s+dev\s+\S+\s+no\n\s+far\s+127\.0\.0\.1:1\s+yes\n$/);
    // No --addr and no PALIMPSEST_ADDR: the current context's server.
    expect(await cli('create', '-i', 'ctx-1')).toMatchObject({ code: 0, stdout: 'ctx-1\n' });
    expect(await cli('context', 'use', 'far')).toMatchObject({ code: 0, stdout: 'using context far\n' });
    expect(JSON.parse(readFileSync(cfg, 'utf8')).current).toBe('far');
    // --context names one for a single command.
    expect(await cli('get', 'ctx-1', '--context', 'dev', '-o', 'json')).toMatchObject({ code: 0 });
    expect(await cli('context', 'remove', 'far')).toMatchObject({ code: 0, stdout: 'context far removed\n' });
    expect(JSON.parse(readFileSync(cfg, 'utf8'))).toEqual({ contexts: { dev: { addr } } });
  });

  it('flags win over everything; PALIMPSEST_ADDR wins over the current context but not over --context', async () => {
    const cfg = configFile();
    expect((await runCli(['context', 'add', 'dead', '--addr', '127.0.0.1:1'], { env: { PALIMPSEST_CONFIG: cfg } })).code).toBe(0);
    expect((await runCli(['create', '--id', 'ctx-env'], { env: { PALIMPSEST_CONFIG: cfg, PALIMPSEST_ADDR: addr } })).code).toBe(0);
    expect((await runCli(['get', 'ctx-env', '--addr', addr, '--context', 'dead'], { env: { PALIMPSEST_CONFIG: cfg } })).code).toBe(0);
    const named = await runCli(['get', 'ctx-env', '--context', 'dead', '--connect-timeout', '200'], { env: { PALIMPSEST_CONFIG: cfg, PALIMPSEST_ADDR: addr } });
    expect(named.code).toBe(3);
    expect(named.stderr).toContain('cannot reach the server at 127.0.0.1:1');
    // PALIMPSEST_CONTEXT picks one too.
    const fromEnv = await runCli(['get', 'ctx-env', '--connect-timeout', '200'], { env: { PALIMPSEST_CONFIG: cfg, PALIMPSEST_CONTEXT: 'dead' } });
    expect(fromEnv.code).toBe(3);
  });

  it('a context token file is read at connect time (the token is not stored)', async () => {
    const cfg = configFile();
    const tokenFile = join(tmp, 'token');
    writeFileSync(tokenFile, 'secret\n');
    // A token to a non-loopback address in plaintext is refused before dialling: proof it was read.
    expect((await runCli(['context', 'add', 'remote', '--addr', '10.9.9.9:50051', '--token-file', tokenFile], { env: { PALIMPSEST_CONFIG: cfg } })).code).toBe(0);
    expect(readFileSync(cfg, 'utf8')).not.toContain('secret');
    const r = await runCli(['sessions'], { env: { PALIMPSEST_CONFIG: cfg } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('refusing to send a bearer token to 10.9.9.9:50051 without TLS');
  });

  it('bad input is refused with exit 2, a reason and the file untouched', async () => {
    const cfg = configFile();
    const cli = (...args: string[]): Promise<CliResult> => runCli(args, { env: { PALIMPSEST_CONFIG: cfg } });
    expect((await cli('context', 'add', 'dev', '--addr', addr)).code).toBe(0);
    const before = readFileSync(cfg, 'utf8');
    const noAddr = await cli('context', 'add', 'x');
    expect(noAddr).toMatchObject({ code: 2, stderr: 'error: USAGE: palimpsest context add needs --addr HOST:PORT\n' });
    const unknown = await cli('context', 'use', 'dve');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no context "dve"');
    expect(unknown.stderr).toContain('did you mean dev?');
    const sub = await cli('context', 'ad', 'x');
    expect(sub.code).toBe(2);
    expect(sub.stderr).toContain('did you mean add?');
    const named = await cli('sessions', '--context', 'nope');
    expect(named.code).toBe(2);
    expect(named.stderr).toContain('no context "nope"');
    expect(readFileSync(cfg, 'utf8')).toBe(before);
    // Without a contexts file nothing changes: the default address applies.
    expect(existsSync(join(tmp, 'never.json'))).toBe(false);
  });
});

describe('-o json|yaml|table and short flags', () => {
  it('read commands print JSON, YAML or a table; other values are refused', async () => {
    const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--addr', addr]);
    expect((await cli('create', '-i', 'fmt-1', '-l', 'team=fmt', '-l', 'tier=gold')).code).toBe(0);
    expect((await cli('create', '-i', 'fmt-2', '-l', 'team=fmt')).code).toBe(0);
    const json = await cli('get', 'fmt-1', '-o', 'json');
    expect(json).toEqual(await cli('get', 'fmt-1', '--json'));
    const yaml = await cli('get', 'fmt-1', '-o', 'yaml');
    expect(yaml.code).toBe(0);
    const py = spawnSync('/usr/bin/python3', ['-c', 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))'], { input: yaml.stdout, encoding: 'utf8' });
    expect(py.status, py.stderr).toBe(0);
    expect(JSON.parse(py.stdout)).toEqual(JSON.parse(json.stdout));
    expect(yaml.stdout).toMatch(/^id: fmt-1$/m);
    expect((await cli('get', 'fmt-1', '-o', 'table')).stdout).toEqual((await cli('get', 'fmt-1')).stdout);
    // Short flags: -l label, -n limit.
    const two = JSON.parse((await cli('sessions', '-l', 'team=fmt', '-o', 'json')).stdout) as { id: string }[];
    expect(two.map((s) => s.id).sort()).toEqual(['fmt-1', 'fmt-2']);
    expect(JSON.parse((await cli('sessions', '-l', 'team=fmt', '-n', '1', '-o', 'json')).stdout)).toHaveLength(1);
    expect((await cli('surface', 'fmt-1', '-o', 'yaml')).stdout).toBe('[]\n');
    const bad = await cli('get', 'fmt-1', '-o', 'yml');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('-o must be json, yaml, table, got "yml"; did you mean yaml?');
    // export keeps -o FILE.
    const file = join(tmp, 'fmt-1.jsonl');
    expect((await cli('export', 'fmt-1', '-o', file)).code).toBe(0);
    expect(readFileSync(file, 'utf8')).toContain('"id":"fmt-1"');
    // Help shows them.
    const help = await cli('sessions', '--help');
    expect(help.stdout).toContain('-o, --output json|yaml|table');
    expect(help.stdout).toContain('-l, --label KEY=VALUE');
    expect(help.stdout).toContain('-n, --limit N');
  });
});

describe('palimpsest completion', () => {
  /** A `palimpsest` on PATH (the completion scripts call it for context names). */
  function pathWithCli(cfg: string): string {
    const bin = join(tmp, 'bin');
    spawnSync('mkdir', ['-p', bin]);
    writeFileSync(join(bin, 'palimpsest'), `#!/bin/sh\nPALIMPSEST_CONFIG=${cfg} exec ${process.execPath} ${join(ROOT, 'bin/palimpsest.mjs')} "$@"\n`);
    chmodSync(join(bin, 'palimpsest'), 0o755);
    return `${bin}:${process.env['PATH'] ?? ''}`;
  }

  it('bash completes commands, options, -o formats, subcommands and context names', async () => {
    const cfg = configFile();
    expect((await runCli(['context', 'add', 'dev', '--addr', addr], { env: { PALIMPSEST_CONFIG: cfg } })).code).toBe(0);
    const script = (await runCli(['completion', 'bash'])).stdout;
    const complete = (...words: string[]): string[] => {
      const w = words.map((x) => `'${x}'`).join(' ');
      const r = spawnSync('bash', ['-c', `source /dev/stdin <<'EOF'\n${script}EOF\nCOMP_WORDS=(palimpsest ${w}); COMP_CWORD=${words.length}; _palimpsest; printf '%s\\n' "\${COMPREPLY[@]}"`],
        { encoding: 'utf8', env: { ...process.env, PATH: pathWithCli(cfg) } });
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.split('\n').filter(Boolean);
    };
    expect(complete('se')).toEqual(['serve', 'sessions', 'search']);
    expect(complete('co')).toEqual(['context', 'completion', 'compact']);
    expect(complete('sessions', '--li')).toEqual(['--limit']);
    expect(complete('events', 's1', '-o', '')).toEqual(['json', 'yaml', 'table']);
    expect(complete('context', '')).toEqual(['add', 'use', 'list', 'remove']);
    expect(complete('completion', '')).toEqual(['bash', 'zsh', 'fish']);
    expect(complete('get', 's1', '--context', '')).toEqual(['dev']);
    expect(complete('context', 'use', '')).toEqual(['dev']);
    expect(complete('serve', '--dura')).toEqual(['--durability']);
  });

  it('zsh and fish scripts name every command; an unknown shell is refused', async () => {
    const help = (await runCli(['--help'])).stdout;
    const commands = [...help.matchAll(/^ {2}([a-z-]+) /gm)].map((m) => m[1]!).filter((c) => c !== 'palimpsest');
    expect(commands).toEqual(expect.arrayContaining(['serve', 'context', 'completion', 'sessions', 'watch']));
    const zsh = await runCli(['completion', 'zsh']);
    const fish = await runCli(['completion', 'fish']);
    expect(zsh.stdout.startsWith('#compdef palimpsest\n')).toBe(true);
    for (const c of commands) {
      expect(zsh.stdout).toContain(`'${c}:`);
      expect(fish.stdout).toContain(`-n __fish_use_subcommand -a ${c} -d`);
    }
    expect(fish.stdout).toContain("complete -c palimpsest -n '__fish_seen_subcommand_from sessions' -l limit -s n -r -d");
    const bad = await runCli(['completion', 'tcsh']);
    expect(bad).toMatchObject({ code: 2, stderr: 'error: USAGE: unknown shell "tcsh": palimpsest completion bash|zsh|fish\n' });
  });
});

describe('palimpsest verify', () => {
  it('checks the server of PALIMPSEST_ADDR when neither --db nor --addr is given, named without dns:', async () => {
    expect((await runCli(['create', '--id', 'verify-env', '--addr', addr])).code).toBe(0);
    const r = await runCli(['verify', '--json'], { env: { PALIMPSEST_ADDR: addr } });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { source: string; sessions: number };
    expect(report.source).toBe(addr);
    expect(report.sessions).toBeGreaterThanOrEqual(1);
    const text = await runCli(['verify', '--addr', addr]);
    expect(text.stdout).toMatch(new RegExp(`^verified ${addr.replace(/\./g, '\\.')}: `));
    expect(text.stdout).not.toContain('dns:');
  });
});
