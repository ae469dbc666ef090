/**
 * docs/events.md's client examples run as written against a real server: the Python snippets (one
 * program, in order), the Go programs (the guide's example, the subscription) and the TypeScript
 * program. Every `print(...)  # X` /
 * `fmt.Println(...) // X` / `console.log(...); // X` line must print exactly X, and the `demo`
 * session each one writes must hold exactly the events of the guide's JSON example.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { PalimpsestClient } from '../../clients/typescript/src/index.js';
import { ensureClientBuilt, ROOT } from '../support/server-process.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { missingGo, missingPython, PYTHON, run, toolchainIt } from '../support/toolchains.js';

const DOC = readFileSync(join(ROOT, 'docs', 'events.md'), 'utf8');

/** The fenced blocks of one language, in order. */
function blocks(lang: string): string[] {
  return [...DOC.matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```$', 'gm'))].map((m) => m[1]!);
}

/** What the example's print lines say they print (the comment after each). */
function expectedOutput(code: string): string[] {
  return code.split('\n').flatMap((l) => {
    const m = /(?:^|\s)(?:print|fmt\.Println|console\.log)\(.*\);?\s+(?:#|\/\/) (.+)$/.exec(l);
    return m ? [m[1]!.trim()] : [];
  });
}

/** The session `demo` holds exactly the JSON example's events (type, data, surface op, citations). */
async function expectTheJsonExample(ts: TestServer): Promise<void> {
  const want = blocks('jsonl')[0]!.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const c = new PalimpsestClient(ts.server.address);
  try {
    const got: Record<string, unknown>[] = [];
    for await (const e of c.events('demo')) {
      if (e.seq >= want.length) break;
      const out: Record<string, unknown> = { type: e.type, data: e.data?.kind?.$case === 'json' ? JSON.parse(e.data.kind.value) as unknown : e.data };
      if (e.surfaceOp?.$case === 'append') out['surfaceOp'] = 'append';
      if (e.sourceEventSeqs) out['sourceEventSeqs'] = e.sourceEventSeqs.seqs;
      got.push(out);
    }
    expect(got).toEqual(want);
  } finally {
    c.close();
  }
}

describe('docs/events.md examples', () => {
  const servers: TestServer[] = [];
  const tmp = mkdtempSync(join(tmpdir(), 'palimpsest-docs-'));
  const server = async (): Promise<TestServer> => {
    const ts = await startTestServer();
    servers.push(ts);
    return ts;
  };
  afterAll(async () => {
    for (const s of servers) await s.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  toolchainIt('python', missingPython(['grpc', 'google.protobuf']), 'the Python snippets (palimpsest.client, palimpsest.events) print what they say', async () => {
    const code = blocks('python').join('\n');
    expect(code).toContain('from palimpsest.client import');
    const ts = await server();
    const env = { ...process.env, PALIMPSEST_ADDR: ts.server.address, PYTHONPATH: join(ROOT, 'clients', 'python', 'src') };
    const r = await run(PYTHON, ['-c', code], { cwd: tmp, env, timeoutMs: 60_000 });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(expectedOutput(code));
    expect(expectedOutput(code).length).toBeGreaterThanOrEqual(10);
    await expectTheJsonExample(ts);
  }, 90_000);

  toolchainIt('node', [], 'the TypeScript program (@palimpsest/client) prints what it says', async () => {
    ensureClientBuilt();
    const [code] = blocks('ts');
    expect(code).toContain("from '@palimpsest/client'");
    // A project with the package linked in (test/e2e/ts-client-package.test.ts installs the tarball).
    const app = join(tmp, 'ts-app');
    mkdirSync(join(app, 'node_modules', '@palimpsest'), { recursive: true });
    symlinkSync(join(ROOT, 'clients', 'typescript'), join(app, 'node_modules', '@palimpsest', 'client'));
    const ts = await server();
    const r = await run(process.execPath, ['--input-type=module', '-e', code!], { cwd: app, env: { ...process.env, PALIMPSEST_ADDR: ts.server.address }, timeoutMs: 60_000 });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(expectedOutput(code!));
    await expectTheJsonExample(ts);
  }, 90_000);

  toolchainIt('go', missingGo(), 'the Go programs (module palimpsest.dev/go) print what they say', async () => {
    const programs = blocks('go');
    expect(programs.length).toBeGreaterThanOrEqual(2); // the guide's example and the subscription
    for (const code of programs) expect(code).toContain('"palimpsest.dev/go/palimpsest"');
    const env = { ...process.env, PALIMPSEST_CLIENTS_BUILD: join(tmp, 'go-build') };
    const gen = await run(join(ROOT, 'clients', 'run.sh'), ['gen', 'go'], { cwd: ROOT, env, timeoutMs: 180_000 });
    expect(gen.code, gen.stderr).toBe(0);
    const ts = await server();
    const goEnv = {
      ...env, GOFLAGS: '-mod=vendor', GOPROXY: 'off', GO111MODULE: 'on',
      GOCACHE: process.env['GOCACHE'] ?? join(ROOT, 'node_modules', '.cache', 'go-build'), PALIMPSEST_ADDR: ts.server.address,
    };
    for (const code of programs) {
      // Built inside the module (its vendor/ from Debian's sources), in a directory `./...` ignores.
      const dir = mkdtempSync(join(ROOT, 'clients', 'go', '_docexample-'));
      try {
        writeFileSync(join(dir, 'main.go'), code);
        const r = await run('go', ['run', '.'], { cwd: dir, env: goEnv, timeoutMs: 180_000 });
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(r.stdout.trim().split('\n')).toEqual(expectedOutput(code));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    await expectTheJsonExample(ts);
  }, 240_000);
});
