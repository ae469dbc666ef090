/**
 * Transport security: TLS with a server certificate, optional mutual TLS, and the rule that
 * plaintext is only served on loopback unless the operator says --insecure.
 */
import { readFileSync } from 'node:fs';
import { ServerCredentials } from '@grpc/grpc-js';

/** A configuration the server refuses to start with. */
export class ConfigError extends Error {}

/** True for loopback hosts. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

function read(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new ConfigError(`cannot read the ${what} ${JSON.stringify(path)}: ${(e as Error).message}`);
  }
}

/** Server credentials for the configuration. */
export function serverCredentials(cfg: { listenHost: string; tlsCert: string; tlsKey: string; tlsClientCa: string; insecure: boolean }): { credentials: ServerCredentials; tls: boolean; mtls: boolean } {
  if (!cfg.tlsCert && !cfg.tlsKey) {
    if (cfg.tlsClientCa) throw new ConfigError('--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is on top of TLS)');
    if (!isLoopback(cfg.listenHost) && !cfg.insecure) {
      throw new ConfigError(
        `refusing to serve plaintext on ${cfg.listenHost}: session logs hold users' conversations and tool output, and anyone on the network could read them. ` +
        'Pass --tls-cert and --tls-key to serve TLS, or --insecure if the network is already protected (e.g. a service mesh).',
      );
    }
    return { credentials: ServerCredentials.createInsecure(), tls: false, mtls: false };
  }
  if (!cfg.tlsCert || !cfg.tlsKey) throw new ConfigError('TLS needs both --tls-cert and --tls-key');
  const cert = read(cfg.tlsCert, 'TLS certificate');
  const key = read(cfg.tlsKey, 'TLS key');
  const ca = cfg.tlsClientCa ? read(cfg.tlsClientCa, 'client CA') : null;
  return {
    credentials: ServerCredentials.createSsl(ca, [{ cert_chain: cert, private_key: key }], ca !== null),
    tls: true,
    mtls: ca !== null,
  };
}
