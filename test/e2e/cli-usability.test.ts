/**
 * CLI behaviours of issue #18 that people expect from kubectl/temporal/nats: --version, global
 * options before or after the command, "did you mean" with the command's usage instead of
 * parseArgs' text, values named by the flag or environment variable they came from, serve --help
 * with real placeholders, and a port in use said in one line.
 */
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { ensureBuilt, spawnServer } from '../support/server-process.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

let ts: TestServer;
let addr: string;
beforeAll(async () => {
  ensureBuilt();
  ts = await startTestServer();
  addr = ts.server.address;
});
afterAll(async () => { await ts?.stop(); });

describe('palimpsest --version', () => {
  it('prints the package version', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await runCli([flag]);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('palimpsest 0.1.0\n');
    }
  });
});

describe('global options', () => {
  it('are accepted before the command as well as after it', async () => {
    expect((await runCli(['create', '--id', 'g1', '--addr', addr])).code).toBe(0);
    const after = await runCli(['surface', 'g1', '--json', '--addr', addr]);
    const before = await runCli(['--addr', addr, '--json', 'surface', 'g1']);
    const mixed = await runCli([`--addr=${addr}`, 'surface', 'g1', '--json']);
    expect(after).toMatchObject({ code: 0, stdout: '[]\n' });
    expect(before).toEqual(after);
    expect(mixed).toEqual(after);
  });

  it('an unknown option before the command gets a suggestion', async () => {
    const r = await runCli(['--adr', addr, 'sessions']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown option --adr before the command; did you mean --addr?');
  });
});

describe('usage errors', () => {
  it('an unknown option: did you mean, and the usage line, never parseArgs text', async () => {
    const r = await runCli(['surface', 'g1', '--adr', addr]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`error: USAGE: unknown option --adr for palimpsest surface; did you mean --addr?\nusage: palimpsest surface SESSION [--output json|yaml|table] [--as-of SEQ]\n(see palimpsest surface --help)\n`);
    expect(r.stderr).not.toContain('positional argument');
    const json = await runCli(['events', 'g1', '--limt', '3', '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toMatchObject({ code: 'INVALID_ARGUMENT', reason: 'USAGE', message: expect.stringContaining('did you mean --limit?') });
  });

  it('an unknown command suggests the closest one', async () => {
    const r = await runCli(['sesions']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "sesions"; did you mean sessions?');
    expect((await runCli(['frobnicate'])).stderr).not.toContain('did you mean');
  });

  it('a missing value names the flag and its placeholder; a flag given a value says it takes none', async () => {
    const missing = await runCli(['events', 'g1', '--limit']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--limit needs a value (N)');
    const flag = await runCli(['surface', 'g1', '--json=yes']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('--json is a flag and takes no value');
  });

  it('an invalid value from the environment names the variable', async () => {
    const env = await runCli(['surface', 'g1', '--addr', addr], { env: { PALIMPSEST_CONNECT_TIMEOUT: 'soon' } });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('PALIMPSEST_CONNECT_TIMEOUT (the environment variable for --connect-timeout) must be an integer >= 1, got "soon"');
    const flag = await runCli(['surface', 'g1', '--addr', addr, '--connect-timeout', 'soon']);
    expect(flag.stderr).toContain('--connect-timeout must be an integer >= 1, got "soon"');
    const serve = await runCli(['serve', '--db', ':memory:'], { env: { PALIMPSEST_DURABILITY: 'fast' } });
    expect(serve.code).toBe(2);
    expect(serve.stderr).toBe('error: PALIMPSEST_DURABILITY (the environment variable for --durability) must be full or normal, got "fast"\n');
    const writer = await runCli(['serve', '--db', ':memory:', '--sqlite-writer', 'both']);
    expect(writer.code).toBe(2);
    expect(writer.stderr).toBe('error: --sqlite-writer must be thread or inline, got "both"\n');
  });
});

describe('serve', () => {
  it('--help shows real placeholders', async () => {
    const r = await runCli(['serve', '--help']);
    expect(r.code).toBe(0);
    for (const s of ['--listen HOST:PORT', '--db FILE', '--durability full|normal', '--sqlite-writer thread|inline', '--max-batch-events N', '--heartbeat-ms MS',
      '--max-message-bytes BYTES', '--log-level LEVEL', '--tls-cert FILE', '--auth-tokens FILE', '--metrics-listen HOST:PORT',
      '--web-listen HOST:PORT', '--web-cors-origins ORIGIN,...']) {
      expect(r.stdout).toContain(s);
    }
    expect(r.stdout).not.toContain(' VALUE');
    expect(r.stdout).toMatch(/--insecure\n/);
  });

  it('a port in use is said in one line', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const r = await runCli(['serve', '--db', ':memory:', '--listen', `127.0.0.1:${port}`, '--log-level', 'silent']);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`error: 127.0.0.1:${port} is already in use (another palimpsest serve?); stop it or pick another address with --listen\n`);
      const metrics = await runCli(['serve', '--db', ':memory:', '--listen', '127.0.0.1:0', '--metrics-listen', `127.0.0.1:${port}`, '--log-level', 'silent']);
      expect(metrics.code).toBe(1);
      expect(metrics.stderr).toBe(`error: 127.0.0.1:${port} is already in use (another palimpsest serve?); stop it or pick another address with --metrics-listen\n`);
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });

  it('--metrics-listen on port 0 prints the port it bound, before the listening line', async () => {
    const s = await spawnServer(['--db', ':memory:', '--metrics-listen', '127.0.0.1:0']);
    try {
      const m = /^metrics \(Prometheus \/metrics\) on 127\.0\.0\.1:(\d+)\npalimpsest listening on /m.exec(s.stdout());
      expect(m, s.stdout()).not.toBeNull();
      const res = await fetch(`http://127.0.0.1:${m![1]}/metrics`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('palimpsest_cached_sessions');
    } finally {
      s.proc.kill('SIGTERM');
      await s.exited;
    }
  });
});
