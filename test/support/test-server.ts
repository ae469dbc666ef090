/**
 * Starts a real server on 127.0.0.1:0 with a fresh store, and a generated client for it. The
 * store is a fresh SQLite file, or, when the test runs with PALIMPSEST_TEST_STORE=postgres (the
 * `e2e-postgres` vitest project), a fresh database of the run's PostgreSQL cluster: the same e2e
 * files run against both stores.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials, Metadata, type CallOptions, type ServiceError } from '@grpc/grpc-js';
import { startServer, type StartedServer, type ServerExtensions } from '../../src/main.js';
import type { ServerConfig } from '../../src/server/config.js';
import { subscriptionStreams, type SubscriptionStreams } from '../../src/server/subscribe-handlers.js';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { decodeError, type DecodedError } from '../../src/client/error-details.js';
import { createTestDatabase } from './postgres.js';


/** The store the e2e servers of this test process use. */
export const TEST_STORE: 'sqlite' | 'postgres' = process.env.PALIMPSEST_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';

/** A started server plus a client and its temp directory. */
export interface TestServer {
  readonly server: StartedServer;
  readonly client: SessionServiceClient;
  readonly dir: string;
  /** The SQLite file, or the PostgreSQL URL (see TEST_STORE). */
  readonly dbPath: string;
  /** The server's subscription streams (open streams, heartbeat schedule), unless `ext.streams` replaced them. */
  readonly streams: SubscriptionStreams | undefined;
  stop(): Promise<void>;
}

/** A fresh store location for TEST_STORE: an SQLite path in `dir`, or a new PostgreSQL database (and its drop). */
export async function freshTestDb(dir: string): Promise<{ db: string; drop(): Promise<void> }> {
  if (TEST_STORE === 'postgres') {
    const database = await createTestDatabase();
    return { db: database.url, drop: () => database.drop() };
  }
  return { db: join(dir, 'test.db'), drop: async () => undefined };
}

/** Starts a server (a fresh store of TEST_STORE unless `db` is given). */
export async function startTestServer(config: Partial<ServerConfig> = {}, ext: ServerExtensions = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-test-'));
  const fresh = config.db === undefined ? await freshTestDb(dir) : { db: config.db, drop: async () => undefined };
  const dbPath = fresh.db;
  // The subscription streams the server builds, captured through its hook (no registry in src/).
  let streams: SubscriptionStreams | undefined;
  const hooked: ServerExtensions = ext.streams !== undefined ? ext : { ...ext, streams: (app, cfg, metrics) => (streams = subscriptionStreams(app, cfg, metrics)) };
  const server = await startServer({ listen: '127.0.0.1:0', logLevel: 'silent', ...config, db: dbPath }, hooked);
  const client = new SessionServiceClient(server.address, credentials.createInsecure());
  return {
    server, client, dir, dbPath,
    get streams() {
      return streams;
    },
    async stop() {
      client.close();
      await server.shutdown();
      await fresh.drop();
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
