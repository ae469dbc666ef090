/**
 * `palimpsest sessions --older-than AGE`: the sessions untouched for longer than AGE, listed
 * (read-only) so an operator can see what a retention policy would remove. A session's last
 * activity is the later of its created_at and its last event's time (one ListEvents call per
 * session created before the cutoff). Imported sessions count from the times their file carries.
 */
import { Direction } from '../../gen/palimpsest/v1/service.js';
import type { Session } from '../../gen/palimpsest/v1/session.js';
import { UsageError } from './args.js';
import type { Rpc } from './client.js';

const UNITS: Readonly<Record<string, number>> = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000 };

/** Milliseconds of an age such as `30d`, `12h`, `90m`, `45s`. */
export function parseAge(flag: string, text: string): number {
  const m = /^(\d{1,9})([dhms])$/.exec(text.trim());
  if (!m) throw new UsageError(`${flag} takes an age like 30d, 12h, 90m or 45s, got ${JSON.stringify(text)}`);
  return Number(m[1]) * UNITS[m[2] as string]!;
}

/** A session with its last activity (ms since the epoch). */
export interface AgedSession {
  readonly session: Session;
  readonly lastActivity: number;
}

/** The sessions among `sessions` whose last activity is before `cutoff` (ms since the epoch). */
export async function olderThan(rpc: Rpc, sessions: readonly Session[], cutoff: number): Promise<AgedSession[]> {
  const out: AgedSession[] = [];
  for (const s of sessions) {
    if (s.createdAt >= cutoff) continue;
    let last = s.createdAt;
    if (s.headSeq !== undefined) {
      const page = await rpc.unary(rpc.client.listEvents, {
        sessionId: s.id, fromSeq: undefined, direction: Direction.DIRECTION_BACKWARD, pageSize: 1, pageToken: '', types: [], dataFormat: 0, blobRefs: false,
      });
      last = Math.max(last, page.events[0]?.time ?? last);
    }
    if (last < cutoff) out.push({ session: s, lastActivity: last });
  }
  return out;
}
