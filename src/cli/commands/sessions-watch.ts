/**
 * `palimpsest sessions --watch`: follows the session feed (SubscribeSessions), one line per
 * change of any session the caller may see, until Ctrl-C (which cancels the stream; exit 0).
 * After a dropped connection or a server restart it resumes by itself after the last position it
 * printed (a note on stderr; --no-reconnect exits 3 instead), so no change is missed or repeated.
 */
import { status, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import { UsageError } from '../args.js';
import type { CommandContext } from '../command.js';
import type { Output } from '../output.js';
import { resuming } from '../resume.js';
import { SessionChangeKind, type SessionChange, type SubscribeSessionsResponse } from '../../../gen/palimpsest/v1/service.js';

const KIND_NAMES: Record<number, string> = {
  [SessionChangeKind.SESSION_CHANGE_KIND_CREATED]: 'created',
  [SessionChangeKind.SESSION_CHANGE_KIND_DELETED]: 'deleted',
  [SessionChangeKind.SESSION_CHANGE_KIND_LABELS_CHANGED]: 'labels_changed',
  [SessionChangeKind.SESSION_CHANGE_KIND_APPENDED]: 'appended',
};

interface Line {
  json: Record<string, unknown>;
  text: string;
}

/** One change, at its own feed position. */
function changeLine(c: SessionChange, position: number, out: Output): Line {
  const kind = KIND_NAMES[c.kind] ?? 'unknown';
  const json: Record<string, unknown> = {
    position, kind, session: c.sessionId, headSeq: c.headSeq ?? null, eventCount: c.eventCount,
    surfaceLength: c.surfaceLength, labels: c.labels, createdAt: c.createdAt, time: c.time,
  };
  if (kind === 'appended') json.eventTypes = c.eventTypes;
  if (kind === 'labels_changed') json.previousLabels = c.previousLabels;
  const paint = kind === 'created' ? out.style.green : kind === 'deleted' ? out.style.red : kind === 'labels_changed' ? out.style.yellow : out.style.cyan;
  const detail = kind === 'appended'
    ? `head ${c.headSeq ?? '-'}  events ${c.eventCount}  surface ${c.surfaceLength}  ${out.style.dim(c.eventTypes.join(','))}`
    : kind === 'labels_changed'
      ? `${JSON.stringify(c.previousLabels)} -> ${JSON.stringify(c.labels)}`
      : `events ${c.eventCount}${Object.keys(c.labels).length > 0 ? `  ${out.style.dim(JSON.stringify(c.labels))}` : ''}`;
  return { json, text: `${out.style.dim(String(position).padStart(8))}  ${paint(kind.padEnd(14))}  ${c.sessionId}  ${detail}` };
}

/**
 * One feed message as JSON objects and lines for people, one per change (the stream asks for
 * batches, SubscribeSessionsRequest.batch: a `changes` message prints one line per change, each
 * with its own position); empty: nothing to print.
 */
export function feedLines(m: SubscribeSessionsResponse, out: Output): Line[] {
  const k = m.kind;
  switch (k?.$case) {
    case 'change':
      return [changeLine(k.value, k.value.position || m.position, out)];
    case 'changes':
      return k.value.changes.map((c) => changeLine(c, c.position, out));
    case 'caughtUp':
      return [{ json: { position: m.position, signal: 'caught-up' }, text: out.style.dim(`caught-up (position ${m.position})`) }];
    case 'heartbeat':
      return [{ json: { position: m.position, signal: 'heartbeat' }, text: out.style.dim(`heartbeat (position ${m.position})`) }];
    default:
      return [];
  }
}

/** Runs `sessions --watch`. */
export async function watchSessions({ args, rpc, out }: CommandContext): Promise<number> {
  const labelSelector = args.labels('selector');
  if (args.list('label').length > 0) throw new UsageError('--label lists sessions; with --watch use --selector KEY=VALUE');
  const after = args.int('after');
  const fromNow = args.flag('from-now');
  const heartbeatIntervalMs = args.int('heartbeat', 100) ?? 0;
  type Msg = SubscribeSessionsResponse;
  const open = (position: number | undefined): ClientReadableStream<Msg> => rpc.client.subscribeSessions({
    // A resumed stream continues after the last position received (the first message, caught-up,
    // carries one), so only a stream that never received anything starts "from now" again.
    after: position, fromNow: fromNow && position === undefined, labelSelector, heartbeatIntervalMs, batch: true,
  }, rpc.metadata());
  let interrupted = false;
  let current: ClientReadableStream<Msg> | undefined;
  const stop = (): void => {
    interrupted = true;
    current?.cancel();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const onRetry = (cursor: number | undefined, err: ServiceError, delayMs: number): void => {
    out.stderr.write(`${out.errStyle.dim(`connection lost (${err.details || status[err.code]}); resuming after position ${cursor ?? '-'} in ${delayMs} ms`)}\n`);
  };
  try {
    const stream = resuming<Msg>(open, { after, reconnect: !args.flag('no-reconnect'), onRetry, stopped: () => interrupted }, (s) => { current = s; });
    // A batch is printed whole before the next message is read: a resume continues after it.
    for await (const m of stream) {
      for (const line of feedLines(m, out)) await out.write((out.json ? JSON.stringify(line.json) : line.text) + '\n');
    }
  } catch (e) {
    if (interrupted && (e as Partial<ServiceError>).code === status.CANCELLED) return 0;
    throw e;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  return 0;
}
