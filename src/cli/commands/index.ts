/**
 * The table of client commands (`serve` is separate: it runs the server, not a client).
 */
import type { Command } from '../command.js';
import { COMPACTION_COMMANDS } from './compaction.js';
import { EVENT_COMMANDS } from './events.js';
import { SEARCH_COMMANDS } from './search.js';
import { SESSION_COMMANDS } from './sessions.js';
import { TRANSFER_COMMANDS } from './transfer.js';
import { WATCH_COMMANDS } from './watch.js';

/** Every client command, in help order. */
export const COMMANDS: readonly Command[] = [...SESSION_COMMANDS, ...TRANSFER_COMMANDS, ...EVENT_COMMANDS, ...COMPACTION_COMMANDS, ...WATCH_COMMANDS, ...SEARCH_COMMANDS];

/** The command named `name`, if any. */
export function findCommand(name: string): Command | undefined {
  return COMMANDS.find((c) => c.name === name);
}
