/**
 * CORS for the web port: off by default (a page on another origin cannot call the API from a
 * browser); `--web-cors-origins` lists the origins that may. Connect and gRPC-Web requests are
 * never "simple" requests (their content types need a preflight), so without an allowed origin a
 * foreign page's browser refuses to send them at all.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { cors } from '@connectrpc/connect';

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/**
 * Applies the CORS policy; returns true when the request has been answered (a preflight).
 * `origins` are exact origins (`https://app.example.com`) or `*` for any.
 */
export function applyCors(origins: readonly string[], req: Req, res: Res): boolean {
  const origin = req.headers.origin;
  if (typeof origin !== 'string' || origins.length === 0) return false;
  const allowed = origins.includes('*') || origins.includes(origin);
  const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
  if (!allowed) {
    if (!preflight) return false;
    res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8', vary: 'Origin' });
    res.end(`origin ${origin} is not allowed (the server's --web-cors-origins)\n`);
    return true;
  }
  res.setHeader('access-control-allow-origin', origin);
  res.setHeader('vary', 'Origin');
  if (preflight) {
    res.writeHead(204, {
      'access-control-allow-methods': cors.allowedMethods.join(', '),
      'access-control-allow-headers': [...cors.allowedHeaders, 'Authorization'].join(', '),
      'access-control-max-age': '7200',
    });
    res.end();
    return true;
  }
  res.setHeader('access-control-expose-headers', cors.exposedHeaders.join(', '));
  return false;
}
