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

/** The rule shared by both ports: plaintext only on loopback unless --insecure. */
export function assertPlaintextAllowed(listenHost: string, insecure: boolean): void {
  if (!isLoopback(listenHost) && !insecure) {
    throw new ConfigError(
      `refusing to serve plaintext on ${listenHost}: session logs hold users' conversations and tool output, and anyone on the network could read them. ` +
      'Pass --tls-cert and --tls-key to serve TLS, or --insecure if the network is already protected (e.g. a service mesh).',
    );
  }
}

/** The PEM files of the TLS flags (undefined = plaintext, which must be allowed on the host). */
export function tlsMaterial(cfg: { listenHost: string; tlsCert: string; tlsKey: string; tlsClientCa: string; insecure: boolean }): { cert: Buffer; key: Buffer; ca: Buffer | null } | undefined {
  if (!cfg.tlsCert && !cfg.tlsKey) {
    if (cfg.tlsClientCa) throw new ConfigError('--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is on top of TLS)');
    assertPlaintextAllowed(cfg.listenHost, cfg.insecure);
    return undefined;
  }
  if (!cfg.tlsCert || !cfg.tlsKey) throw new ConfigError('TLS needs both --tls-cert and --tls-key');
  return {
    cert: read(cfg.tlsCert, 'TLS certificate'),
    key: read(cfg.tlsKey, 'TLS key'),
    ca: cfg.tlsClientCa ? read(cfg.tlsClientCa, 'client CA') : null,
  };
}

/** Server credentials for the configuration. */
export function serverCredentials(cfg: { listenHost: string; tlsCert: string; tlsKey: string; tlsClientCa: string; insecure: boolean }): { credentials: ServerCredentials; tls: boolean; mtls: boolean } {
  const pem = tlsMaterial(cfg);
  if (!pem) return { credentials: ServerCredentials.createInsecure(), tls: false, mtls: false };
  return {
    credentials: ServerCredentials.createSsl(pem.ca, [{ cert_chain: pem.cert, private_key: pem.key }], pem.ca !== null),
    tls: true,
    mtls: pem.ca !== null,
  };
}
