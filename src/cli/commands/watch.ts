/**
 * watch: follows a session through SubscribeSurface (surface deltas) or SubscribeEvents
 * (`--events`), one line per stream message, until Ctrl-C (which cancels the stream; exit 0).
 */
import { status, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import type { Command } from '../command.js';
import type { Output } from '../output.js';
import { eventHeader, eventLine, eventRow } from '../format.js';
import { DataFormat, type SubscribeEventsResponse, type SubscribeSurfaceResponse } from '../../../gen/palimpsest/v1/service.js';

type Line = { json: Record<string, unknown> | string; text: string };

function signal(cursor: number | undefined, name: string, out: Output): Line {
  return { json: { cursor: cursor ?? null, signal: name }, text: out.style.dim(`${name} (cursor ${cursor ?? '-'})`) };
}

/** One SubscribeSurface message as a line. */
function surfaceLine(m: SubscribeSurfaceResponse, out: Output): Line | undefined {
  const cursor = m.cursor ?? null;
  const k = m.kind;
  switch (k?.$case) {
    case 'append':
      return { json: { cursor, op: 'append', seq: k.value.seq }, text: `${out.style.green('append ')}  ${k.value.seq}` };
    case 'replace': {
      const { start, end, seq, shadowedSeqs } = k.value;
      return {
        json: { cursor, op: 'replace', start, end, seq, shadowed: shadowedSeqs },
        text: `${out.style.yellow('replace')}  ${start}..${end} -> ${seq}  ${out.style.dim(`shadowed ${JSON.stringify(shadowedSeqs)}`)}`,
      };
    }
    case 'snapshot':
      return { json: { cursor, op: 'snapshot', seqs: k.value.seqs }, text: `${out.style.cyan('snapshot')} ${JSON.stringify(k.value.seqs)}` };
    case 'checkpoint':
      return signal(m.cursor, 'checkpoint', out);
    case 'caughtUp':
      return signal(m.cursor, 'caught-up', out);
    case 'heartbeat':
      return signal(m.cursor, 'heartbeat', out);
    default:
      return undefined;
  }
}

/** One SubscribeEvents message as a line: the event in the reference envelope, or a signal. */
function eventsLine(m: SubscribeEventsResponse, out: Output, width: number): Line | undefined {
  const k = m.kind;
  switch (k?.$case) {
    case 'event':
      return { json: eventLine(k.value), text: eventRow(k.value, out.style, width) };
    case 'caughtUp':
      return signal(m.cursor, 'caught-up', out);
    case 'heartbeat':
      return signal(m.cursor, 'heartbeat', out);
    default:
      return undefined;
  }
}

const watch: Command = {
  name: 'watch',
  summary: 'Follows a session: one line per surface delta (or per event with --events) until Ctrl-C.',
  details:
    'With --json, one JSON object per line: {"cursor":N,"op":"append","seq":N},\n' +
    '{"cursor":N,"op":"replace","start":S,"end":E,"seq":N,"shadowed":[...]}, {"cursor":N,"op":"snapshot","seqs":[...]} or\n' +
    '{"cursor":N,"signal":"caught-up"|"heartbeat"|"checkpoint"} (cursor is null before any event). With --events, events\n' +
    'are printed in the reference envelope (signal lines as above). Resume with --after <last cursor>.',
  positionals: [{ name: 'SESSION' }],
  options: {
    after: { type: 'string', value: 'SEQ', help: 'resume after this cursor (default from the start)' },
    events: { type: 'boolean', help: 'every event (SubscribeEvents) instead of surface deltas' },
    snapshot: { type: 'boolean', help: 'start with a snapshot of the current surface (surface mode; ignores --after)' },
    heartbeat: { type: 'string', value: 'MS', help: 'heartbeat interval (default the server\'s; minimum 100)' },
  },
  examples: ['palimpsest watch demo --json', 'palimpsest watch demo --events --after 41'],
  async run({ args, rpc, out }) {
    const sessionId = args.pos(0);
    const afterSeq = args.int('after');
    const heartbeatIntervalMs = args.int('heartbeat', 100) ?? 0;
    const width = out.width;
    const stream: ClientReadableStream<SubscribeSurfaceResponse | SubscribeEventsResponse> = args.flag('events')
      ? rpc.client.subscribeEvents({ sessionId, afterSeq, heartbeatIntervalMs, dataFormat: DataFormat.DATA_FORMAT_JSON }, rpc.metadata())
      : rpc.client.subscribeSurface({ sessionId, afterSeq, heartbeatIntervalMs, snapshot: args.flag('snapshot'), includeMessages: false, dataFormat: DataFormat.DATA_FORMAT_JSON }, rpc.metadata());
    const render = args.flag('events')
      ? (m: unknown) => eventsLine(m as SubscribeEventsResponse, out, width)
      : (m: unknown) => surfaceLine(m as SubscribeSurfaceResponse, out);
    let interrupted = false;
    const stop = (): void => {
      interrupted = true;
      stream.cancel();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    try {
      if (!out.json && args.flag('events')) await out.write(eventHeader(out.style) + '\n');
      for await (const m of stream) {
        const line = render(m);
        if (line === undefined) continue;
        await out.write((out.json ? (typeof line.json === 'string' ? line.json : JSON.stringify(line.json)) : line.text) + '\n');
      }
    } catch (e) {
      if (interrupted && (e as Partial<ServiceError>).code === status.CANCELLED) return 0;
      throw e;
    } finally {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    }
    return 0;
  },
};

/** The follow commands. */
export const WATCH_COMMANDS: readonly Command[] = [watch];
