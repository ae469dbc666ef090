/**
 * The TypeScript client is its own npm package, `@palimpsest/client` (clients/typescript, issue
 * #38): `npm pack` makes a tarball holding only the client (no server, no better-sqlite3, pg or
 * OpenTelemetry), and an empty project installs it offline (`npm ci --offline`: its lockfile names
 * the tarball and @grpc/grpc-js with the integrity hashes the repository's lockfile pins, all
 * served from npm's cache) and runs it against a real server, with the package's typed messages
 * checked by tsc.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureClientBuilt, ROOT } from '../support/server-process.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { run } from '../support/toolchains.js';

const PKG = join(ROOT, 'clients', 'typescript');
const NPM = join(process.execPath, '..', 'npm');

interface LockEntry { version?: string; resolved?: string; integrity?: string; dependencies?: Record<string, string>; optionalDependencies?: Record<string, string>; [k: string]: unknown }

/** The root lockfile's entries for `names` and everything they depend on, as an installed tree. */
function lockClosure(names: readonly string[]): Record<string, LockEntry> {
  const all = (JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }).packages;
  const resolve = (from: string, dep: string): string | undefined => {
    for (let at = from; ; at = at.slice(0, at.lastIndexOf('/node_modules/'))) {
      if (all[`${at}/node_modules/${dep}`]) return `${at}/node_modules/${dep}`;
      if (!at.includes('/node_modules/')) return all[`node_modules/${dep}`] ? `node_modules/${dep}` : undefined;
    }
  };
  const out: Record<string, LockEntry> = {};
  const queue = names.map((n) => `node_modules/${n}`);
  while (queue.length > 0) {
    const key = queue.shift()!;
    if (out[key]) continue;
    const { dev: _dev, devOptional: _devOptional, peer: _peer, ...entry } = all[key] ?? {};
    expect(entry.integrity, `${key} in package-lock.json`).toBeTruthy();
    out[key] = entry;
    for (const d of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) {
      const k = resolve(key, d);
      if (k) queue.push(k);
    }
  }
  return out;
}

describe('@palimpsest/client, packed and installed into an empty project', () => {
  let ts: TestServer;
  const tmp = mkdtempSync(join(tmpdir(), 'palimpsest-ts-package-'));
  beforeAll(async () => { ts = await startTestServer(); });
  afterAll(async () => {
    await ts?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('packs only the client, installs offline and runs against a server with typed messages', async () => {
    ensureClientBuilt();
    const manifest = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8')) as { name: string; version: string; dependencies: Record<string, string> };
    expect(manifest.name).toBe('@palimpsest/client');
    // The OpenTelemetry API (no dependencies of its own) propagates the caller's traceparent; without an SDK it does nothing.
    expect(Object.keys(manifest.dependencies).sort()).toEqual(['@bufbuild/protobuf', '@grpc/grpc-js', '@opentelemetry/api']);

    const pack = await run(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: PKG, timeoutMs: 60_000 });
    expect(pack.code, pack.stderr).toBe(0);
    const [packed] = JSON.parse(pack.stdout) as { filename: string; size: number; files: { path: string }[] }[];
    const files = packed!.files.map((f) => f.path);
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts', 'dist/gen/palimpsest/v1/service.js']));
    expect(files.filter((f) => !/^(package\.json|README\.md|dist\/.*\.(js|d\.ts))$/.test(f))).toEqual([]);
    expect(files.some((f) => /sqlite|postgres|server|otel|telemetry/i.test(f))).toBe(false);
    expect(packed!.size).toBeLessThan(200_000);

    // An empty project whose lockfile pins the tarball and grpc-js's tree (integrity from ours).
    const app = join(tmp, 'app');
    const tarball = join(tmp, packed!.filename);
    const dep = `file:${tarball}`;
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module', dependencies: { '@palimpsest/client': dep } }));
    const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
    writeFileSync(join(app, 'package-lock.json'), JSON.stringify({
      name: 'app', version: '1.0.0', lockfileVersion: 3, requires: true,
      packages: {
        '': { name: 'app', version: '1.0.0', dependencies: { '@palimpsest/client': dep } },
        'node_modules/@palimpsest/client': { version: manifest.version, resolved: dep, integrity, license: 'Apache-2.0', dependencies: manifest.dependencies, engines: { node: '>=20' } },
        ...lockClosure(Object.keys(manifest.dependencies)),
      },
    }, null, 2));
    const install = await run(NPM, ['ci', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: app, timeoutMs: 120_000 });
    expect(install.code, install.stdout + install.stderr).toBe(0);
    const installed = (await run('find', ['node_modules', '-maxdepth', '2', '-type', 'd'], { cwd: app })).stdout;
    // Nothing of the server: no SQLite, PostgreSQL, OpenTelemetry SDK, Connect or logger (the
    // OpenTelemetry API is the one dependency the client adds to grpc-js and protobuf).
    expect(installed).not.toMatch(/better-sqlite3|\/pg$|opentelemetry\/(?!api$)|connectrpc|pino/m);

    const program = `
      import { PalimpsestClient, PalimpsestError, events as ev } from '@palimpsest/client';
      const c = new PalimpsestClient(process.argv[2]);
      const id = 'ts-package';
      await c.createSession(id, { labels: { via: 'tarball' } });
      const seqs = await c.append(id, [ev.userMessage('hi', { id: 'u1' })]);
      let reason = '';
      try { await c.append(id, [ev.userMessage('x')], { expectedLastSeq: -1 }); } catch (e) { reason = e instanceof PalimpsestError ? e.reason : String(e); }
      const messages = await c.messages(id);
      const sessions = [];
      for await (const s of c.listSessions({ labels: { via: 'tarball' } })) sessions.push(s.id);
      console.log(JSON.stringify({ seqs, reason, messages, sessions }));
      c.close();`;
    writeFileSync(join(app, 'main.mjs'), program);
    const r = await run(process.execPath, ['main.mjs', ts.server.address], { cwd: app, timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      seqs: [0], reason: 'HEAD_MISMATCH', sessions: ['ts-package'],
      messages: [{ id: 'u1', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }],
    });

    // The published types: messages are Message[] (a wrong field is a type error, not unknown).
    writeFileSync(join(app, 'typed.ts'), `
      import { PalimpsestClient, type Message } from '@palimpsest/client';
      export async function first(c: PalimpsestClient): Promise<string> {
        const ms: Message[] = await c.messages('s');
        const m = ms[0]!;
        const block = m.content[0]!;
        // @ts-expect-error: a message has no such field
        void m.nope;
        return block.type === 'text' ? block.text + m.role + m.source.kind : m.id;
      }`);
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', skipLibCheck: false, types: ['node'], typeRoots: [join(ROOT, 'node_modules/@types')] },
      files: ['typed.ts'],
    }));
    const tsc = await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: app, timeoutMs: 120_000 });
    expect(tsc.code, tsc.stdout + tsc.stderr).toBe(0);
  }, 300_000);
});
