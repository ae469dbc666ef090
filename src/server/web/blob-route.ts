/**
 * The web port's `GET /blobs/<digest>` (issue #39, docs/blobs.md "Viewer, web port and clients"):
 * a tenant's blob as plain HTTP, for the viewer's `<img>`s and anything that speaks HTTP. The
 * bytes come from the same app read as the GetBlob RPC (SessionService.readBlob,
 * src/app/blob-refs.ts readBlobChunks), after the same admission (auth.ts admitCall: the
 * per-connection cap, the bearer token and GetBlob's `read` permission) and caller resolution
 * (the verified tenant only): another tenant's digest is 404 exactly like a missing one.
 *
 * - Content-addressed, so cacheable for good: a strong ETag (the digest), `Cache-Control:
 *   private, max-age=31536000, immutable`, `Vary: Authorization`; `If-None-Match` answers 304
 *   (once the tenant is known to have the blob).
 * - `Range: bytes=a-b | a- | -n` (one range; several get the whole blob) answers 206 with
 *   Content-Range, so a download resumes; `If-Range` with another validator gets the whole blob;
 *   a range past the end is 416 with `Content-Range: bytes *\/size`.
 * - Never rendered as a page of the viewer's origin: `X-Content-Type-Options: nosniff`, a
 *   sandboxing CSP, and `Content-Disposition: attachment` for anything but a raster image (SVG
 *   included: it can carry scripts). A media type that is not a plain `type/subtype[; params]` is
 *   sent as application/octet-stream.
 * - Errors are the RPC's (status-map.ts), as a Connect error JSON body with the HTTP status of
 *   its code (DATA_LOSS -> 500, NOT_FOUND -> 404, UNAUTHENTICATED -> 401, ...).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { ServiceError } from '@grpc/grpc-js';
import { codeToHttpStatus, errorToJson } from '@connectrpc/connect/protocol-connect';
import type { BlobChunk } from '../../app/blob-refs.js';
import type { CallContext } from '../../app/session-service.js';
import { DomainError } from '../../domain/errors.js';
import { admitCall, CREDENTIAL_KEY, TENANT_KEY, type StreamLimiter, type TokenRegistry } from '../auth.js';
import type { ContextResolver } from '../permissions.js';
import { toConnectError } from './connect-adapter.js';

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/** The path prefix served here. */
export const BLOBS_PREFIX = '/blobs/';

/** The app's blob read (SessionService.readBlob). */
export type BlobReader = (caller: CallContext, digest: string, offset: number) => AsyncIterable<BlobChunk>;

/** What the route needs from the web port. */
export interface BlobRouteOptions {
  readonly readBlob: BlobReader;
  readonly resolver: ContextResolver;
  readonly registry: TokenRegistry | undefined;
  readonly limiter: StreamLimiter;
  readonly fail: (err: unknown) => ServiceError;
}

/** The RPC whose admission and permission this route shares. */
const METHOD = 'GetBlob';
const METHOD_PATH = '/palimpsest.v1.SessionService/GetBlob';

/** Raster image types shown inline (everything else is a download). */
const INLINE = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif', 'image/bmp', 'image/x-icon', 'image/vnd.microsoft.icon']);

/** A plain `type/subtype[; param=value...]` in printable ASCII (anything else is never put in a header). */
const MEDIA_TYPE = /^[A-Za-z0-9][\w!#$&^.+-]*\/[A-Za-z0-9][\w!#$&^.+-]*(\s*;\s*[\w!#$&^.+-]+=("[\x20-\x21\x23-\x7e]*"|[\w!#$&^.+-]+))*$/;

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': "sandbox; default-src 'none'; img-src 'self'; style-src 'unsafe-inline'",
  'referrer-policy': 'no-referrer',
  'cross-origin-resource-policy': 'same-origin',
} as const;

/** The headers a blob response carries whatever its status. */
function blobHeaders(digest: string, info: BlobChunk['info']): Record<string, string> {
  const type = MEDIA_TYPE.test(info.mediaType) ? info.mediaType : 'application/octet-stream';
  const essence = (type.split(';', 1)[0] ?? '').trim().toLowerCase();
  return {
    ...SECURITY_HEADERS,
    'content-type': type,
    etag: `"${digest}"`,
    'cache-control': 'private, max-age=31536000, immutable',
    vary: 'authorization',
    'accept-ranges': 'bytes',
    'content-disposition': INLINE.has(essence) ? 'inline' : `attachment; filename="${digest.replace(':', '-')}"`,
  };
}

/** A single byte range of a Range header: first..last (last inclusive, undefined = to the end), or the last `suffix` bytes. */
type ByteRange = { readonly first: number; readonly last: number | undefined } | { readonly suffix: number };

/** The one range of a `Range: bytes=...` header; undefined for none, several, or a form we do not serve (then the whole blob is sent, as RFC 9110 allows). */
export function parseRange(header: string | undefined): ByteRange | undefined {
  const m = header === undefined ? null : /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m) return undefined;
  const [a, b] = [m[1] as string, m[2] as string];
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const suffix = Number(b);
    return Number.isSafeInteger(suffix) && suffix > 0 ? { suffix } : undefined;
  }
  const first = Number(a);
  const last = b === '' ? undefined : Number(b);
  if (!Number.isSafeInteger(first) || (last !== undefined && (!Number.isSafeInteger(last) || last < first))) return undefined;
  return { first, last };
}

/** Whether an If-None-Match header matches the ETag (weak comparison, `*` included). */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  return ifNoneMatch.split(',').some((t) => {
    const v = t.trim();
    return v === '*' || v === etag || v === `W/${etag}`;
  });
}

function header(req: Req, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Writes `bytes`, waiting for a drain when the response asks for one; false when the client went away. */
function write(res: Res, bytes: Uint8Array): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  if ((res as ServerResponse).write(bytes)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => () => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}

/** The request handler of `GET|HEAD /blobs/<digest>`. */
export function blobRoute(o: BlobRouteOptions): (req: Req, res: Res, connection: string) => void {
  const sendError = (res: Res, err: unknown, extra: Record<string, string> = {}): void => {
    const ce = toConnectError(err, o.fail);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.writeHead(codeToHttpStatus(ce.code), { ...SECURITY_HEADERS, 'content-type': 'application/json', 'cache-control': 'no-store', ...extra });
    res.end(JSON.stringify(errorToJson(ce, undefined)));
  };

  const serve = async (req: Req, res: Res, connection: string): Promise<void> => {
    let digest: string;
    try {
      digest = decodeURIComponent((req.url ?? '').split('?', 1)[0]?.slice(BLOBS_PREFIX.length) ?? '');
    } catch {
      digest = '';
    }
    const admitted = admitCall(o.limiter, o.registry, connection, METHOD, false, header(req, 'authorization'));
    res.once('close', admitted.release);
    const verified = new Map<string, string>();
    if (admitted.caller) {
      verified.set(TENANT_KEY, admitted.caller.tenant);
      verified.set(CREDENTIAL_KEY, admitted.caller.sha256);
    }
    // Only what admission verified answers for x-palimpsest-* (never a client-sent header).
    const caller = o.resolver({ path: METHOD_PATH, header: (n) => verified.get(n) ?? (n.startsWith('x-palimpsest-') ? undefined : header(req, n)) }, 'read');

    let range = parseRange(header(req, 'range'));
    const ifRange = header(req, 'if-range');
    if (ifRange !== undefined && ifRange.trim() !== `"${digest}"`) range = undefined;
    const start = range === undefined ? 0 : 'suffix' in range ? 0 : range.first;
    const chunks = o.readBlob(caller, digest, start)[Symbol.asyncIterator]();
    try {
      let next;
      try {
        next = await chunks.next();
      } catch (e) {
        // A range that starts past the end: 416 with the size (the RPC's OUT_OF_RANGE).
        if (e instanceof DomainError && e.reason === 'BLOB_OFFSET_OUT_OF_RANGE') {
          res.writeHead(416, { ...SECURITY_HEADERS, 'content-range': `bytes */${e.metadata['size'] ?? '*'}`, 'content-type': 'text/plain; charset=utf-8' });
          res.end(`${e.message}\n`);
          return;
        }
        throw e;
      }
      if (next.done === true) throw new Error('the blob read returned no chunk');
      const info = next.value.info;
      const size = info.size;
      const headers = blobHeaders(digest, info);
      if (matches(header(req, 'if-none-match'), headers.etag as string)) {
        res.writeHead(304, headers);
        res.end();
        return;
      }
      let first = start;
      let last = size - 1;
      if (range !== undefined) {
        if ('suffix' in range) first = Math.max(0, size - range.suffix);
        else if (range.last !== undefined) last = Math.min(range.last, size - 1);
        if (first >= size) {
          res.writeHead(416, { ...SECURITY_HEADERS, 'content-range': `bytes */${size}`, 'content-type': 'text/plain; charset=utf-8' });
          res.end(`the range starts past the end of blob ${digest} (${size} bytes)\n`);
          return;
        }
      }
      const length = Math.max(0, last - first + 1);
      res.writeHead(range === undefined ? 200 : 206, {
        ...headers,
        'content-length': String(length),
        ...(range === undefined ? {} : { 'content-range': `bytes ${first}-${last}/${size}` }),
      });
      if (req.method === 'HEAD' || length === 0) {
        res.end();
        return;
      }
      // Send [first, last] of the chunks (which start at `start`).
      let sent = 0;
      for (let c: IteratorResult<BlobChunk> = next; c.done !== true; c = await chunks.next()) {
        const from = Math.max(0, first - c.value.offset);
        const to = Math.min(c.value.bytes.byteLength, last + 1 - c.value.offset);
        if (to > from) {
          if (!(await write(res, c.value.bytes.subarray(from, to)))) return;
          sent += to - from;
        }
        if (sent >= length) break;
      }
      res.end();
    } finally {
      await chunks.return?.(undefined);
    }
  };

  return (req, res, connection) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      req.resume();
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' });
      res.end('blobs are read with GET (or HEAD): GET /blobs/<digest>\n');
      return;
    }
    serve(req, res, connection).catch((e: unknown) => sendError(res, e));
  };
}
