/** Structured logging (pino) to stderr. */
import { pino, type Logger } from 'pino';

/** Creates the service logger at a level ('silent' in tests). */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'palimpsest' } }, pino.destination(2));
}
export type { Logger };
