/**
 * `palimpsest serve` with the web port from the environment (PALIMPSEST_WEB_LISTEN) and a flag
 * (--web-cors-origins): the built CLI serves the viewer at `/` and the API on the same port.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../support/server-process.js';
import { webClient } from '../support/web-client.js';
import { parseServeArgs } from '../../src/cli/serve.js';

describe('palimpsest serve --web-listen', () => {
  it('parses --web-listen / PALIMPSEST_WEB_LISTEN and --web-cors-origins (flags win)', () => {
    expect(parseServeArgs([], { PALIMPSEST_WEB_LISTEN: '127.0.0.1:8080' })).toMatchObject({ webListen: '127.0.0.1:8080', webCorsOrigins: [] });
    expect(parseServeArgs(['--web-listen', '127.0.0.1:9', '--web-cors-origins', 'https://a.example, https://b.example'], { PALIMPSEST_WEB_LISTEN: '127.0.0.1:8080' }))
      .toMatchObject({ webListen: '127.0.0.1:9', webCorsOrigins: ['https://a.example', 'https://b.example'] });
    expect(parseServeArgs([], {}).webListen).toBe('');
  });

  it('serves the viewer and the API from the built CLI', async () => {
    ensureBuilt();
    if (!existsSync(join(ROOT, 'dist/web/index.html'))) {
      execFileSync(join(ROOT, 'node_modules/.bin/vite'), ['build', '--config', 'web/vite.config.ts', '--logLevel', 'error'], { cwd: ROOT, stdio: 'pipe' });
    }
    const proc = spawn(process.execPath, [join(ROOT, 'bin/palimpsest.mjs'), 'serve', '--listen', '127.0.0.1:0', '--db', ':memory:', '--log-level', 'silent'], {
      cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PALIMPSEST_WEB_LISTEN: '127.0.0.1:0' },
    });
    const exited = new Promise((r) => proc.once('exit', r));
    try {
      const web = await new Promise<string>((resolve, reject) => {
        let out = '';
        proc.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /web port \(Connect, gRPC-Web, viewer\) on (\S+)/.exec(out);
          if (m) resolve(m[1] as string);
        });
        proc.once('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
      });
      const page = await fetch(`http://${web}/sessions/anything`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<title>Palimpsest</title>');
      const c = webClient(`http://${web}`, 'connect', '1.1');
      expect((await c.createSession({ sessionId: 'cli' })).session?.id).toBe('cli');
    } finally {
      proc.kill('SIGTERM');
      await exited;
    }
  }, 60_000);
});
