/**
 * An HTTP/2 server on connection.ts, as a net.Server (listen / close / address / 'error' as
 * node:http2's server, which is one too): plaintext (prior knowledge, as gRPC clients connect) or
 * TLS with ALPN `h2` (a TLS client that does not offer h2 is dropped, as node:http2 drops it).
 */
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { H2Connection, type ConnectionOptions } from './connection.js';

/** PEM material of a TLS port; with `ca`, clients must present a certificate it signed. */
export interface TlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer | null;
}

function noop(): void {}

/** A server whose every accepted connection becomes an H2Connection, handed to `onConnection`. */
export function createH2Server(options: ConnectionOptions, tls: TlsMaterial | undefined, onConnection: (c: H2Connection) => void): NetServer {
  const attach = (socket: Socket): void => {
    socket.on('error', noop);
    onConnection(new H2Connection(socket, options));
  };
  if (tls === undefined) return createNetServer(attach);
  const server = createTlsServer({
    cert: tls.cert, key: tls.key, ca: tls.ca ?? undefined, requestCert: tls.ca !== null, rejectUnauthorized: tls.ca !== null, ALPNProtocols: ['h2'],
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.alpnProtocol !== 'h2') socket.destroy();
    else {
      // HTTP/2 forbids TLS renegotiation (RFC 9113 9.2.1).
      socket.disableRenegotiation();
      attach(socket);
    }
  });
  // A client that fails the handshake (mutual TLS without a valid certificate) is dropped.
  server.on('tlsClientError', noop);
  return server;
}
