/**
 * The installable Python package (clients/python, issue #18): its committed stubs match proto/,
 * `pip install --no-build-isolation ./clients/python` builds it with a standard backend
 * (setuptools, Debian's python3-setuptools) with no package index at all, and the package's pytest
 * suite (client, errors, event builders, the OpenAI Agents SDK session adapter, the typed stubs)
 * passes against a real server (and a server process it restarts, for the session feed's resume), run
 * from the installed copy.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { ensureBuilt } from '../support/server-process.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { missingPython, onPath, PYTHON, run, toolchainIt } from '../support/toolchains.js';

const ROOT = join(import.meta.dirname, '..', '..');
const PKG = join(ROOT, 'clients', 'python');
const STUBS = join(PKG, 'src', 'palimpsest', 'v1');

function missing(): string[] {
  const m = missingPython(['grpc', 'google.protobuf', 'pytest', 'venv', 'mypy', 'setuptools', 'wheel']);
  for (const b of ['protoc-gen-mypy', 'protoc-gen-mypy_grpc']) if (!onPath(b)) m.push(`${b} (mypy-protobuf)`);
  return m;
}

describe('Python package clients/python', () => {
  let ts: TestServer;
  let tmp: string;
  beforeAll(async () => {
    ensureBuilt(); // the feed's restart test runs `node bin/palimpsest.mjs serve` (dist/) itself
    ts = await startTestServer();
    tmp = mkdtempSync(join(tmpdir(), 'palimpsest-py-'));
  }, 120_000);
  afterAll(async () => {
    await ts?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  toolchainIt('python', missing(), 'committed stubs (+ .pyi) are exactly what clients/run.sh stubs generates from proto/', async () => {
    const out = join(tmp, 'stubs');
    const gen = await run(join(ROOT, 'clients', 'run.sh'), ['stubs', out], { cwd: ROOT });
    expect(gen.code, gen.stderr).toBe(0);
    const fresh = join(out, 'palimpsest', 'v1');
    const names = readdirSync(STUBS).filter((f) => f !== '__pycache__').sort();
    expect(readdirSync(fresh).sort(), 'file list differs: run clients/run.sh stubs and commit').toEqual(names);
    expect(names).toEqual(expect.arrayContaining(['event_pb2.py', 'event_pb2.pyi', 'service_pb2_grpc.py', 'service_pb2_grpc.pyi']));
    for (const f of names) {
      expect(readFileSync(join(fresh, f), 'utf8'), `${f} is stale: run clients/run.sh stubs and commit`).toBe(readFileSync(join(STUBS, f), 'utf8'));
    }
  }, 60_000);

  toolchainIt('python', missing(), 'pip install with no index (setuptools backend), then the package tests against a real server', async () => {
    const venv = join(tmp, 'venv');
    const mk = await run(PYTHON, ['-m', 'venv', '--system-site-packages', venv]);
    expect(mk.code, mk.stderr).toBe(0);
    const py = join(venv, 'bin', 'python');
    // No index, no find-links, no pip config: the install must need nothing from outside. The
    // build backend (setuptools + wheel) comes from the system's site-packages (Debian's
    // python3-setuptools, python3-wheel), which --no-build-isolation lets pip use.
    const offline = { ...process.env, PIP_NO_INDEX: '1', PIP_CONFIG_FILE: '/dev/null', PIP_FIND_LINKS: '', PIP_DISABLE_PIP_VERSION_CHECK: '1', PYTHONPATH: '' };
    const pip = await run(py, ['-m', 'pip', 'install', '--no-build-isolation', PKG], { cwd: tmp, env: offline, timeoutMs: 120_000 });
    expect(pip.code, pip.stdout + pip.stderr).toBe(0);
    expect(pip.stdout).toContain('Successfully installed palimpsest-client-0.1.0');
    const where = await run(py, ['-c', 'import palimpsest.client, palimpsest.v1.service_pb2 as s; print(palimpsest.__file__)'], { cwd: tmp, env: offline });
    expect(where.code, where.stderr).toBe(0);
    const site = join(venv, 'lib', where.stdout.trim().split('/lib/')[1]!.split('/')[0]!, 'site-packages');
    expect(where.stdout.trim()).toBe(join(site, 'palimpsest', '__init__.py'));
    // Built by setuptools' bdist_wheel (not an in-tree backend), with the typed stubs and the
    // PEP 561 marker in the wheel.
    const dist = join(site, 'palimpsest_client-0.1.0.dist-info');
    expect(readFileSync(join(dist, 'WHEEL'), 'utf8')).toMatch(/^Generator: bdist_wheel /m);
    const installed = readdirSync(join(site, 'palimpsest', 'v1'));
    for (const f of readdirSync(STUBS).filter((n) => n.endsWith('.pyi'))) expect(installed, `${f} missing from the wheel`).toContain(f);
    expect(readdirSync(join(site, 'palimpsest'))).toContain('py.typed');

    const env = { ...offline, PALIMPSEST_ADDR: ts.server.address, PALIMPSEST_NODE: process.execPath };
    const tests = await run(py, ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', join(PKG, 'tests')], { cwd: tmp, env, timeoutMs: 180_000 });
    expect(tests.code, tests.stdout + tests.stderr).toBe(0);
    const summary = tests.stdout.trim().split('\n').at(-1) ?? '';
    expect(summary).toMatch(/^\d+ passed in /);
    expect(Number(summary.split(' ')[0])).toBeGreaterThanOrEqual(20);
  }, 240_000);
});
