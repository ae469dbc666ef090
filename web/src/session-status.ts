/**
 * A session's status for the list (issue #35 item 5), derived in the browser from the tail of its
 * log, with the server's own crash-repair rule (src/domain/repair.ts, what RepairSession would
 * append) so the list never disagrees with RepairSession:
 *
 * - `needs-repair`: a turn is open and a tool call of its open step has no result (RepairSession
 *   would write a TOOL_OUTCOME_UNKNOWN / TOOL_NOT_STARTED result for it);
 * - `open-turn`: a turn is open (an agent is working, or stopped without a tool call pending);
 * - `interrupted`: the last turn ended with `reason.kind = "interrupted"` (what RepairSession and
 *   an agent's own interruption write);
 * - `idle`: the last turn ended otherwise; `no-turns`: the log has no turn at all;
 * - `unknown`: the scan gave up (more than {@link MAX_PAGES} pages since the last turn boundary).
 *
 * Only the turn-shaping event types are read, newest first, up to the newest turn boundary.
 */
import { Direction } from '../../gen/es/palimpsest/v1/service_pb.js';
import type { SessionEvent as WireEvent } from '../../gen/es/palimpsest/v1/event_pb.js';
import type { Json, SessionEvent } from '../../src/domain/event.js';
import { api } from './api.js';
import { statusOf, type SessionStatus } from './status-rule.js';

export type { SessionStatus };

/** The words shown for each status. */
export const STATUS_TEXT: Record<SessionStatus, string> = {
  'needs-repair': 'needs repair',
  'open-turn': 'open turn',
  interrupted: 'interrupted',
  idle: 'idle',
  'no-turns': 'no turns',
  unknown: '?',
};

/** Event types that can change the status: an append of anything else leaves it as it was. */
export const STATUS_TYPES: readonly string[] = ['turn/start', 'turn/end', 'step/start', 'step/end', 'assistant/message', 'tool/call', 'tool/result'];

const PAGE = 200;
const MAX_PAGES = 5;

function toDomain(e: WireEvent): SessionEvent {
  const raw = e.data?.kind.case === 'json' ? e.data.kind.value : 'null';
  let data: Json = null;
  try {
    data = JSON.parse(raw) as Json;
  } catch {
    data = null;
  }
  return { type: e.type, seq: Number(e.seq), time: Number(e.time), data };
}

/** Reads the tail of a session's log (newest first, turn-shaping types only) and derives its status. */
export async function fetchStatus(sessionId: string, signal: AbortSignal): Promise<SessionStatus> {
  const seen: SessionEvent[] = [];
  let pageToken = '';
  for (let page = 0; page < MAX_PAGES; page++) {
    const r = await api.listEvents({ sessionId, direction: Direction.BACKWARD, pageSize: PAGE, pageToken, types: [...STATUS_TYPES] }, { signal });
    for (const e of r.events) {
      const d = toDomain(e);
      seen.push(d);
      if (d.type === 'turn/start' || d.type === 'turn/end') return statusOf(seen);
    }
    if (r.nextPageToken === '') return statusOf(seen);
    pageToken = r.nextPageToken;
  }
  return 'unknown';
}
