/**
 * The composition root: which store (SQLite file, or memory for ':memory:'), which change feed
 * (the store-driven one, so subscribers also hear commits of other processes on the same
 * database), the app over them, and the gRPC server around the app. `palimpsest serve`, the test
 * server and the benches start Palimpsest through here; the server module never chooses a store.
 */
import { SessionService } from './app/session-service.js';
import { StoreChangeFeed } from './app/store-change-feed.js';
import { monitorStorage } from './app/storage-monitor.js';
import type { SessionStore } from './app/store-port.js';
import type { ServerConfig } from './server/config.js';
import type { Logger } from './server/logger.js';
import { resolveConfig, serveApp, serverLogger, type RunningServer, type ServerExtensions } from './server/server.js';
import { MemorySessionStore } from './store/memory/memory-store.js';
import { SqliteSessionStore } from './store/sqlite/sqlite-store.js';

export type { RunningServer, ServerExtensions };

/** Opens the configured store. */
export function openStore(config: ServerConfig): SessionStore {
  if (config.db === ':memory:') return new MemorySessionStore();
  return new SqliteSessionStore({ path: config.db, durability: config.durability });
}

/** The app over the configured store, with the store-driven change feed. */
export function composeApp(config: ServerConfig, logger: Logger): SessionService {
  // Storage failures are logged once per episode (not per request) by the monitor.
  const store = monitorStorage(openStore(config), logger);
  // Subscribers hear this process's commits at once and other processes' through the store.
  return new SessionService(store, config.limits, Date.now, logger, undefined, new StoreChangeFeed(store.openHeadWatch()));
}

/** Starts Palimpsest (store, app, gRPC server); resolves once it is listening. */
export async function startServer(partial: Partial<ServerConfig> = {}, ext: ServerExtensions = {}): Promise<RunningServer> {
  const config = resolveConfig(partial);
  const logger = serverLogger(config);
  const app = composeApp(config, logger);
  try {
    return await serveApp(app, config, logger, ext);
  } catch (e) {
    await app.close().catch(() => undefined);
    throw e;
  }
}
