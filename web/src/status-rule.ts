/**
 * The rule behind a session's status in the list (session-status.ts reads the events): pure, no
 * DOM, no network, so it is unit-tested (test/unit/viewer-status-rule.test.ts). It uses the
 * server's own crash-repair rule (src/domain/repair.ts), so the list agrees with RepairSession.
 */
import type { SessionEvent } from '../../src/domain/event.js';
import { interruptedTurnClosers } from '../../src/domain/repair.js';

export type SessionStatus = 'needs-repair' | 'open-turn' | 'interrupted' | 'idle' | 'no-turns' | 'unknown';

/**
 * The status of a log's turn-shaping events, given newest first and ending at (including) the
 * newest turn boundary, or the whole log when there is none. Pure.
 */
export function statusOf(newestFirst: readonly SessionEvent[]): Exclude<SessionStatus, 'unknown'> {
  const boundary = newestFirst.find((e) => e.type === 'turn/start' || e.type === 'turn/end');
  if (boundary === undefined) return 'no-turns';
  if (boundary.type === 'turn/end') {
    const data = boundary.data as { reason?: { kind?: unknown } } | null;
    return data?.reason?.kind === 'interrupted' ? 'interrupted' : 'idle';
  }
  const closers = interruptedTurnClosers([...newestFirst].reverse());
  if (closers.some((c) => c.type === 'tool/result')) return 'needs-repair';
  return closers.length > 0 ? 'open-turn' : 'idle';
}

