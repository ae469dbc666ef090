/**
 * Throwaway PKI for TLS tests, generated with openssl into a temp dir (never committed):
 * a CA, a server certificate for 127.0.0.1/localhost, a client certificate signed by the CA, and
 * a second, unrelated CA with its own client certificate (the "bad" one).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Paths of the generated PEM files. */
export interface TestPki {
  readonly dir: string;
  readonly caCert: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  readonly otherCaCert: string;
  readonly otherClientCert: string;
  readonly otherClientKey: string;
}

function ossl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: 'pipe' });
}

function makeCa(dir: string, name: string): void {
  ossl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', '1', '-subj', `/CN=${name}`], dir);
}

function makeLeaf(dir: string, name: string, ca: string, ext: string): void {
  ossl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`], dir);
  writeFileSync(join(dir, `${name}.ext`), ext);
  ossl(['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.pem`, '-days', '1', '-extfile', `${name}.ext`], dir);
}

/** Generates the PKI (needs the openssl binary; .ci/system-deps installs it). */
export function generatePki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-pki-'));
  makeCa(dir, 'ca');
  makeCa(dir, 'otherca');
  makeLeaf(dir, 'server', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  makeLeaf(dir, 'client', 'ca', 'extendedKeyUsage=clientAuth\n');
  makeLeaf(dir, 'otherclient', 'otherca', 'extendedKeyUsage=clientAuth\n');
  const p = (f: string) => join(dir, f);
  return {
    dir, caCert: p('ca.pem'), serverCert: p('server.pem'), serverKey: p('server.key'), clientCert: p('client.pem'), clientKey: p('client.key'),
    otherCaCert: p('otherca.pem'), otherClientCert: p('otherclient.pem'), otherClientKey: p('otherclient.key'),
  };
}
