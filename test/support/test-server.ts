/**
 * Starts a real server on 127.0.0.1:0 with a fresh SQLite file, and a generated client for it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials, Metadata, type CallOptions, type ServiceError } from '@grpc/grpc-js';
import { startServer, type RunningServer, type ServerExtensions } from '../../src/main.js';
import type { ServerConfig } from '../../src/server/config.js';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { decodeError, type DecodedError } from '../../src/client/error-details.js';

/** A started server plus a client and its temp directory. */
export interface TestServer {
  readonly server: RunningServer;
  readonly client: SessionServiceClient;
  readonly dir: string;
  readonly dbPath: string;
  stop(): Promise<void>;
}

/** Starts a server (SQLite in a temp dir unless `db` is given). */
export async function startTestServer(config: Partial<ServerConfig> = {}, ext: ServerExtensions = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-test-'));
  const dbPath = config.db ?? join(dir, 'test.db');
  const server = await startServer({ listen: '127.0.0.1:0', logLevel: 'silent', ...config, db: dbPath }, ext);
  const client = new SessionServiceClient(server.address, credentials.createInsecure());
  return {
    server, client, dir, dbPath,
    async stop() {
      client.close();
      await server.shutdown();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The (request, metadata, options, callback) overload of a generated unary method (TS infers from the last overload). */
type Unary<Req, Res> = (req: Req, md: Metadata, opts: Partial<CallOptions>, cb: (err: ServiceError | null, res: Res) => void) => unknown;

/** Promisifies a unary client method: `await call(client.getSession.bind(client), req)`. */
export function call<Req, Res>(fn: Unary<Req, Res>, req: Req, md: Metadata = new Metadata(), opts: Partial<CallOptions> = {}): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn(req, md, opts, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

/** Awaits a call that must fail, returning its decoded status details. */
export async function callError<Req, Res>(fn: Unary<Req, Res>, req: Req, md: Metadata = new Metadata()): Promise<DecodedError> {
  try {
    await call(fn, req, md);
  } catch (e) {
    return decodeError(e as ServiceError);
  }
  throw new Error('expected the call to fail');
}
