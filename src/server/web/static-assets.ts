/**
 * The viewer's static assets (the Vite build in dist/web), read into memory once at start and
 * served with strict headers. Any GET that is not a file gets index.html (the viewer routes
 * `/` and `/sessions/<id>` itself). Nothing is fetched from anywhere else: the CSP allows only
 * this origin (and data:/blob: images, which is how message images are shown).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.map': 'application/json',
  '.woff2': 'font/woff2',
};

/** Headers of every asset response. */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly immutable: boolean;
}

/** Where the built viewer is, from src/server/web (tsx, vitest) or dist/src/server/web (built). */
export function defaultAssetDir(): string | undefined {
  for (const rel of ['../../../dist/web', '../../../../dist/web']) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(join(p, 'index.html'))) return p;
  }
  return undefined;
}

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/** A request handler for the assets in `dir` (undefined: a page saying how to build them). */
export function staticAssets(dir: string | undefined): (req: Req, res: Res) => void {
  const assets = new Map<string, Asset>();
  if (dir) {
    for (const f of walk(dir)) {
      const rel = '/' + relative(dir, f).split(sep).join('/');
      // Vite's hashed file names never change content: cache them for good.
      assets.set(rel, { body: readFileSync(f), type: TYPES[extname(f)] ?? 'application/octet-stream', immutable: rel.startsWith('/assets/') });
    }
  }
  const index = assets.get('/index.html');
  return (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' });
      res.end('only GET and HEAD are served here; RPCs are POSTs to /palimpsest.v1.SessionService/<Method>\n');
      return;
    }
    let path: string;
    try {
      path = decodeURIComponent((req.url ?? '/').split('?')[0] ?? '/');
    } catch {
      path = '';
    }
    const asset = assets.get(path) ?? (path.startsWith('/assets/') ? undefined : index);
    if (!asset) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(index ? 'not found\n' : 'the viewer is not built: run `npm run build:web` (npm ci runs it)\n');
      return;
    }
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': asset.type,
      'content-length': String(asset.body.length),
      'cache-control': asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
    });
    if (req.method === 'HEAD') res.end();
    else res.end(asset.body);
  };
}
