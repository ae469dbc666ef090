/** Structured logging (pino) to stderr. */
import { format } from 'node:util';
import { setLogger } from '@grpc/grpc-js';
import { pino, type Logger } from 'pino';

/**
 * Creates the service logger at a level ('silent' in tests). grpc-js's own diagnostics (it
 * prints them to stderr as plain text by default, e.g. next to a bind failure the server
 * already reports in one line) go into the same structured log at debug.
 */
export function createLogger(level: string): Logger {
  const logger = pino({ level, base: { service: 'palimpsest' } }, pino.destination(2));
  setLogger({ error: (...args: unknown[]) => logger.debug({ source: 'grpc-js' }, format(...args)) });
  return logger;
}
export type { Logger };
